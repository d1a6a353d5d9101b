//! Shape strategies for property tests (proptest). Shapes are valid by construction
//! (`K = groups·G`, `N` a multiple of 8 where zero points need it) rather than filtered, so no
//! test runs out of rejects; M is weighted toward the dispatch thresholds.
//!
//! Shared by the selection tests and the GPU fuzz test. A shrunk failure is promoted into a
//! named case: add it to `cases/regressions.toml` (format there) so it runs on every machine,
//! not only where the proptest seed file is.

use proptest::prelude::*;
use w4a16_kernels::Target;
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use w4a16_cases::{Case, DataClass, Producer, RowPadding, ViewLayout, producer_applies_to};
use w4a16_select::{DENSE_MIN_M, HYBRID_GROUPS, LayerRequest, SKINNY_MAX_M};

/// Every target the selection model knows.
pub fn target() -> impl Strategy<Value = Target> {
    proptest::sample::select(Target::ALL.to_vec())
}

pub fn dtype() -> impl Strategy<Value = ActDtype> {
    proptest::sample::select(ActDtype::ALL.to_vec())
}

pub fn symmetry() -> impl Strategy<Value = Symmetry> {
    prop_oneof![Just(Symmetry::Sym), Just(Symmetry::Asym)]
}

pub fn padding() -> impl Strategy<Value = RowPadding> {
    prop_oneof![
        Just(RowPadding::None),
        Just(RowPadding::CacheCliff),
        Just(RowPadding::Forced)
    ]
}

/// An X or Y layout: contiguous most of the time, each strided or offset view now and then.
pub fn view_layout() -> impl Strategy<Value = ViewLayout> {
    prop_oneof![
        4 => Just(ViewLayout::Contiguous),
        2 => proptest::sample::select(ViewLayout::ALL.to_vec()),
    ]
}

/// A fast-path group size (32, 64, 128).
pub fn fast_group() -> impl Strategy<Value = usize> {
    proptest::sample::select(HYBRID_GROUPS.to_vec())
}

/// M across the dispatch thresholds: decode 1..=5, the first fused 6 (also sm_90's dense
/// threshold), the band around the AMD targets' dense threshold 255..=257, and the ranges between
/// and above.
pub fn dispatch_m() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 1..=SKINNY_MAX_M,
        2 => Just(SKINNY_MAX_M + 1),
        3 => (DENSE_MIN_M - 1)..=(DENSE_MIN_M + 1),
        2 => (SKINNY_MAX_M + 2)..(DENSE_MIN_M - 1),
        1 => (DENSE_MIN_M + 2)..=4096usize,
    ]
}

/// N as a multiple of 8 up to `max_n`, weighted toward small values and values just off the
/// usual tile multiples (8·odd).
pub fn n_multiple_of_8(max_n: usize) -> impl Strategy<Value = usize> {
    let max_words = (max_n / 8).max(1);
    prop_oneof![
        2 => (1..=max_words.min(40)).prop_map(|w| w * 8),
        1 => (1..=max_words).prop_map(|w| w * 8),
    ]
}

/// A valid layer shape: `G` from the fast path, `K = groups·G` (so `K % 16 == 0` and
/// `K % G == 0`), `N` a multiple of 8.
pub fn valid_shape(max_groups: usize, max_n: usize) -> impl Strategy<Value = LayerShape> {
    (fast_group(), 1..=max_groups.max(1), n_multiple_of_8(max_n))
        .prop_map(|(g, groups, n)| LayerShape::new(n, groups * g, g))
}

/// A symmetric layer's shape may have any N (ragged row tiles).
pub fn ragged_sym_shape(max_groups: usize, max_n: usize) -> impl Strategy<Value = LayerShape> {
    (fast_group(), 1..=max_groups.max(1), 1..=max_n.max(1))
        .prop_map(|(g, groups, n)| LayerShape::new(n, groups * g, g))
}

