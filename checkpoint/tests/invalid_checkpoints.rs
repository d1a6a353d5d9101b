//! Every folder of `cases/invalid-checkpoints/` is refused with the message in its
//! expected.txt, and the committed bytes are what the generator writes today.

use std::path::{Path, PathBuf};
use w4a16_checkpoint::{CheckpointError, ModelDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cases/invalid-checkpoints")
}

/// The first refusal a check of the whole directory meets: open, detection, then each load.
fn first_refusal(dir: &Path) -> Option<String> {
    let model = match ModelDir::open(dir) {
        Ok(m) => m,
        Err(e) => return Some(e.to_string()),
    };
    if let Some(e) = model.refusals().first() {
        return Some(e.to_string());
    }
    model
        .linears()
        .iter()
        .find_map(|l| model.load(l).err().map(|e: CheckpointError| e.to_string()))
}

fn folders() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root())
        .expect("cases/invalid-checkpoints exists")
        .map(|e| e.expect("readable").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_broken_checkpoint_is_refused_with_its_message() {
    let dirs = folders();
    assert!(
        dirs.len() >= 10,
        "expected at least 10 broken checkpoints, got {}",
        dirs.len()
    );
    for dir in dirs {
        let expected = std::fs::read_to_string(dir.join("expected.txt"))
            .unwrap_or_else(|e| panic!("{}: expected.txt: {e}", dir.display()));
        let expected = expected.trim();
        assert!(
            !expected.is_empty(),
            "{}: empty expected.txt",
            dir.display()
        );
        let got = first_refusal(&dir)
            .unwrap_or_else(|| panic!("{}: accepted, expected a refusal", dir.display()));
        eprintln!("{}: {got}", dir.file_name().unwrap().to_string_lossy());
        assert!(
            got.contains(expected),
            "{}:\n  refusal:  {got}\n  expected: {expected}",
            dir.display()
        );
    }
}

#[test]
fn committed_fixtures_match_the_generator() {
    let cases = w4a16_checkpoint::fixtures::invalid_checkpoints().expect("generator runs");
    let names: Vec<String> = cases.iter().map(|c| c.name.to_string()).collect();
    let on_disk: Vec<String> = folders()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let hint = "regenerate: cargo run -p w4a16-checkpoint --example make-invalid-checkpoints";
    assert_eq!(on_disk, names, "{hint}");
    for c in &cases {
        let dir = root().join(c.name);
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            c.files.keys().cloned().collect::<Vec<_>>(),
            "{}: {hint}",
            c.name
        );
        for (file, bytes) in &c.files {
            let disk = std::fs::read(dir.join(file)).unwrap();
            assert!(
                disk == *bytes,
                "{}/{file} differs from the generator; {hint}",
                c.name
            );
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert_eq!(
        readme,
        w4a16_checkpoint::fixtures::readme(&cases),
        "README.md: {hint}"
    );
}
