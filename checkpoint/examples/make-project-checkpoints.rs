//! Writes the project's own model directories (`cases/checkpoints/project-*`, or under the
//! directory given as the first argument): layouts the producer-library fixtures do not cover.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cases/checkpoints"),
        PathBuf::from,
    );
    let models = w4a16_checkpoint::project_models::write_project_models(&root)?;
    for m in &models {
        let bytes: usize = m.files.values().map(Vec::len).sum();
        println!("{} ({bytes} bytes): {}", m.name, m.description);
    }
    Ok(())
}
