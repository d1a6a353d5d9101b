//! A `[[sweep]]`: its axes resolved (the sweep's own, else the suite's, else the default; a
//! generator's shapes), then every point of their product as a case.

use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use super::Parsed;
use super::point::{Point, build_case, product};
use super::rules::{exact_too_large, group_for, unsupported_reason};
use crate::error::CaseFileError;
use crate::glob::glob_match;
use crate::schema::{Axes, GroupSpec, MSpec, ShapeGenerator, SuiteRaw, SweepRaw};
use crate::{CarrierMode, Case, CaseSet, DataClass, NamedShape, Producer, RowPadding, ViewLayout};

/// What a suite without `allow_unsupported` adds to a refusal.
pub(super) const UNSUPPORTED_HINT: &str =
    "; set allow_unsupported = true in [suite] to test the refusal";

/// The cases of one `[[sweep]]`, in axis order; ids repeat where the sweep's points do (the
/// suite keeps the first).
pub(super) fn expand_sweep(
    f: &Parsed,
    suite: &SuiteRaw,
    sweep: &SweepRaw,
    here: &str,
    set: &CaseSet,
) -> Result<Vec<Case>, CaseFileError> {
    let r = &resolve(f, &sweep.axes(), &suite.axes(), here, sweep.generated, set)?;
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
    let mut out = Vec::new();
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
        let (symmetry, gspec, class) = (r.symmetry.0[symmetry], r.group.0[gspec], r.class.0[class]);
        let (act_order, producer) = (r.act_order.0[act_order], r.producer[producer]);
        let (x_layout, y_layout) = r.layouts[layouts];
        // Each check reads only the axes before it, so the first point that fails one is
        // where the nested loops this replaced failed: the same error for the same file.
        let group = group_for(gspec, s).map_err(|e| f.err(r.group.1.clone(), e.to_string()))?;
        if let Some(msg) = exact_too_large(class, s.shape.k) {
            return Err(f.err(r.class.1.clone(), format!("shape \"{}\": {msg}", s.name)));
        }
        if !suite.allow_unsupported
            && let Some(why) = unsupported_reason(s.shape.k, s.shape.n, symmetry, act_order)
        {
            let key = match why.axis() {
                "symmetry" => &r.symmetry.1,
                "shapes" => &r.shapes_key,
                _ => &r.act_order.1,
            };
            return Err(f.err(
                key.clone(),
                format!("shape \"{}\": {why}{UNSUPPORTED_HINT}", s.name),
            ));
        }
        if !crate::producer_applies_to(producer, symmetry) {
            continue;
        }
        out.push(build_case(
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
        ));
    }
    Ok(out)
}

/// The shapes a sweep's name patterns (globs) select, in pattern order, each once; a pattern
/// that matches nothing is refused naming its key. One rule for dense and MoE sweeps.
pub(super) fn match_shapes<'s, T>(
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

/// A sweep's axes, each with the key it came from where a refusal may point at it.
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
    use w4a16_kernels::set::{
        EdgeSide, SKINNY_EDGE_N, SkinnyCapacity, skinny_capacity_edges, skinny_streamed_x_edges,
    };
    let edges = match generator {
        ShapeGenerator::SkinnyCapacityEdges => skinny_capacity_edges(),
        ShapeGenerator::SkinnyStreamedX => skinny_streamed_x_edges(),
    };
    edges
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
                EdgeSide::FarAbove => "far-above",
            };
            // N is named only where it is not the edges' usual one (the ragged scale edges),
            // so the other edges keep their ids.
            let n = if e.n == SKINNY_EDGE_N {
                String::new()
            } else {
                format!("-n{}", e.n)
            };
            let shape = NamedShape {
                name: format!("skinny-edge.{capacity}-{side}.k{}{n}", e.k),
                shape: LayerShape::new(e.n, e.k, e.group),
                model: None,
            };
            (shape, e.m)
        })
        .collect()
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

/// Every axis of a sweep: its own value, else the suite's, else the default.
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
            // The generator gives each shape its own M: an `m` beside it would be silently
            // ignored, so it is refused. A `shapes` of the sweep's own picks among the
            // generator's points by name (the suite's default `shapes` does not apply).
            if own.m.is_some() {
                return Err(f.err(
                    format!("{here}.m"),
                    "a sweep with `generated` takes its M from the generator; leave this key out",
                ));
            }
            let points = generate(generator);
            match &own.shapes {
                None => (points, format!("{here}.generated")),
                Some(patterns) => {
                    let key = format!("{here}.shapes");
                    let what = "shape of the generator (skinny-edge.<capacity>-<side>.k<K>)";
                    let picked = match_shapes(f, patterns, &key, &points, |p| &p.0.name, what)?
                        .into_iter()
                        .cloned()
                        .collect();
                    (picked, key)
                }
            }
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
        vec![crate::DEFAULT_PRODUCER],
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
