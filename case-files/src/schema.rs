//! The TOML schema of case files, as serde sees it. Every table refuses unknown keys, so a typo
//! is an error naming the key, never a silently ignored axis.
//!
//! One schema for every case file; each section may appear in any file under `cases/`:
//!
//! | section | meaning |
//! |---|---|
//! | `batch_sizes = [..]` | the field's batch sizes (once, in `models.toml`) |
//! | `[[provider]]` | `name`, `dtype`, `symmetry` (once, in `models.toml`) |
//! | `[[model]]` + `[[model.layer]]` | model shapes, named `<model>.<layer>` |
//! | `[[shape]]` | edge shapes with free names |
//! | `[suite]` | the suite this file's sweeps and cases belong to, plus default axes |
//! | `[[sweep]]` | a cartesian product of axes over shapes (or over `generated` shapes with their M) |
//! | `[[model.moe]]`, `[[moe_shape]]` | mixture-of-experts layers: one expert's (K, N, G), E, top_k |
//! | `[[moe_sweep]]` | a cartesian product of MoE axes (tokens, routing, experts, …) over MoE shapes |
//! | `[[case]]` | one explicit case (regressions promoted from fuzzing) |
//! | `[[known_bad]]` | a strict expected failure |

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::Symmetry;

use super::known_bad::KnownBadRaw;
use super::{CarrierMode, DataClass, MapKind, Producer, RoutingKind, RowPadding, ViewLayout};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaseFile {
    pub batch_sizes: Option<Vec<Positive>>,
    #[serde(default)]
    pub provider: Vec<ProviderRaw>,
    #[serde(default)]
    pub model: Vec<ModelRaw>,
    #[serde(default)]
    pub shape: Vec<ShapeRaw>,
    #[serde(default)]
    pub moe_shape: Vec<MoeShapeRaw>,
    pub suite: Option<SuiteRaw>,
    #[serde(default)]
    pub sweep: Vec<SweepRaw>,
    #[serde(default)]
    pub moe_sweep: Vec<MoeSweepRaw>,
    #[serde(default)]
    pub case: Vec<ExplicitCaseRaw>,
    #[serde(default)]
    pub known_bad: Vec<KnownBadRaw>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderRaw {
    pub name: String,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelRaw {
    pub name: String,
    /// Default group size of the model's layers.
    pub group: Option<Positive>,
    #[serde(default)]
    #[expect(dead_code, reason = "free text for the file's readers")]
    pub note: Option<String>,
    #[serde(default)]
    pub layer: Vec<LayerRaw>,
    /// The model's expert layers (one expert's shape each).
    #[serde(default)]
    pub moe: Vec<MoeShapeRaw>,
}

/// One mixture-of-experts layer: one expert's linear shape, the router's expert count and top-k.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MoeShapeRaw {
    pub name: String,
    pub k: Positive,
    pub n: Positive,
    pub group: Option<Positive>,
    pub experts: Positive,
    pub top_k: Positive,
    #[serde(default)]
    #[expect(dead_code, reason = "free text for the file's readers")]
    pub note: Option<String>,
}

/// A number, or `"shape"` (the MoE shape's own value): the `experts` and `top_k` axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CountSpec {
    Size(usize),
    Shape,
}

