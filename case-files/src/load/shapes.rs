//! The sections all case files share into one set: `batch_sizes` and `[[provider]]` (defined in
//! one file only), `[[model]]` layers, `[[shape]]` and `[[moe_shape]]` (every name once, refused
//! where it is defined the second time).

use std::collections::HashMap;

use w4a16_reference::layer::LayerShape;

use super::rules::check_shape;
use super::{Parsed, origin, valid_name};
use crate::error::CaseFileError;
use crate::schema::{ModelRaw, MoeShapeRaw};
use crate::{CaseSet, NamedMoeShape, NamedShape, Provider};

/// The group size of model layers that do not name one (docs/contract.md §7: "G = 128 unless noted").
const DEFAULT_GROUP: usize = 128;

/// Where each shape name (dense or MoE) was first defined, for "already defined" messages.
#[derive(Default)]
struct ShapeNames(HashMap<String, String>);

impl ShapeNames {
    /// Claims `name` for the entry at `here`, refusing at `{here}.name` a name that is taken.
    fn claim(&mut self, f: &Parsed, here: &str, name: &str) -> Result<(), CaseFileError> {
        if let Some(first) = self.0.get(name) {
            return Err(f.err(
                format!("{here}.name"),
                format!("shape \"{name}\" already defined in {first}"),
            ));
        }
        self.0.insert(name.to_owned(), origin(f.path, here));
        Ok(())
    }
}

/// Where a section that only one file may define was defined.
#[derive(Default)]
struct DefinedIn {
    batch_sizes: Option<String>,
    providers: Option<String>,
}

/// Reads the shared sections of every file into `set`: per file batch sizes, providers, model
/// layers and shapes, then every file's MoE shapes.
pub(super) fn read_shared_sections(
    parsed: &[Parsed],
    set: &mut CaseSet,
) -> Result<(), CaseFileError> {
    let mut defined = DefinedIn::default();
    let mut names = ShapeNames::default();
    for f in parsed {
        read_batch_sizes(f, &mut defined, set)?;
        read_providers(f, &mut defined, set)?;
        for (i, m) in f.raw.model.iter().enumerate() {
            read_model(f, i, m, &mut names, set)?;
        }
        read_shapes(f, &mut names, set)?;
    }
    for f in parsed {
        for (i, s) in f.raw.moe_shape.iter().enumerate() {
            let here = format!("moe_shape[{i}]");
            let group = s.group.map_or(DEFAULT_GROUP, |g| g.0);
            let shape = moe_shape(f, &here, &s.name, s, group)?;
            add_moe_shape(f, &here, shape, None, &mut names, set)?;
        }
    }
    Ok(())
}

/// `batch_sizes`: one file defines it, strictly increasing.
fn read_batch_sizes(
    f: &Parsed,
    defined: &mut DefinedIn,
    set: &mut CaseSet,
) -> Result<(), CaseFileError> {
    let Some(b) = &f.raw.batch_sizes else {
        return Ok(());
    };
    if let Some(first) = &defined.batch_sizes {
        return Err(f.err("batch_sizes", format!("already defined in {first}")));
    }
    let sizes: Vec<usize> = b.iter().map(|p| p.0).collect();
    if sizes.is_empty() {
        return Err(f.err("batch_sizes", "expected at least one batch size"));
    }
    if let Some(i) = (1..sizes.len()).find(|&i| sizes[i] <= sizes[i - 1]) {
        return Err(f.err(
            format!("batch_sizes[{i}]"),
            "batch sizes must be strictly increasing",
        ));
    }
    set.batch_sizes = sizes;
    defined.batch_sizes = Some(origin(f.path, "batch_sizes"));
    Ok(())
}

/// `[[provider]]`: one file defines them, each with its own name and (dtype, symmetry) pair.
fn read_providers(
    f: &Parsed,
    defined: &mut DefinedIn,
    set: &mut CaseSet,
) -> Result<(), CaseFileError> {
    if f.raw.provider.is_empty() {
        return Ok(());
    }
    if let Some(first) = &defined.providers {
        return Err(f.err("provider", format!("providers already defined in {first}")));
    }
    for (i, p) in f.raw.provider.iter().enumerate() {
        if !valid_name(&p.name, false) {
            return Err(f.err(
                format!("provider[{i}].name"),
                format!("\"{}\" is not a valid name (a-z, 0-9, -, _)", p.name),
            ));
        }
        if set
            .providers
            .iter()
            .any(|q| q.name == p.name || (q.dtype, q.symmetry) == (p.dtype, p.symmetry))
        {
            return Err(f.err(
                format!("provider[{i}]"),
                format!(
                    "provider \"{}\" repeats a name or a (dtype, symmetry) pair",
                    p.name
                ),
            ));
        }
        set.providers.push(Provider {
            name: p.name.clone(),
            dtype: p.dtype,
            symmetry: p.symmetry,
        });
    }
    defined.providers = Some(origin(f.path, "provider"));
    Ok(())
}