/// Decode shapes around the K·M values where older skinny kernels switched variants
/// (32768 and 39321 elements of X): M in 1..=5, K a few groups either side.
pub fn lds_boundary(max_n: usize) -> impl Strategy<Value = (LayerShape, usize)> {
    (
        1..=SKINNY_MAX_M,
        fast_group(),
        prop_oneof![Just(32_768usize), Just(39_321usize)],
        -2i64..=2,
        n_multiple_of_8(max_n),
    )
        .prop_map(|(m, g, limit, delta, n)| {
            let groups = ((limit / (m * g)) as i64 + delta).max(1) as usize;
            (LayerShape::new(n, groups * g, g), m)
        })
}

/// A layer request every format can hold and the hybrid's rules accept on a wave32 target.
pub fn layer_request() -> impl Strategy<Value = LayerRequest> {
    (
        valid_shape(96, 8192),
        dispatch_m(),
        dtype(),
        symmetry(),
        any::<bool>(),
        padding(),
        any::<bool>(),
    )
        .prop_map(
            |(shape, m, dtype, symmetry, bias, padding, built)| LayerRequest {
                shape,
                m,
                dtype,
                symmetry,
                bias,
                act_order: false,
                padding,
                dense_cache_built: built,
            },
        )
}

/// Shapes the fast path refuses but the formats hold: G = 256, channelwise, small G (8, 16),
/// K not a multiple of 16 (channelwise K = 8·odd).
pub fn off_fast_path_shape(max_n: usize) -> impl Strategy<Value = LayerShape> {
    prop_oneof![
        (1..=16usize, n_multiple_of_8(max_n)).prop_map(|(groups, n)| LayerShape::new(
            n,
            groups * 256,
            256
        )),
        (1..=512usize, n_multiple_of_8(max_n)).prop_map(|(words, n)| LayerShape::new(
            n,
            words * 8,
            words * 8
        )),
        (
            prop_oneof![Just(8usize), Just(16), Just(24), Just(48)],
            1..=64usize,
            n_multiple_of_8(max_n)
        )
            .prop_map(|(g, groups, n)| LayerShape::new(n, groups * g, g)),
    ]
}

/// Any request, including the ones no kernel takes (N % 8 != 0 with zero points, act-order,
/// group sizes that are not multiples of 8): selection must answer without panicking.
pub fn any_layer_request() -> impl Strategy<Value = LayerRequest> {
    let shape = prop_oneof![
        3 => valid_shape(64, 4096),
        2 => off_fast_path_shape(4096),
        1 => ragged_sym_shape(64, 4096),
        1 => (1..=4096usize, 1..=4096usize, 1..=4096usize).prop_map(|(n, k, g)| LayerShape::new(n, k, g)),
    ];
    (
        shape,
        prop_oneof![4 => dispatch_m(), 1 => Just(0usize)],
        dtype(),
        symmetry(),
        any::<bool>(),
        any::<bool>(),
        padding(),
        any::<bool>(),
    )
        .prop_map(
            |(shape, m, dtype, symmetry, bias, act_order, padding, built)| LayerRequest {
                shape,
                m,
                dtype,
                symmetry,
                bias,
                act_order,
                padding,
                dense_cache_built: built,
            },
        )
}

/// The data classes worth fuzzing kernels with: realistic values most, the bit-exact class,
/// the patterns that expose wrong-row and wrong-tail reads, and the range edge (saturating
/// outputs, IEEE special values in X).
pub fn kernel_class() -> impl Strategy<Value = DataClass> {
    prop_oneof![
        4 => Just(DataClass::Realistic),
        3 => Just(DataClass::Exact),
        1 => Just(DataClass::LastRow),
        1 => Just(DataClass::LastCol),
        1 => Just(DataClass::LargeActivation),
        1 => Just(DataClass::Saturating),
        1 => Just(DataClass::SpecialValues),
    ]
}

