//! Known-bad entries and model descriptions, checked against the loaded cases: a suppression
//! must name cases that exist, and a description must agree with `models.toml`.

use std::collections::HashMap;
use std::path::PathBuf;

use w4a16_kernels::Target;

use super::Parsed;
use crate::CaseSet;
use crate::error::CaseFileError;
use crate::known_bad::{CaseIds, KnownBad, KnownBadRaw};
use crate::model::ModelDescription;

/// One `[[known_bad]]` entry: its ids must match a case, its target pattern a target.
pub(super) fn check_known_bad(
    f: &Parsed,
    i: usize,
    kb: &KnownBadRaw,
    set: &CaseSet,
) -> Result<KnownBad, CaseFileError> {
    let here = format!("known_bad[{i}]");
    if !set.cases().any(|c| kb.id.matches(&c.id)) {
        return Err(f.err(
            format!("{here}.id"),
            format!(
                "\"{}\" matches no case; a suppression must name cases that exist",
                kb.id
            ),
        ));
    }
    let shared = kb.shared(f.path, here.clone());
    shared
        .check_target(&Target::ALL)
        .map_err(|m| f.err(format!("{here}.target"), m.to_string()))?;
    Ok(KnownBad {
        scope: CaseIds { id: kb.id.clone() },
        shared,
    })
}

/// The model descriptions: each name once, each agreeing with `models.toml`.
pub(super) fn check_descriptions(
    models: &[ModelDescription],
    set: &CaseSet,
) -> Result<(), CaseFileError> {
    let mut model_from: HashMap<String, PathBuf> = HashMap::new();
    for desc in models {
        if let Some(first) = model_from.get(&desc.name) {
            return Err(CaseFileError::new(
                &desc.file,
                "name",
                format!(
                    "model \"{}\" already described in {}",
                    desc.name,
                    first.display()
                ),
            ));
        }
        model_from.insert(desc.name.clone(), desc.file.clone());
        check_description(desc, set)?;
    }
    Ok(())
}

/// A description of a model that `models.toml` also lists must agree with it, layer by layer.
fn check_description(desc: &ModelDescription, set: &CaseSet) -> Result<(), CaseFileError> {
    let listed = set
        .shapes
        .iter()
        .any(|s| s.model.as_deref() == Some(desc.name.as_str()));
    if !listed {
        return Ok(());
    }
    for (i, l) in desc.linears.iter().enumerate() {
        let name = format!("{}.{}", desc.name, l.name);
        match set.shapes.iter().find(|s| s.name == name) {
            Some(s) if s.shape == l.shape => {}
            Some(s) => {
                return Err(CaseFileError::new(
                    &desc.file,
                    format!("linear[{i}]"),
                    format!(
                        "K={} N={} G={} disagrees with {name} in models.toml (K={} N={} G={})",
                        l.shape.k, l.shape.n, l.shape.group, s.shape.k, s.shape.n, s.shape.group
                    ),
                ));
            }
            None => {
                return Err(CaseFileError::new(
                    &desc.file,
                    format!("linear[{i}].name"),
                    format!(
                        "{name} is not a layer of model {} in models.toml",
                        desc.name
                    ),
                ));
            }
        }
    }
    Ok(())
}
