//! A `[[moe_sweep]]`: shapes × tokens × dtype × symmetry × G × class × E × top_k × routing ×
//! map × routed weight × padding × X and C layouts, each point a MoE case.

use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use super::Parsed;
use super::point::{Point, build_case, product};
use super::rules::{exact_too_large, group_for, unsupported_reason};
use super::sweep::{UNSUPPORTED_HINT, match_shapes};
use crate::error::CaseFileError;
use crate::schema::{CountSpec, GroupSpec, MoeSweepRaw, SuiteRaw};
use crate::{
    CarrierMode, Case, CaseSet, DataClass, MapKind, MoeRouting, NamedShape, RoutingKind,
    RowPadding, ViewLayout,
};
use w4a16_kernels::set::MOE;

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

/// A MoE sweep's list axes, each its own value or the default, never empty; the `(values, key)`
/// pairs keep the key that a point's refusal names.
struct MoeAxes {
    dtype: Vec<ActDtype>,
    symmetry: (Vec<Symmetry>, String),
    group: (Vec<GroupSpec>, String),
    class: (Vec<DataClass>, String),
    experts: (Vec<CountSpec>, String),
    top_k: (Vec<CountSpec>, String),
    routing: Vec<RoutingKind>,
    map: Vec<MapKind>,
    weighted: Vec<bool>,
    padding: Vec<RowPadding>,
    x_layout: (Vec<ViewLayout>, String),
    y_layout: (Vec<ViewLayout>, String),
}

impl MoeAxes {
    fn resolve(f: &Parsed, sw: &MoeSweepRaw, here: &str) -> Result<MoeAxes, CaseFileError> {
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
        let x_layout = moe_axis(
            f,
            &sw.x_layout,
            here,
            "x_layout",
            vec![ViewLayout::default()],
        )?;
        let y_layout = moe_axis(
            f,
            &sw.y_layout,
            here,
            "y_layout",
            vec![ViewLayout::default()],
        )?;
        Ok(MoeAxes {
            dtype,
            symmetry,
            group,
            class,
            experts,
            top_k,
            routing,
            map,
            weighted,
            padding,
            x_layout,
            y_layout,
        })
    }
}

/// The two matrices of a MoE case that a row layout places.
#[derive(Clone, Copy)]
enum Operand {
    X,
    C,
}

/// `layout` of the operand's `rows × cols` must be one `moe` declares it takes
/// (`MOE.contract`): otherwise the case file is refused at `key`, naming the shape and the rule.
fn check_layout_taken(
    f: &Parsed,
    key: &str,
    shape: &str,
    operand: Operand,
    layout: ViewLayout,
    rows: usize,
    cols: usize,
) -> Result<(), CaseFileError> {
    let (rule, what) = match operand {
        Operand::X => (MOE.contract.x_rows, "X"),
        Operand::C => (MOE.contract.y_rows, "C"),
    };
    if rule.is_some_and(|r| r.admits(rows, layout.row_stride(cols), layout.offset())) {
        return Ok(());
    }
    Err(f.err(
        key.to_owned(),
        format!(
            "shape \"{shape}\": moe does not take {what} laid out {} (its declared row layout: {rule:?})",
            layout.name()
        ),
    ))
}

/// The routing of a point must be makeable: top_k ≤ E, the routing kind's own rules, and an
/// expert map only over at least two experts.
fn check_routing(
    f: &Parsed,
    here: &str,
    top_k_key: &str,
    shape: &str,
    (e, k): (usize, usize),
    (rk, mk): (RoutingKind, MapKind),
) -> Result<(), CaseFileError> {
    if k > e {
        return Err(f.err(
            top_k_key.to_owned(),
            format!("shape \"{shape}\": top_k = {k} is more than the {e} experts"),
        ));
    }
    // The routing must be makeable (an empty expert needs E ≥ top_k + 2, a repeated
    // expert top_k ≥ 2, …): the rules do not depend on T, so one token decides.
    if let Err(err) = w4a16_reference::moe::route(rk, 0, 1, e, k) {
        return Err(f.err(
            format!("{here}.routing"),
            format!("shape \"{shape}\", E = {e}, top_k = {k}: {err}"),
        ));
    }
    if mk == MapKind::EveryOther && e < 2 {
        return Err(f.err(
            format!("{here}.map"),
            "an expert map needs at least 2 experts",
        ));
    }
    Ok(())
}

/// The cases of one `[[moe_sweep]]`: shapes × tokens × dtype × symmetry × G × class × E × top_k ×
/// routing × map × routed weight × padding.
pub(super) fn expand_moe_sweep(
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
    let ax = MoeAxes::resolve(f, sw, here)?;

    let mut out = Vec::new();
    let lens = [
        shapes.len(),
        sw.tokens.len(),
        ax.dtype.len(),
        ax.symmetry.0.len(),
        ax.group.0.len(),
        ax.class.0.len(),
        ax.experts.0.len(),
        ax.top_k.0.len(),
        ax.routing.len(),
        ax.map.len(),
        ax.weighted.len(),
        ax.padding.len(),
        ax.x_layout.0.len(),
        ax.y_layout.0.len(),
    ];
    for [
        s,
        t,
        dt,
        sym,
        gspec,
        cl,
        e_spec,
        k_spec,
        rk,
        mk,
        w,
        pad,
        xl,
        yl,
    ] in product(lens)
    {
        let s = shapes[s];
        let (sym, gspec, cl) = (ax.symmetry.0[sym], ax.group.0[gspec], ax.class.0[cl]);
        let (rk, mk) = (ax.routing[rk], ax.map[mk]);
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
            && let Some(why) = unsupported_reason(s.shape.k, s.shape.n, sym, false)
        {
            return Err(f.err(
                ax.symmetry.1.clone(),
                format!("shape \"{}\": {why}{UNSUPPORTED_HINT}", s.name),
            ));
        }
        let g = group_for(gspec, &named).map_err(|e| f.err(ax.group.1.clone(), e.to_string()))?;
        if let Some(msg) = exact_too_large(cl, s.shape.k) {
            return Err(f.err(ax.class.1.clone(), format!("shape \"{}\": {msg}", s.name)));
        }
        let e = count(ax.experts.0[e_spec], s.experts);
        let k = count(ax.top_k.0[k_spec], s.top_k);
        check_routing(f, here, &ax.top_k.1, &s.name, (e, k), (rk, mk))?;
        let (xl, yl) = (ax.x_layout.0[xl], ax.y_layout.0[yl]);
        let tokens = sw.tokens[t].0;
        let placed = [
            (xl, &ax.x_layout.1, Operand::X, tokens, s.shape.k),
            (yl, &ax.y_layout.1, Operand::C, tokens * k, s.shape.n),
        ];
        for (layout, key, operand, rows, cols) in placed {
            check_layout_taken(f, key, &s.name, operand, layout, rows, cols)?;
        }
        out.push(build_case(
            &suite.name,
            &s.name,
            LayerShape::new(s.shape.n, s.shape.k, g),
            Point {
                m: tokens,
                dtype: ax.dtype[dt],
                symmetry: sym,
                class: cl,
                padding: ax.padding[pad],
                bias: false,
                act_order: false,
                producer: crate::DEFAULT_PRODUCER,
                x_layout: xl,
                y_layout: yl,
                // MoE cases never carry the carrier (the moe kernel reads scales and zero
                // points).
                carrier: CarrierMode::Off,
                moe: Some(MoeRouting {
                    experts: e,
                    top_k: k,
                    routing: rk,
                    map: mk,
                    routed_weight: ax.weighted[w],
                }),
            },
        ));
    }
    Ok(out)
}
