//! One case's values on every axis, the one constructor that gives it its id, and the
//! product of a sweep's axes.

use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use crate::{CarrierMode, Case, DataClass, MoeRouting, Producer, RowPadding, ViewLayout};

/// Every index tuple of axes of lengths `lens`, the last axis fastest: the order of nested
/// `for` loops over the axes, without the nesting. Empty when any axis is.
pub(super) fn product<const N: usize>(lens: [usize; N]) -> impl Iterator<Item = [usize; N]> {
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
pub(super) struct Point {
    pub(super) m: usize,
    pub(super) dtype: ActDtype,
    pub(super) symmetry: Symmetry,
    pub(super) class: DataClass,
    pub(super) padding: RowPadding,
    pub(super) bias: bool,
    pub(super) act_order: bool,
    pub(super) producer: Producer,
    pub(super) x_layout: ViewLayout,
    pub(super) y_layout: ViewLayout,
    pub(super) carrier: CarrierMode,
    pub(super) moe: Option<MoeRouting>,
}

/// The case at `p` of suite `suite` on shape `shape_name` (N, K, G = `shape`), with its id:
/// the one constructor every kind of entry goes through, so an id never depends on how the
/// case was declared.
pub(super) fn build_case(suite: &str, shape_name: &str, shape: LayerShape, p: Point) -> Case {
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