/// One `[[model]]`: its MoE layers, then its dense layers, each a shape `<model>.<layer>`.
fn read_model(
    f: &Parsed,
    i: usize,
    m: &ModelRaw,
    names: &mut ShapeNames,
    set: &mut CaseSet,
) -> Result<(), CaseFileError> {
    if !valid_name(&m.name, true) {
        return Err(f.err(
            format!("model[{i}].name"),
            format!("\"{}\" is not a valid name (a-z, 0-9, ., -, _)", m.name),
        ));
    }
    if m.layer.is_empty() && m.moe.is_empty() {
        return Err(f.err(
            format!("model[{i}].layer"),
            "a model needs at least one [[model.layer]] or [[model.moe]]",
        ));
    }
    for (j, l) in m.moe.iter().enumerate() {
        let here = format!("model[{i}].moe[{j}]");
        let group = l.group.or(m.group).map_or(DEFAULT_GROUP, |g| g.0);
        let shape = moe_shape(f, &here, &format!("{}.{}", m.name, l.name), l, group)?;
        add_moe_shape(f, &here, shape, Some(m.name.clone()), names, set)?;
    }
    for (j, l) in m.layer.iter().enumerate() {
        let here = format!("model[{i}].layer[{j}]");
        if !valid_name(&l.name, false) {
            return Err(f.err(
                format!("{here}.name"),
                format!("\"{}\" is not a valid layer name (a-z, 0-9, -, _)", l.name),
            ));
        }
        let group = l.group.or(m.group).map_or(DEFAULT_GROUP, |g| g.0);
        if let Err(e) = check_shape(l.k.0, group) {
            // A group size the layer inherits is refused where it was written.
            let key = match e.key() {
                "group" if l.group.is_some() => format!("{here}.group"),
                "group" if m.group.is_some() => format!("model[{i}].group"),
                "group" => format!("{here}.k"),
                which => format!("{here}.{which}"),
            };
            return Err(f.err(key, e.to_string()));
        }
        let name = format!("{}.{}", m.name, l.name);
        names.claim(f, &here, &name)?;
        set.shapes.push(NamedShape {
            name,
            shape: LayerShape::new(l.n.0, l.k.0, group),
            model: Some(m.name.clone()),
        });
    }
    Ok(())
}

/// `[[shape]]`: dense shapes outside any model.
fn read_shapes(f: &Parsed, names: &mut ShapeNames, set: &mut CaseSet) -> Result<(), CaseFileError> {
    for (i, s) in f.raw.shape.iter().enumerate() {
        let here = format!("shape[{i}]");
        if !valid_name(&s.name, true) {
            return Err(f.err(
                format!("{here}.name"),
                format!("\"{}\" is not a valid name (a-z, 0-9, ., -, _)", s.name),
            ));
        }
        if let Err(e) = check_shape(s.k.0, s.group.0) {
            return Err(f.err(format!("{here}.{}", e.key()), e.to_string()));
        }
        names.claim(f, &here, &s.name)?;
        set.shapes.push(NamedShape {
            name: s.name.clone(),
            shape: LayerShape::new(s.n.0, s.k.0, s.group.0),
            model: None,
        });
    }
    Ok(())
}

/// One MoE layer from `[[model.moe]]` or `[[moe_shape]]`, checked: a valid name, a layer the
/// resident layout can hold, `1 ≤ top_k ≤ experts`.
fn moe_shape(
    f: &Parsed,
    here: &str,
    name: &str,
    raw: &MoeShapeRaw,
    group: usize,
) -> Result<NamedMoeShape, CaseFileError> {
    if !valid_name(&raw.name, true) {
        return Err(f.err(
            format!("{here}.name"),
            format!("\"{}\" is not a valid name (a-z, 0-9, ., -, _)", raw.name),
        ));
    }
    if let Err(e) = check_shape(raw.k.0, group) {
        return Err(f.err(format!("{here}.{}", e.key()), e.to_string()));
    }
    if raw.top_k.0 > raw.experts.0 {
        return Err(f.err(
            format!("{here}.top_k"),
            format!(
                "top_k = {} is more than the {} experts",
                raw.top_k.0, raw.experts.0
            ),
        ));
    }
    Ok(NamedMoeShape {
        name: name.to_owned(),
        shape: LayerShape::new(raw.n.0, raw.k.0, group),
        experts: raw.experts.0,
        top_k: raw.top_k.0,
        model: None,
    })
}

/// Adds a MoE shape, refusing a name any shape (dense or MoE) already has.
fn add_moe_shape(
    f: &Parsed,
    here: &str,
    mut shape: NamedMoeShape,
    model: Option<String>,
    names: &mut ShapeNames,
    set: &mut CaseSet,
) -> Result<(), CaseFileError> {
    names.claim(f, here, &shape.name)?;
    shape.model = model;
    set.moe_shapes.push(shape);
    Ok(())
}