impl<'de> Deserialize<'de> for CountSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CountSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer or \"shape\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CountSpec, E> {
                if v > 0 && v <= i64::from(i32::MAX) {
                    Ok(CountSpec::Size(v as usize))
                } else {
                    Err(E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CountSpec, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CountSpec, E> {
                match v {
                    "shape" => Ok(CountSpec::Shape),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A cartesian product of MoE cases. Required: `shapes` (MoE shape names or globs) and `tokens`;
/// every other axis has a default (both dtypes and symmetries, the shape's G, E and top_k,
/// seeded softmax routing, every expert local, routed weights applied, realistic data).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MoeSweepRaw {
    #[serde(default)]
    #[expect(dead_code, reason = "free text for the file's readers")]
    pub note: Option<String>,
    pub shapes: Vec<String>,
    pub tokens: Vec<Positive>,
    pub dtype: Option<Vec<ActDtype>>,
    pub symmetry: Option<Vec<Symmetry>>,
    pub group: Option<Vec<GroupSpec>>,
    pub class: Option<Vec<DataClass>>,
    pub experts: Option<Vec<CountSpec>>,
    pub top_k: Option<Vec<CountSpec>>,
    pub routing: Option<Vec<RoutingKind>>,
    pub map: Option<Vec<MapKind>>,
    pub routed_weight: Option<Vec<bool>>,
    pub padding: Option<Vec<RowPadding>>,
    pub x_layout: Option<Vec<ViewLayout>>,
    pub y_layout: Option<Vec<ViewLayout>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LayerRaw {
    pub name: String,
    pub k: Positive,
    pub n: Positive,
    pub group: Option<Positive>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShapeRaw {
    pub name: String,
    pub k: Positive,
    pub n: Positive,
    pub group: Positive,
    #[serde(default)]
    #[expect(dead_code, reason = "free text for the file's readers")]
    pub note: Option<String>,
}

/// The axes a sweep multiplies; `[suite]` may set any of them as defaults for its sweeps.
#[derive(Debug, Default, Clone)]
pub(crate) struct Axes {
    pub shapes: Option<Vec<String>>,
    pub m: Option<MSpec>,
    pub dtype: Option<Vec<ActDtype>>,
    pub symmetry: Option<Vec<Symmetry>>,
    pub group: Option<Vec<GroupSpec>>,
    pub class: Option<Vec<DataClass>>,
    pub padding: Option<Vec<RowPadding>>,
    pub bias: Option<Vec<bool>>,
    pub act_order: Option<Vec<bool>>,
    pub producer: Option<Vec<Producer>>,
    pub x_layout: Option<Vec<ViewLayout>>,
    pub y_layout: Option<Vec<ViewLayout>>,
    pub carrier: Option<Vec<CarrierMode>>,
}

// The sweep axes are spelled out in `SuiteRaw` and `SweepRaw` rather than shared through
// `#[serde(flatten)]`: serde does not support `flatten` together with `deny_unknown_fields`, and
// a misspelt axis must be refused naming its key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SuiteRaw {
    pub name: String,
    pub description: String,
    /// Allow cases that no kernel can take (asymmetric with N % 8 != 0): the selection suite
    /// uses them to check that refusals are clean.
    #[serde(default)]
    pub allow_unsupported: bool,
    /// Run only when named (`w4a16 run --suite NAME`): a suite too slow for the default run.
    #[serde(default)]
    pub on_request: bool,
    /// The largest case (M·N·K multiply-adds) the ISA emulator runs of this suite, where its
    /// default would cost CI too long (`kernels` and `edges` at their small shapes).
    pub isa_emulator_max_macs: Option<u64>,
    pub shapes: Option<Vec<String>>,
    pub m: Option<MSpec>,
    pub dtype: Option<Vec<ActDtype>>,
    pub symmetry: Option<Vec<Symmetry>>,
    pub group: Option<Vec<GroupSpec>>,
    pub class: Option<Vec<DataClass>>,
    pub padding: Option<Vec<RowPadding>>,
    pub bias: Option<Vec<bool>>,
    pub act_order: Option<Vec<bool>>,
    pub producer: Option<Vec<Producer>>,
    pub x_layout: Option<Vec<ViewLayout>>,
    pub y_layout: Option<Vec<ViewLayout>>,
    pub carrier: Option<Vec<CarrierMode>>,
}

impl SuiteRaw {
    pub fn axes(&self) -> Axes {
        Axes {
            shapes: self.shapes.clone(),
            m: self.m.clone(),
            dtype: self.dtype.clone(),
            symmetry: self.symmetry.clone(),
            group: self.group.clone(),
            class: self.class.clone(),
            padding: self.padding.clone(),
            bias: self.bias.clone(),
            act_order: self.act_order.clone(),
            producer: self.producer.clone(),
            x_layout: self.x_layout.clone(),
            y_layout: self.y_layout.clone(),
            carrier: self.carrier.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SweepRaw {
    #[serde(default)]
    #[expect(dead_code, reason = "free text for the file's readers")]
    pub note: Option<String>,
    /// Shapes with their M generated from kernel declarations, in place of `shapes` and `m`.
    pub generated: Option<ShapeGenerator>,
    /// The ISA emulator's budget for this sweep's cases, in place of the suite's.
    pub isa_emulator_max_macs: Option<u64>,
    pub shapes: Option<Vec<String>>,
    pub m: Option<MSpec>,
    pub dtype: Option<Vec<ActDtype>>,
    pub symmetry: Option<Vec<Symmetry>>,
    pub group: Option<Vec<GroupSpec>>,
    pub class: Option<Vec<DataClass>>,
    pub padding: Option<Vec<RowPadding>>,
    pub bias: Option<Vec<bool>>,
    pub act_order: Option<Vec<bool>>,
    pub producer: Option<Vec<Producer>>,
    pub x_layout: Option<Vec<ViewLayout>>,
    pub y_layout: Option<Vec<ViewLayout>>,
    pub carrier: Option<Vec<CarrierMode>>,
}

impl SweepRaw {
    pub fn axes(&self) -> Axes {
        Axes {
            shapes: self.shapes.clone(),
            m: self.m.clone(),
            dtype: self.dtype.clone(),
            symmetry: self.symmetry.clone(),
            group: self.group.clone(),
            class: self.class.clone(),
            padding: self.padding.clone(),
            bias: self.bias.clone(),
            act_order: self.act_order.clone(),
            producer: self.producer.clone(),
            x_layout: self.x_layout.clone(),
            y_layout: self.y_layout.clone(),
            carrier: self.carrier.clone(),
        }
    }
}

/// Where a sweep's `generated` (shape, M) points come from: a kernel's declarations, so that
/// the cases move with a declared constant instead of being typed by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub(crate) enum ShapeGenerator {
    /// `w4a16_kernels::set::skinny_capacity_edges`: one step below, at and past each declared
    /// `skinny` capacity (M, staged X, staged scales).
    #[serde(rename = "skinny-capacity-edges")]
    SkinnyCapacityEdges,
    /// `w4a16_kernels::set::skinny_streamed_x_edges`: for every M, K far past skinny's staged X.
    #[serde(rename = "skinny-streamed-x")]
    SkinnyStreamedX,
}

/// One explicit case: a named shape, or an inline `k`/`n` (named `k<K>-n<N>`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplicitCaseRaw {
    pub shape: Option<String>,
    pub k: Option<Positive>,
    pub n: Option<Positive>,
    pub group: Option<GroupSpec>,
    pub m: Positive,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub class: DataClass,
    pub padding: Option<RowPadding>,
    pub bias: Option<bool>,
    pub act_order: Option<bool>,
    pub producer: Option<Producer>,
    pub x_layout: Option<ViewLayout>,
    pub y_layout: Option<ViewLayout>,
    pub carrier: Option<CarrierMode>,
    /// Where the case came from (a proptest seed, an issue); for the file's readers.
    #[serde(default)]
    #[expect(dead_code, reason = "free text for the file's readers")]
    pub note: Option<String>,
}

/// A positive integer (sizes, batch sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Positive(pub usize);

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Positive;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Positive, E> {
                if v > 0 && v <= i64::from(i32::MAX) {
                    Ok(Positive(v as usize))
                } else {
                    Err(E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Positive, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
        }
        d.deserialize_any(V)
    }
}

/// The M axis: a list of positive integers, or `"batch_sizes"` (the field's list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MSpec {
    List(Vec<usize>),
    BatchSizes,
}

impl<'de> Deserialize<'de> for MSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of positive integers or \"batch_sizes\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MSpec, E> {
                if v == "batch_sizes" {
                    Ok(MSpec::BatchSizes)
                } else {
                    Err(E::invalid_type(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MSpec, A::Error> {
                let mut out = Vec::new();
                while let Some(Positive(m)) = seq.next_element()? {
                    out.push(m);
                }
                if out.is_empty() {
                    return Err(de::Error::invalid_length(0, &"at least one M"));
                }
                Ok(MSpec::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A group size on the axis: a number, `"shape"` (the shape's own G) or `"channelwise"` (G = K).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupSpec {
    Size(usize),
    Shape,
    Channelwise,
}

impl<'de> Deserialize<'de> for GroupSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = GroupSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive group size, \"shape\" or \"channelwise\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<GroupSpec, E> {
                if v > 0 && v <= i64::from(i32::MAX) {
                    Ok(GroupSpec::Size(v as usize))
                } else {
                    Err(E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GroupSpec, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GroupSpec, E> {
                match v {
                    "shape" => Ok(GroupSpec::Shape),
                    "channelwise" => Ok(GroupSpec::Channelwise),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}
