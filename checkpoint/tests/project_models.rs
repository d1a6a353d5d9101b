//! The committed `cases/checkpoints/project-*` folders are what the project's generator writes
//! today, byte for byte, and each opens with every linear detected and loaded.

use std::path::PathBuf;
use w4a16_checkpoint::ModelDir;
use w4a16_checkpoint::project_models::project_models;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cases/checkpoints")
}

#[test]
fn the_committed_project_models_are_up_to_date_and_load() {
    let models = project_models().expect("the generator runs");
    assert!(models.len() >= 6);
    for m in &models {
        let dir = root().join(m.name);
        for (file, bytes) in &m.files {
            let committed = std::fs::read(dir.join(file)).unwrap_or_else(|e| {
                panic!(
                    "{}/{file}: {e}; run `cargo run -p w4a16-checkpoint --example make-project-checkpoints`",
                    m.name
                )
            });
            assert!(
                committed == *bytes,
                "{}/{file} differs from the generator's output; regenerate with `cargo run -p w4a16-checkpoint --example make-project-checkpoints`",
                m.name
            );
        }
        let model = ModelDir::open(&dir).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        assert!(
            model.refusals().is_empty(),
            "{}: {:?}",
            m.name,
            model.refusals()
        );
        assert!(!model.linears().is_empty());
        for l in model.linears() {
            model
                .load(l)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", m.name, l.module));
        }
    }
}
