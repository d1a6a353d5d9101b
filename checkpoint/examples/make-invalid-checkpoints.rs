//! Writes `cases/invalid-checkpoints/` (or the directory given as the first argument): broken
//! model directories from the project's own producers, each with its expected refusal.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cases/invalid-checkpoints"),
        PathBuf::from,
    );
    let cases = w4a16_checkpoint::fixtures::write_invalid_checkpoints(&root)?;
    let bytes: usize = cases
        .iter()
        .flat_map(|c| c.files.values())
        .map(Vec::len)
        .sum();
    println!(
        "wrote {} broken checkpoints ({bytes} bytes) under {}",
        cases.len(),
        root.display()
    );
    Ok(())
}
