//! Loading: parse every file (serde, unknown keys refused), merge the shared sections, expand
//! each suite's sweeps into cases, check known-bad entries and model descriptions against the
//! result. Every refusal names the file and the key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use w4a16_kernels::Target;
use w4a16_reference::ActDtype;
use w4a16_reference::data::EXACT_MAX_K;
use w4a16_reference::layer::{LayerShape, Symmetry};

use super::error::{CaseFileError, SpanIndex, from_toml_error};
use super::glob::glob_match;
use super::known_bad::{CaseIds, KnownBad};
use super::model::ModelDescription;
use super::schema::{
    Axes, CaseFile, CountSpec, GroupSpec, MSpec, MoeShapeRaw, MoeSweepRaw, ShapeGenerator, SuiteRaw,
};
use super::{
    CarrierMode, Case, CaseSet, DataClass, MapKind, MoeRouting, NamedMoeShape, NamedShape,
    Producer, Provider, RoutingKind, RowPadding, Suite, ViewLayout,
};

/// The group size of model layers that do not name one (docs/contract.md §7: "G = 128 unless noted").
const DEFAULT_GROUP: usize = 128;

/// Loads `dir/*.toml` and `dir/sweeps/*.toml` as case files and `dir/models/*.toml` as model
/// descriptions. Other folders (`invalid/`, `exceptions/`) are not case files.
pub fn load_all(dir: &Path) -> Result<CaseSet, CaseFileError> {
    if !dir.is_dir() {
        return Err(CaseFileError::new(dir, "", "not a folder of case files"));
    }
    let files = case_files(dir)?;
    let mut models = Vec::new();
    for path in toml_files(&dir.join("models"))? {
        models.push(ModelDescription::load(&path)?);
    }
    let sources = read_all(&files)?;
    build(&sources, models)
}

/// The case files `load_all` reads: `dir/*.toml`, then `dir/sweeps/*.toml`, each sorted.
pub fn case_files(dir: &Path) -> Result<Vec<PathBuf>, CaseFileError> {
    let mut files = toml_files(dir)?;
    files.extend(toml_files(&dir.join("sweeps"))?);
    Ok(files)
}

/// Loads exactly these case files (no model descriptions), in this order.
pub fn load_files(files: &[PathBuf]) -> Result<CaseSet, CaseFileError> {
    build(&read_all(files)?, Vec::new())
}

/// Loads case files from memory: `(path for messages, text)`.
pub fn load_sources(sources: &[(PathBuf, String)]) -> Result<CaseSet, CaseFileError> {
    build(sources, Vec::new())
}

fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, CaseFileError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CaseFileError::new(dir, "", format!("cannot list: {e}")))?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    Ok(out)
}

fn read_all(files: &[PathBuf]) -> Result<Vec<(PathBuf, String)>, CaseFileError> {
    files
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| (p.clone(), t))
                .map_err(|e| CaseFileError::new(p, "", format!("cannot read: {e}")))
        })
        .collect()
}

struct Parsed<'a> {
    path: &'a Path,
    raw: CaseFile,
    index: Option<SpanIndex>,
}

impl Parsed<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> CaseFileError {
        let key = key.into();
        let line = self.index.as_ref().and_then(|ix| ix.line_of_key(&key));
        CaseFileError::new(self.path, key, message).with_line(line)
    }
}

/// Where a name was first defined, for "defined twice" messages.
fn origin(path: &Path, key: &str) -> String {
    format!("{} (key \"{key}\")", path.display())
}

fn valid_name(name: &str, dots: bool) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '_'
                || (dots && c == '.')
        })
}

/// Format-level rules of a layer shape (docs/contract.md §1–2): the resident layout must be able to hold it.
fn check_shape(k: usize, group: usize) -> Result<(), (&'static str, String)> {
    if !k.is_multiple_of(8) {
        return Err((
            "k",
            format!("K={k} must be a multiple of 8 (8 codes per u32 word)"),
        ));
    }
    if group > k || !k.is_multiple_of(group) {
        return Err((
            "group",
            format!("K={k} is not a multiple of the group size {group}"),
        ));
    }
    Ok(())
}