/// A case for the kernels: buildable by construction (K = groups·G, N a multiple of 8 unless
/// symmetric), M across the dispatch thresholds, any producer that can express the layer.
/// Named as its promotion into `cases/regressions.toml` would name it ([`regression_entry`]),
/// so the promoted case gets the same id and therefore the same seeded data.
pub fn kernel_case(max_groups: usize, max_n: usize) -> impl Strategy<Value = Case> {
    // Ragged N only for symmetric layers, and only through compressed-tensors (the packers
    // along N need N % 8 == 0).
    let layer = prop_oneof![
        4 => (valid_shape(max_groups, max_n), symmetry(), proptest::sample::select(Producer::ALL.to_vec()))
            .prop_map(|(shape, sym, producer)| {
                let producer = if producer_applies_to(producer, sym) { producer } else { Producer::CompressedTensors };
                (shape, sym, producer)
            }),
        1 => ragged_sym_shape(max_groups, max_n)
            .prop_map(|shape| (shape, Symmetry::Sym, Producer::CompressedTensors)),
    ];
    (
        layer,
        prop_oneof![4 => dispatch_m(), 1 => 1..=64usize],
        dtype(),
        kernel_class(),
        padding(),
        any::<bool>(),
        (view_layout(), view_layout()),
    )
        .prop_map(
            |(
                (shape, symmetry, producer),
                m,
                dtype,
                class,
                padding,
                bias,
                (x_layout, y_layout),
            )| {
                let mut case = Case {
                    id: String::new(),
                    suite: "regressions".into(),
                    shape_name: format!("k{}-n{}", shape.k, shape.n),
                    shape,
                    m,
                    dtype,
                    symmetry,
                    class,
                    padding,
                    bias,
                    act_order: false,
                    producer,
                    x_layout,
                    y_layout,
                    carrier: w4a16_cases::CarrierMode::Off,
                    moe: None,
                };
                case.id = case.make_id();
                case
            },
        )
}

/// The `[[case]]` block that promotes a (shrunk) failing case into `cases/regressions.toml`.
pub fn regression_entry(case: &Case, note: &str) -> String {
    let group = if case.shape.group == case.shape.k {
        "\"channelwise\"".to_string()
    } else {
        case.shape.group.to_string()
    };
    format!(
        "[[case]]\nk = {}\nn = {}\ngroup = {group}\nm = {}\ndtype = \"{}\"\nsymmetry = \"{}\"\nclass = \"{}\"\npadding = \"{}\"\nbias = {}\nproducer = \"{}\"\nx_layout = \"{}\"\ny_layout = \"{}\"\nnote = {:?}\n",
        case.shape.k,
        case.shape.n,
        case.m,
        case.dtype.name(),
        case.symmetry.name(),
        case.class.name(),
        case.padding.name(),
        case.bias,
        case.producer.name(),
        case.x_layout.name(),
        case.y_layout.name(),
        note,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::path::PathBuf;

    /// A promoted entry loads back as the very case that failed: same fields, same id.
    #[test]
    fn a_promoted_fuzz_case_loads_with_the_same_id() {
        let dir = w4a16_cases::locate(None).expect("the cases folder");
        let files = w4a16_cases::case_files(&dir).unwrap();
        let mut runner = TestRunner::deterministic();
        let strategy = kernel_case(16, 512);
        for _ in 0..64 {
            let case = strategy.new_tree(&mut runner).unwrap().current();
            let sources: Vec<(PathBuf, String)> = files
                .iter()
                .map(|f| {
                    let mut text = std::fs::read_to_string(f).unwrap();
                    if f.ends_with("regressions.toml") {
                        text.push('\n');
                        text.push_str(&regression_entry(&case, "fuzz"));
                    }
                    (f.clone(), text)
                })
                .collect();
            let set =
                w4a16_cases::load_sources(&sources).unwrap_or_else(|e| panic!("{}: {e}", case.id));
            let loaded = set
                .case(&case.id)
                .unwrap_or_else(|| panic!("{} not among the loaded cases", case.id));
            assert_eq!(*loaded, case);
            assert!(case.is_buildable(), "{}", case.id);
        }
    }
}