fn build(
    sources: &[(PathBuf, String)],
    models: Vec<ModelDescription>,
) -> Result<CaseSet, CaseFileError> {
    let mut parsed = Vec::with_capacity(sources.len());
    for (path, text) in sources {
        let raw: CaseFile = toml::from_str(text).map_err(|e| from_toml_error(path, text, &e))?;
        parsed.push(Parsed {
            path,
            raw,
            index: SpanIndex::new(text),
        });
    }

    let mut set = CaseSet::default();
    let mut batch_from: Option<String> = None;
    let mut providers_from: Option<String> = None;
    let mut shape_from: HashMap<String, String> = HashMap::new();

    for f in &parsed {
        if let Some(b) = &f.raw.batch_sizes {
            if let Some(first) = &batch_from {
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
            batch_from = Some(origin(f.path, "batch_sizes"));
        }
        if !f.raw.provider.is_empty() {
            if let Some(first) = &providers_from {
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
            providers_from = Some(origin(f.path, "provider"));
        }
        for (i, m) in f.raw.model.iter().enumerate() {
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
                add_moe_shape(
                    f,
                    &here,
                    shape,
                    Some(m.name.clone()),
                    &mut shape_from,
                    &mut set,
                )?;
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
                let key_group = if l.group.is_some() {
                    format!("{here}.group")
                } else if m.group.is_some() {
                    format!("model[{i}].group")
                } else {
                    format!("{here}.k")
                };
                if let Err((which, msg)) = check_shape(l.k.0, group) {
                    let key = if which == "group" {
                        key_group
                    } else {
                        format!("{here}.{which}")
                    };
                    return Err(f.err(key, msg));
                }
                let name = format!("{}.{}", m.name, l.name);
                if let Some(first) = shape_from.get(&name) {
                    return Err(f.err(
                        format!("{here}.name"),
                        format!("shape \"{name}\" already defined in {first}"),
                    ));
                }
                shape_from.insert(name.clone(), origin(f.path, &here));
                set.shapes.push(NamedShape {
                    name,
                    shape: LayerShape::new(l.n.0, l.k.0, group),
                    model: Some(m.name.clone()),
                });
            }
        }
        for (i, s) in f.raw.shape.iter().enumerate() {
            let here = format!("shape[{i}]");
            if !valid_name(&s.name, true) {
                return Err(f.err(
                    format!("{here}.name"),
                    format!("\"{}\" is not a valid name (a-z, 0-9, ., -, _)", s.name),
                ));
            }
            if let Err((which, msg)) = check_shape(s.k.0, s.group.0) {
                return Err(f.err(format!("{here}.{which}"), msg));
            }
            if let Some(first) = shape_from.get(&s.name) {
                return Err(f.err(
                    format!("{here}.name"),
                    format!("shape \"{}\" already defined in {first}", s.name),
                ));
            }
            shape_from.insert(s.name.clone(), origin(f.path, &here));
            set.shapes.push(NamedShape {
                name: s.name.clone(),
                shape: LayerShape::new(s.n.0, s.k.0, s.group.0),
                model: None,
            });
        }
    }

    for f in &parsed {
        for (i, s) in f.raw.moe_shape.iter().enumerate() {
            let here = format!("moe_shape[{i}]");
            let group = s.group.map_or(DEFAULT_GROUP, |g| g.0);
            let shape = moe_shape(f, &here, &s.name, s, group)?;
            add_moe_shape(f, &here, shape, None, &mut shape_from, &mut set)?;
        }
    }

    let mut suite_from: HashMap<String, String> = HashMap::new();
    for f in &parsed {
        let Some(suite) = &f.raw.suite else {
            if !f.raw.moe_sweep.is_empty() {
                return Err(f.err(
                    "moe_sweep[0]",
                    "sweeps need a [suite] table in the same file",
                ));
            }
            if !f.raw.sweep.is_empty() {
                return Err(f.err("sweep[0]", "sweeps need a [suite] table in the same file"));
            }
            if !f.raw.case.is_empty() {
                return Err(f.err("case[0]", "cases need a [suite] table in the same file"));
            }
            continue;
        };
        if !valid_name(&suite.name, false) {
            return Err(f.err(
                "suite.name",
                format!(
                    "\"{}\" is not a valid suite name (a-z, 0-9, -, _)",
                    suite.name
                ),
            ));
        }
        if let Some(first) = suite_from.get(&suite.name) {
            return Err(f.err(
                "suite.name",
                format!("suite \"{}\" already defined in {first}", suite.name),
            ));
        }
        suite_from.insert(suite.name.clone(), origin(f.path, "suite"));
        set.suites.push(expand_suite(f, suite, &set)?);
    }
    set.suites.sort_by(|a, b| a.name.cmp(&b.name));

    for f in &parsed {
        for (i, kb) in f.raw.known_bad.iter().enumerate() {
            set.known_bad.push(check_known_bad(f, i, kb, &set)?);
        }
    }

    let mut model_from: HashMap<String, PathBuf> = HashMap::new();
    for desc in &models {
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
        check_description(desc, &set)?;
    }
    set.models = models;
    Ok(set)
}

/// One list axis of a MoE sweep: its own value, else the default; never empty.
fn moe_axis<T: Clone>(
    f: &Parsed,
    own: &Option<Vec<T>>,
    here: &str,
    name: &str,
    default: Vec<T>,
) -> Result<(Vec<T>, String), CaseFileError> {
    let key = format!("{here}.{name}");
    let v = own.clone().unwrap_or(default);
    if v.is_empty() {
        return Err(f.err(key, "expected at least one value"));
    }
    Ok((v, key))
}

/// The cases of one `[[moe_sweep]]`: shapes × tokens × dtype × symmetry × G × class × E × top_k ×
/// routing × map × routed weight × padding.
fn expand_moe_sweep(
    f: &Parsed,
    suite: &SuiteRaw,
    sw: &MoeSweepRaw,
    here: &str,
    set: &CaseSet,
) -> Result<Vec<Case>, CaseFileError> {
    let shapes = match_shapes(
        f,
        &sw.shapes,
        &format!("{here}.shapes"),
        &set.moe_shapes,
        |s| &s.name,
        "[[model.moe]] or [[moe_shape]]",
    )?;
    if sw.tokens.is_empty() {
        return Err(f.err(
            format!("{here}.tokens"),
            "expected at least one token count",
        ));
    }
    let dtype = moe_axis(f, &sw.dtype, here, "dtype", ActDtype::ALL.to_vec())?.0;
    let symmetry = moe_axis(
        f,
        &sw.symmetry,
        here,
        "symmetry",
        vec![Symmetry::Sym, Symmetry::Asym],
    )?;
    let group = moe_axis(f, &sw.group, here, "group", vec![GroupSpec::Shape])?;
    let class = moe_axis(f, &sw.class, here, "class", vec![DataClass::Realistic])?;
    let experts = moe_axis(f, &sw.experts, here, "experts", vec![CountSpec::Shape])?;
    let top_k = moe_axis(f, &sw.top_k, here, "top_k", vec![CountSpec::Shape])?;
    let routing = moe_axis(f, &sw.routing, here, "routing", vec![RoutingKind::Softmax])?.0;
    let map = moe_axis(f, &sw.map, here, "map", vec![MapKind::All])?.0;
    let weighted = moe_axis(f, &sw.routed_weight, here, "routed_weight", vec![true])?.0;
    let padding = moe_axis(f, &sw.padding, here, "padding", vec![RowPadding::default()])?.0;
    let hint = "; set allow_unsupported = true in [suite] to test the refusal";

    let mut out = Vec::new();
    let lens = [
        shapes.len(),
        sw.tokens.len(),
        dtype.len(),
        symmetry.0.len(),
        group.0.len(),
        class.0.len(),
        experts.0.len(),
        top_k.0.len(),
        routing.len(),
        map.len(),
        weighted.len(),
        padding.len(),
    ];
    for [s, t, dt, sym, gspec, cl, e_spec, k_spec, rk, mk, w, pad] in product(lens) {
        let s = shapes[s];
        let (sym, gspec, cl) = (symmetry.0[sym], group.0[gspec], class.0[cl]);
        let (rk, mk) = (routing[rk], map[mk]);
        let named = NamedShape {
            name: s.name.clone(),
            shape: s.shape,
            model: s.model.clone(),
        };
        let count = |spec: CountSpec, own: usize| match spec {
            CountSpec::Size(v) => v,
            CountSpec::Shape => own,
        };
        // Each check reads only the axes before it, so the first point that fails one is where
        // the nested loops this replaced failed: the same error for the same file.
        if !suite.allow_unsupported
            && let Some((_, msg)) = unsupported_reason(s.shape.k, s.shape.n, sym, false)
        {
            return Err(f.err(
                symmetry.1.clone(),
                format!("shape \"{}\": {msg}{hint}", s.name),
            ));
        }
        let g = group_for(gspec, &named).map_err(|m| f.err(group.1.clone(), m))?;
        if let Some(msg) = exact_too_large(cl, s.shape.k) {
            return Err(f.err(class.1.clone(), format!("shape \"{}\": {msg}", s.name)));
        }
        let e = count(experts.0[e_spec], s.experts);
        let k = count(top_k.0[k_spec], s.top_k);
        if k > e {
            return Err(f.err(
                top_k.1.clone(),
                format!(
                    "shape \"{}\": top_k = {k} is more than the {e} experts",
                    s.name
                ),
            ));
        }
        // The routing must be makeable (an empty expert needs E ≥ top_k + 2, a repeated
        // expert top_k ≥ 2, …): the rules do not depend on T, so one token decides.
        if let Err(err) = w4a16_reference::moe::route(rk, 0, 1, e, k) {
            return Err(f.err(
                format!("{here}.routing"),
                format!("shape \"{}\", E = {e}, top_k = {k}: {err}", s.name),
            ));
        }
        if mk == MapKind::EveryOther && e < 2 {
            return Err(f.err(
                format!("{here}.map"),
                "an expert map needs at least 2 experts",
            ));
        }
        out.push(build_case(
            &suite.name,
            &s.name,
            LayerShape::new(s.shape.n, s.shape.k, g),
            Point {
                m: sw.tokens[t].0,
                dtype: dtype[dt],
                symmetry: sym,
                class: cl,
                padding: padding[pad],
                bias: false,
                act_order: false,
                producer: super::DEFAULT_PRODUCER,
                x_layout: ViewLayout::default(),
                y_layout: ViewLayout::default(),
                // MoE cases never carry the carrier (the moe kernel reads scales and zero
                // points).
                carrier: CarrierMode::Off,
                moe: Some(MoeRouting {
                    experts: e,
                    top_k: k,
                    routing: rk,
                    map: mk,
                    routed_weight: weighted[w],
                }),
            },
        ));
    }
    Ok(out)
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
    if let Err((which, msg)) = check_shape(raw.k.0, group) {
        return Err(f.err(format!("{here}.{which}"), msg));
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
    shape_from: &mut HashMap<String, String>,
    set: &mut CaseSet,
) -> Result<(), CaseFileError> {
    if let Some(first) = shape_from.get(&shape.name) {
        return Err(f.err(
            format!("{here}.name"),
            format!("shape \"{}\" already defined in {first}", shape.name),
        ));
    }
    shape_from.insert(shape.name.clone(), origin(f.path, here));
    shape.model = model;
    set.moe_shapes.push(shape);
    Ok(())
}

/// The shapes a sweep's name patterns (globs) select, in pattern order, each once; a pattern
/// that matches nothing is refused naming its key. One rule for dense and MoE sweeps.
fn match_shapes<'s, T>(
    f: &Parsed,
    patterns: &[String],
    key: &str,
    shapes: &'s [T],
    name: impl Fn(&T) -> &str,
    what: &str,
) -> Result<Vec<&'s T>, CaseFileError> {
    if patterns.is_empty() {
        return Err(f.err(key, "expected at least one shape name or pattern"));
    }
    let mut out: Vec<&T> = Vec::new();
    for (j, pat) in patterns.iter().enumerate() {
        let matched: Vec<&T> = shapes.iter().filter(|s| glob_match(pat, name(s))).collect();
        if matched.is_empty() {
            return Err(f.err(
                format!("{key}[{j}]"),
                format!("\"{pat}\" matches no {what}"),
            ));
        }
        for s in matched {
            if !out.iter().any(|x| name(x) == name(s)) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// An axis value and the key it came from (the sweep's own, or the suite's default).
fn pick<T: Clone>(
    own: &Option<T>,
    dflt: &Option<T>,
    here: &str,
    name: &str,
) -> Option<(T, String)> {
    match (own, dflt) {
        (Some(v), _) => Some((v.clone(), format!("{here}.{name}"))),
        (None, Some(v)) => Some((v.clone(), format!("suite.{name}"))),
        (None, None) => None,
    }
}

struct Resolved {
    /// (shape, M), shape-major: the product of `shapes` and `m`, or a generator's points.
    points: Vec<(NamedShape, usize)>,
    shapes_key: String,
    dtype: Vec<ActDtype>,
    symmetry: (Vec<Symmetry>, String),
    group: (Vec<GroupSpec>, String),
    class: (Vec<DataClass>, String),
    padding: Vec<RowPadding>,
    bias: Vec<bool>,
    act_order: (Vec<bool>, String),
    producer: Vec<Producer>,
    /// Every (X layout, Y layout) pair of the two axes.
    layouts: Vec<(ViewLayout, ViewLayout)>,
    carrier: Vec<CarrierMode>,
}

/// The (shape, M) points of a generator, each shape named for what it straddles and its K
/// (`skinny-edge.x-above.k5504`), since a case id carries the shape's name but not its K.
fn generate(generator: ShapeGenerator) -> Vec<(NamedShape, usize)> {
    use w4a16_kernels::set::{EdgeSide, SkinnyCapacity, skinny_capacity_edges};
    match generator {
        ShapeGenerator::SkinnyCapacityEdges => skinny_capacity_edges()
            .into_iter()
            .map(|e| {
                let capacity = match e.capacity {
                    SkinnyCapacity::Rows => "rows",
                    SkinnyCapacity::StagedX => "x",
                    SkinnyCapacity::StagedScales => "scales",
                };
                let side = match e.side {
                    EdgeSide::Below => "below",
                    EdgeSide::At => "at",
                    EdgeSide::Above => "above",
                };
                let shape = NamedShape {
                    name: format!("skinny-edge.{capacity}-{side}.k{}", e.k),
                    shape: LayerShape::new(e.n, e.k, e.group),
                    model: None,
                };
                (shape, e.m)
            })
            .collect(),
    }
}

/// A sweep's named shapes (globs over every shape) and its M list, from the sweep or `[suite]`.
fn named_shapes_and_m(
    f: &Parsed,
    own: &Axes,
    dflt: &Axes,
    here: &str,
    set: &CaseSet,
) -> Result<(Vec<NamedShape>, String, Vec<usize>), CaseFileError> {
    let Some((patterns, shapes_key)) = pick(&own.shapes, &dflt.shapes, here, "shapes") else {
        return Err(f.err(
            format!("{here}.shapes"),
            "required key is missing (set it here or in [suite])",
        ));
    };
    let shapes: Vec<NamedShape> = match_shapes(
        f,
        &patterns,
        &shapes_key,
        &set.shapes,
        |s| &s.name,
        "shape in models.toml or any [[shape]]",
    )?
    .into_iter()
    .cloned()
    .collect();
    let Some((mspec, m_key)) = pick(&own.m, &dflt.m, here, "m") else {
        return Err(f.err(
            format!("{here}.m"),
            "required key is missing (set it here or in [suite])",
        ));
    };
    let m = match mspec {
        MSpec::List(v) => v,
        MSpec::BatchSizes if set.batch_sizes.is_empty() => {
            return Err(f.err(
                m_key,
                "\"batch_sizes\" needs batch_sizes = [...] in a case file (models.toml)",
            ));
        }
        MSpec::BatchSizes => set.batch_sizes.clone(),
    };
    Ok((shapes, shapes_key, m))
}

fn resolve(
    f: &Parsed,
    own: &Axes,
    dflt: &Axes,
    here: &str,
    generated: Option<ShapeGenerator>,
    set: &CaseSet,
) -> Result<Resolved, CaseFileError> {
    let (points, shapes_key) = match generated {
        Some(generator) => {
            // The generator gives each shape its own M: a `shapes` or `m` beside it would be
            // silently ignored, so either is refused.
            for (key, present) in [("shapes", own.shapes.is_some()), ("m", own.m.is_some())] {
                if present {
                    return Err(f.err(
                        format!("{here}.{key}"),
                        "a sweep with `generated` takes its shapes and M from the generator; \
                         leave this key out",
                    ));
                }
            }
            (generate(generator), format!("{here}.generated"))
        }
        None => {
            let (shapes, shapes_key, m) = named_shapes_and_m(f, own, dflt, here, set)?;
            let points = shapes
                .into_iter()
                .flat_map(|s| m.iter().map(move |&m| (s.clone(), m)))
                .collect();
            (points, shapes_key)
        }
    };
    let dtype = axis(
        f,
        &own.dtype,
        &dflt.dtype,
        here,
        "dtype",
        ActDtype::ALL.to_vec(),
    )?;
    let symmetry = axis(
        f,
        &own.symmetry,
        &dflt.symmetry,
        here,
        "symmetry",
        vec![Symmetry::Sym, Symmetry::Asym],
    )?;
    let group = axis(
        f,
        &own.group,
        &dflt.group,
        here,
        "group",
        vec![GroupSpec::Shape],
    )?;
    let class = axis(
        f,
        &own.class,
        &dflt.class,
        here,
        "class",
        vec![DataClass::Realistic],
    )?;
    let padding = axis(
        f,
        &own.padding,
        &dflt.padding,
        here,
        "padding",
        vec![RowPadding::default()],
    )?;
    let bias = axis(f, &own.bias, &dflt.bias, here, "bias", vec![false])?;
    let act_order = axis(
        f,
        &own.act_order,
        &dflt.act_order,
        here,
        "act_order",
        vec![false],
    )?;
    let producer = axis(
        f,
        &own.producer,
        &dflt.producer,
        here,
        "producer",
        vec![super::DEFAULT_PRODUCER],
    )?;
    let x_layout = axis(
        f,
        &own.x_layout,
        &dflt.x_layout,
        here,
        "x_layout",
        vec![ViewLayout::default()],
    )?;
    let y_layout = axis(
        f,
        &own.y_layout,
        &dflt.y_layout,
        here,
        "y_layout",
        vec![ViewLayout::default()],
    )?;
    let layouts = x_layout
        .0
        .iter()
        .flat_map(|&x| y_layout.0.iter().map(move |&y| (x, y)))
        .collect();
    let carrier = axis(
        f,
        &own.carrier,
        &dflt.carrier,
        here,
        "carrier",
        vec![CarrierMode::default()],
    )?;
    Ok(Resolved {
        layouts,
        carrier: carrier.0,
        points,
        shapes_key,
        dtype: dtype.0,
        symmetry,
        group,
        class,
        padding: padding.0,
        bias: bias.0,
        act_order,
        producer: producer.0,
    })
}

/// One list axis: the sweep's, else the suite's, else the default; never empty.
fn axis<T: Clone>(
    f: &Parsed,
    own: &Option<Vec<T>>,
    dflt: &Option<Vec<T>>,
    here: &str,
    name: &str,
    default: Vec<T>,
) -> Result<(Vec<T>, String), CaseFileError> {
    let (v, key) = pick(own, dflt, here, name).unwrap_or((default, format!("{here}.{name}")));
    if v.is_empty() {
        return Err(f.err(key, "expected at least one value"));
    }
    Ok((v, key))
}

/// The exact class keeps every fp32 partial sum exact only up to this K.
fn exact_too_large(class: DataClass, k: usize) -> Option<String> {
    (class == DataClass::Exact && k > EXACT_MAX_K)
        .then(|| format!("the exact class keeps fp32 sums exact only for K ≤ {EXACT_MAX_K}; K={k}"))
}

/// The group size a spec means for one shape, or why it cannot apply.
fn group_for(spec: GroupSpec, s: &NamedShape) -> Result<usize, String> {
    let k = s.shape.k;
    let g = match spec {
        GroupSpec::Shape => s.shape.group,
        GroupSpec::Channelwise => k,
        GroupSpec::Size(g) => g,
    };
    if g > k || !k.is_multiple_of(g) {
        return Err(format!(
            "group size {g} does not divide K={k} of shape \"{}\"",
            s.name
        ));
    }
    Ok(g)
}

/// Rules every case of a suite without `allow_unsupported` must meet (docs/contract.md §1): K % 16 == 0,
/// packed zero points need N % 8 == 0, and no format carries act-order.
fn unsupported_reason(
    k: usize,
    n: usize,
    symmetry: Symmetry,
    act_order: bool,
) -> Option<(&'static str, String)> {
    if !k.is_multiple_of(16) {
        return Some((
            "shapes",
            format!("K={k} is not a multiple of 16 (docs/contract.md §1)"),
        ));
    }
    if symmetry == Symmetry::Asym && !n.is_multiple_of(8) {
        return Some((
            "symmetry",
            format!(
                "asymmetric zero points are packed 8 per u32 along N, and N={n} is not a multiple of 8"
            ),
        ));
    }
    if act_order {
        return Some((
            "act_order",
            "no kernel of the set takes act-order (g_idx) layers".to_owned(),
        ));
    }
    None
}

/// Every index tuple of axes of lengths `lens`, the last axis fastest: the order of nested
/// `for` loops over the axes, without the nesting. Empty when any axis is.
fn product<const N: usize>(lens: [usize; N]) -> impl Iterator<Item = [usize; N]> {
    let total: usize = lens.iter().product();
    (0..total).map(move |mut i| {
        let mut at = [0; N];
        for d in (0..N).rev() {
            at[d] = i % lens[d];
            i /= lens[d];
        }
        at
    })
}

/// One case's value on every axis but its shape: a point of a sweep, a `[[case]]` entry or a
/// point of a MoE sweep.
#[derive(Clone, Copy, Debug)]
struct Point {
    m: usize,
    dtype: ActDtype,
    symmetry: Symmetry,
    class: DataClass,
    padding: RowPadding,
    bias: bool,
    act_order: bool,
    producer: Producer,
    x_layout: ViewLayout,
    y_layout: ViewLayout,
    carrier: CarrierMode,
    moe: Option<MoeRouting>,
}

/// The case at `p` of suite `suite` on shape `shape_name` (N, K, G = `shape`), with its id:
/// the one constructor every kind of entry goes through, so an id never depends on how the
/// case was declared.
fn build_case(suite: &str, shape_name: &str, shape: LayerShape, p: Point) -> Case {
    let mut case = Case {
        id: String::new(),
        suite: suite.to_owned(),
        shape_name: shape_name.to_owned(),
        shape,
        m: p.m,
        dtype: p.dtype,
        symmetry: p.symmetry,
        class: p.class,
        padding: p.padding,
        bias: p.bias,
        act_order: p.act_order,
        producer: p.producer,
        x_layout: p.x_layout,
        y_layout: p.y_layout,
        carrier: p.carrier,
        moe: p.moe,
    };
    case.id = case.make_id();
    case
}

/// What an `isa_emulator_max_macs` of 0 is told.
const POSITIVE_MACS: &str =
    "expected a positive number of multiply-adds (M·N·K), e.g. 1048576 for 2^20";

fn expand_suite(f: &Parsed, suite: &SuiteRaw, set: &CaseSet) -> Result<Suite, CaseFileError> {
    let defaults = suite.axes();
    let mut cases: Vec<Case> = Vec::new();
    let mut seen: HashMap<String, String> = HashMap::new();
    let allow = suite.allow_unsupported;
    let hint = "; set allow_unsupported = true in [suite] to test the refusal";
    let mut sweep_budgets: std::collections::BTreeMap<String, u64> = Default::default();

    for (i, sweep) in f.raw.sweep.iter().enumerate() {
        let here = format!("sweep[{i}]");
        if sweep.isa_emulator_max_macs == Some(0) {
            return Err(f.err(format!("{here}.isa_emulator_max_macs"), POSITIVE_MACS));
        }
        let r = &resolve(f, &sweep.axes(), &defaults, &here, sweep.generated, set)?;
        let lens = [
            r.points.len(),
            r.dtype.len(),
            r.symmetry.0.len(),
            r.group.0.len(),
            r.class.0.len(),
            r.padding.len(),
            r.bias.len(),
            r.act_order.0.len(),
            r.producer.len(),
            r.layouts.len(),
            r.carrier.len(),
        ];
        for [
            point,
            dtype,
            symmetry,
            gspec,
            class,
            padding,
            bias,
            act_order,
            producer,
            layouts,
            carrier,
        ] in product(lens)
        {
            let (s, m) = &r.points[point];
            let (symmetry, gspec, class) =
                (r.symmetry.0[symmetry], r.group.0[gspec], r.class.0[class]);
            let (act_order, producer) = (r.act_order.0[act_order], r.producer[producer]);
            let (x_layout, y_layout) = r.layouts[layouts];
            // Each check reads only the axes before it, so the first point that fails one is
            // where the nested loops this replaced failed: the same error for the same file.
            let group = group_for(gspec, s).map_err(|msg| f.err(r.group.1.clone(), msg))?;
            if let Some(msg) = exact_too_large(class, s.shape.k) {
                return Err(f.err(r.class.1.clone(), format!("shape \"{}\": {msg}", s.name)));
            }
            if !allow
                && let Some((axis, msg)) =
                    unsupported_reason(s.shape.k, s.shape.n, symmetry, act_order)
            {
                let key = match axis {
                    "symmetry" => &r.symmetry.1,
                    "shapes" => &r.shapes_key,
                    _ => &r.act_order.1,
                };
                return Err(f.err(key.clone(), format!("shape \"{}\": {msg}{hint}", s.name)));
            }
            if !super::producer_applies_to(producer, symmetry) {
                continue;
            }
            let case = build_case(
                &suite.name,
                &s.name,
                LayerShape::new(s.shape.n, s.shape.k, group),
                Point {
                    m: *m,
                    dtype: r.dtype[dtype],
                    symmetry,
                    class,
                    padding: r.padding[padding],
                    bias: r.bias[bias],
                    act_order,
                    producer,
                    x_layout,
                    y_layout,
                    carrier: r.carrier[carrier],
                    moe: None,
                },
            );
            if !seen.contains_key(&case.id) {
                seen.insert(case.id.clone(), here.clone());
                if let Some(max) = sweep.isa_emulator_max_macs {
                    sweep_budgets.insert(case.id.clone(), max);
                }
                cases.push(case);
            }
        }
    }

    for (i, c) in f.raw.case.iter().enumerate() {
        let here = format!("case[{i}]");
        let (name, base) = match (&c.shape, c.k, c.n) {
            (Some(name), None, None) => match set.shapes.iter().find(|s| &s.name == name) {
                Some(s) => (s.name.clone(), s.shape),
                None => {
                    return Err(f.err(
                        format!("{here}.shape"),
                        format!("no shape named \"{name}\""),
                    ));
                }
            },
            (Some(_), _, _) => {
                return Err(f.err(
                    format!("{here}.k"),
                    "give either shape or k and n, not both",
                ));
            }
            (None, Some(k), Some(n)) => {
                let group = match c.group {
                    Some(GroupSpec::Size(g)) => g,
                    Some(GroupSpec::Channelwise) => k.0,
                    _ => {
                        return Err(f.err(
                            format!("{here}.group"),
                            "an inline shape needs a group size (a number or \"channelwise\")",
                        ));
                    }
                };
                if let Err((which, msg)) = check_shape(k.0, group) {
                    return Err(f.err(format!("{here}.{which}"), msg));
                }
                (
                    format!("k{}-n{}", k.0, n.0),
                    LayerShape::new(n.0, k.0, group),
                )
            }
            (None, None, _) => {
                return Err(f.err(
                    format!("{here}.shape"),
                    "required key is missing (a shape name, or k and n)",
                ));
            }
            (None, Some(_), None) => {
                return Err(f.err(
                    format!("{here}.n"),
                    "required key is missing (inline shapes need k and n)",
                ));
            }
        };
        let named = NamedShape {
            name: name.clone(),
            shape: base,
            model: None,
        };
        let group = group_for(c.group.unwrap_or(GroupSpec::Shape), &named)
            .map_err(|msg| f.err(format!("{here}.group"), msg))?;
        let act_order = c.act_order.unwrap_or(false);
        if !allow
            && let Some((axis, msg)) = unsupported_reason(base.k, base.n, c.symmetry, act_order)
        {
            let axis = if axis == "shapes" {
                if c.shape.is_some() { "shape" } else { "k" }
            } else {
                axis
            };
            return Err(f.err(format!("{here}.{axis}"), format!("{msg}{hint}")));
        }
        if let Some(msg) = exact_too_large(c.class, base.k) {
            return Err(f.err(format!("{here}.class"), msg));
        }
        let producer = c.producer.unwrap_or(super::DEFAULT_PRODUCER);
        if !super::producer_applies_to(producer, c.symmetry) {
            return Err(f.err(
                format!("{here}.producer"),
                format!(
                    "producer {} does not apply to {} layers",
                    producer.name(),
                    c.symmetry.name()
                ),
            ));
        }
        let case = build_case(
            &suite.name,
            &name,
            LayerShape::new(base.n, base.k, group),
            Point {
                m: c.m.0,
                dtype: c.dtype,
                symmetry: c.symmetry,
                class: c.class,
                padding: c.padding.unwrap_or_default(),
                bias: c.bias.unwrap_or(false),
                act_order,
                producer,
                x_layout: c.x_layout.unwrap_or_default(),
                y_layout: c.y_layout.unwrap_or_default(),
                carrier: c.carrier.unwrap_or_default(),
                moe: None,
            },
        );
        if let Some(first) = seen.get(&case.id) {
            return Err(f.err(
                here,
                format!("duplicate case id \"{}\" (also from {first})", case.id),
            ));
        }
        seen.insert(case.id.clone(), here);
        cases.push(case);
    }

    for (i, sweep) in f.raw.moe_sweep.iter().enumerate() {
        let here = format!("moe_sweep[{i}]");
        for case in expand_moe_sweep(f, suite, sweep, &here, set)? {
            if !seen.contains_key(&case.id) {
                seen.insert(case.id.clone(), here.clone());
                cases.push(case);
            }
        }
    }

    Ok(Suite {
        name: suite.name.clone(),
        description: suite.description.clone(),
        file: f.path.to_path_buf(),
        allow_unsupported: allow,
        isa_emulator_max_macs: match suite.isa_emulator_max_macs {
            Some(0) => return Err(f.err("suite.isa_emulator_max_macs", POSITIVE_MACS)),
            budget => budget,
        },
        isa_emulator_sweep_budgets: sweep_budgets,
        cases,
    })
}

fn check_known_bad(
    f: &Parsed,
    i: usize,
    kb: &super::known_bad::KnownBadRaw,
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
