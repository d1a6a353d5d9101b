//! Case files (`cases/`): the data that says what to test. Shapes, sweeps and suites expand into
//! a deterministic, deduplicated list of [`Case`] values with stable, human-readable ids;
//! known-bad entries and model descriptions live beside them. See [`schema`] for the format.

pub mod coverage_exceptions;
mod error;
pub mod gate_exceptions;
pub mod known_bad;
mod load;
pub mod model;
pub mod schema;
pub mod suppress;

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
pub use w4a16_reference::moe::{MapKind, RoutingKind};

pub use error::{CaseFileError, DataFile};
pub use known_bad::KnownBad;
pub use load::{case_files, load_all, load_files, load_sources};
pub use model::ModelDescription;
pub use suppress::{Date, Mode, Suppression, SuppressionError, Xfail, strict_xfail};
/// The pattern language lives below the case files (the code-object gates match with it too).
pub use w4a16_kernels::glob;

/// How the case's data are drawn: the reference crate's classes, so a case file names exactly
/// what the data generator builds.
pub use w4a16_reference::data::DataClass;

w4a16_reference::named_enum! {
    /// Row padding of the resident weights (and the dense cache).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub enum RowPadding {
        /// Unpadded strides on every target.
        None = "none",
        /// The target's default rule: the gfx11 cache cliff (docs/contract.md §5); other targets pad nothing.
        #[default]
        CacheCliff = "cache-cliff",
        /// +128 B on every row on every target: kernels take strides at run time everywhere.
        Forced = "forced",
    }
}

impl RowPadding {
    /// The id fragment; the default leaves no trace in the id.
    fn variant(self) -> Option<&'static str> {
        match self {
            RowPadding::None => Some("unpadded"),
            RowPadding::CacheCliff => None,
            RowPadding::Forced => Some("forced-pad"),
        }
    }
}

w4a16_reference::named_enum! {
    /// How X or Y sits in its buffer (docs/contract.md §2: unit inner stride, row stride ≥ the row, may be a
    /// slice of a larger tensor at any offset the dtype allows). Each layout moves the row starts
    /// to a different alignment, so that a kernel whose vector accesses assume more than its
    /// declaration says reads or writes the wrong elements.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub enum ViewLayout {
        /// Row stride = the row length, at the start of the buffer.
        #[default]
        Contiguous = "contiguous",
        /// `+8` elements per row: rows stay 16-byte aligned, but the stride is not the row length.
        Padded = "padded",
        /// `+3` elements per row: consecutive rows change alignment (2, 8, 4, … bytes), so every
        /// run-time-chosen vector path must fall back.
        OddStride = "odd-stride",
        /// A slice one element into its buffer: the base is only 2-byte aligned.
        Offset2b = "offset-2b",
        /// A slice four elements in with `+4` elements per row: every row 8-byte aligned, none
        /// 16-byte aligned (skinny's 8-byte path).
        Offset8b = "offset-8b",
    }
}

impl ViewLayout {
    /// Elements between rows of a matrix whose rows hold `cols` elements.
    pub fn row_stride(self, cols: usize) -> usize {
        cols + match self {
            ViewLayout::Contiguous | ViewLayout::Offset2b => 0,
            ViewLayout::Padded => 8,
            ViewLayout::OddStride => 3,
            ViewLayout::Offset8b => 4,
        }
    }

    /// Elements between the buffer's base and the first element.
    pub fn offset(self) -> usize {
        match self {
            ViewLayout::Contiguous | ViewLayout::Padded | ViewLayout::OddStride => 0,
            ViewLayout::Offset2b => 1,
            ViewLayout::Offset8b => 4,
        }
    }

    pub fn is_default(self) -> bool {
        self == ViewLayout::Contiguous
    }
}

w4a16_reference::named_enum! {
    /// Whether a case also runs `fused_carrier` on the asymmetric carrier (docs/contract.md §2, docs/field.md §0 item 7),
    /// and how the scales sit beside it. Off by default, leaving no trace in the id.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub enum CarrierMode {
        /// No carrier: the case runs as it always did.
        #[default]
        Off = "off",
        /// fused_carrier beside the other kernels, on the carrier built from the resident scales and
        /// packed zero points. A symmetric layer has none: its carrier launch must end as the typed
        /// refusal.
        On = "on",
        /// As `On`, with every resident scale row padded by [`CARRIER_SCALE_PAD`] elements: the
        /// carrier keeps its own row stride K/G, and the runner checks that the carrier handed over
        /// with the scales' padded stride is refused before any launch (docs/field.md §6 item 4).
        PaddedScales = "padded-scales",
    }
}

/// Extra elements per scale row of a [`CarrierMode::PaddedScales`] case.
pub const CARRIER_SCALE_PAD: usize = 8;

impl CarrierMode {
    /// Whether the case runs fused_carrier.
    pub fn is_on(self) -> bool {
        self != CarrierMode::Off
    }

    fn is_off(&self) -> bool {
        *self == CarrierMode::Off
    }

    /// Extra elements per resident scale row.
    pub fn scale_extra_elems(self) -> usize {
        match self {
            CarrierMode::PaddedScales => CARRIER_SCALE_PAD,
            CarrierMode::Off | CarrierMode::On => 0,
        }
    }

    /// The id fragment; `Off` leaves no trace.
    fn variant(self) -> Option<&'static str> {
        match self {
            CarrierMode::Off => None,
            CarrierMode::On => Some("carrier"),
            CarrierMode::PaddedScales => Some("carrier-padded-scales"),
        }
    }
}

/// The checkpoint format the case's tensors go through before the resident layout (docs/contract.md §3).
/// A symmetric checkpoint that still carries zero points is `gptq-v1`/`gptq-v2` × `sym`: GPTQ
/// writes `qzeros` for symmetric layers too.
pub use w4a16_reference::formats::Producer;

/// The producer a case names when its file names none.
pub const DEFAULT_PRODUCER: Producer = Producer::CompressedTensors;

/// Whether a producer means anything for this symmetry (sweeps drop the other pairs): the legacy
/// unpacked zero points exist to be refused, which a symmetric layer (no zero points) cannot be.
pub fn producer_applies_to(producer: Producer, symmetry: Symmetry) -> bool {
    producer != Producer::LegacyUnpackedZp || symmetry == Symmetry::Asym
}

/// One test case: everything needed to build its tensors, select a kernel and name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Case {
    /// `<suite>/<shape-name>/M=<m>/<dtype>/<sym|asym>/g<G>/<class>[/<variant>]`.
    pub id: String,
    pub suite: String,
    pub shape_name: String,
    /// N, K and the group size of this case (`group == k` is channelwise).
    pub shape: LayerShape,
    pub m: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub class: DataClass,
    pub padding: RowPadding,
    pub bias: bool,
    /// Act-order (`g_idx`) layer: no kernel of the set takes it; the selection must say so.
    pub act_order: bool,
    pub producer: Producer,
    /// How X sits in its buffer (row stride, offset); every kernel that declares it takes it.
    pub x_layout: ViewLayout,
    /// How Y sits in its buffer.
    pub y_layout: ViewLayout,
    /// Whether fused_carrier runs too, on the carrier (absent from existing case files).
    #[serde(skip_serializing_if = "CarrierMode::is_off")]
    pub carrier: CarrierMode,
    /// A mixture-of-experts case (`moe_align` + `moe`): `m` is then the token count T, `shape`
    /// one expert's layer, and this the routing. `None` for every dense case.
    pub moe: Option<MoeRouting>,
}

/// The routing half of a MoE case: the experts and how the tokens reach them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MoeRouting {
    /// Experts of the router (global ids), before any expert map.
    pub experts: usize,
    pub top_k: usize,
    pub routing: RoutingKind,
    pub map: MapKind,
    /// Each row multiplied by its routed weight before the cast (the field's down projection).
    pub routed_weight: bool,
}

impl MoeRouting {
    /// Rows of C: one per (token, choice).
    pub fn slots(&self, tokens: usize) -> usize {
        tokens * self.top_k
    }
}

impl Case {
    /// The variant suffix: the non-default producer, padding, bias, act-order, X/Y layouts
    /// (`x-<layout>`, `y-<layout>`) and carrier, joined by `+`. Defaults leave no trace, so
    /// adding an axis keeps every existing id (and its seeded data).
    pub fn variant(&self) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if self.producer != DEFAULT_PRODUCER {
            parts.push(self.producer.name().into());
        }
        if let Some(p) = self.padding.variant() {
            parts.push(p.into());
        }
        if self.bias {
            parts.push("bias".into());
        }
        if self.act_order {
            parts.push("act-order".into());
        }
        if !self.x_layout.is_default() {
            parts.push(format!("x-{}", self.x_layout.name()));
        }
        if !self.y_layout.is_default() {
            parts.push(format!("y-{}", self.y_layout.name()));
        }
        if let Some(moe) = &self.moe {
            if moe.map != MapKind::All {
                parts.push(format!("map-{}", moe.map.name()));
            }
            if !moe.routed_weight {
                parts.push("unweighted".into());
            }
        }
        if let Some(c) = self.carrier.variant() {
            parts.push(c.into());
        }
        (!parts.is_empty()).then(|| parts.join("+"))
    }

    /// What the reference's data generator needs (seeded from the id by the caller).
    pub fn data_spec(&self) -> w4a16_reference::data::DataSpec {
        w4a16_reference::data::DataSpec {
            class: self.class,
            m: self.m,
            shape: self.shape,
            dtype: self.dtype,
            symmetry: self.symmetry,
            with_bias: self.bias,
        }
    }

    /// Whether the case's producer can write this layer and the resident layout can hold it
    /// (docs/contract.md §1–2): cases that cannot exist only in suites with `allow_unsupported`, and must end
    /// as clean refusals. Asymmetric N % 8 != 0 is buildable for the producers that write it
    /// (compressed-tensors' partial last zero-point word, the legacy unpacked tensor); GPTQ and
    /// AWQ pack zero points in whole words along N and cannot.
    pub fn is_buildable(&self) -> bool {
        self.shape.k.is_multiple_of(16)
            && (self.symmetry == Symmetry::Sym
                || self.shape.n.is_multiple_of(8)
                || self.producer.writes_zero_points_for_any_n())
            && !self.act_order
    }

    /// The layer whose weights this case shares with others: the runner keeps each worker's
    /// cases of one key together and makes their weights once. A dense case's layer is its id
    /// without `M=` ([`w4a16_reference::data::layer_key`], which also seeds it). A MoE case's
    /// experts depend on neither T, the routing, top_k, the routed weight nor the X/C layouts,
    /// so its key keeps only what they are drawn from: suite, shape, dtype, symmetry, group,
    /// class, the experts E and their map (which experts are local) and the row padding.
    pub fn layer_key(&self) -> String {
        match &self.moe {
            None => w4a16_reference::data::layer_key(&self.id),
            Some(moe) => format!(
                "{}/{}/{}/{}/g{}/{}/e{}/map-{}/padding-{}",
                self.suite,
                self.shape_name,
                self.dtype.name(),
                self.symmetry.name(),
                self.shape.group,
                self.class.name(),
                moe.experts,
                moe.map.name(),
                self.padding.name()
            ),
        }
    }

    /// The id this case's fields spell; `id` always equals it. A MoE case spells its token
    /// count `T=` and adds `e<E>-top<k>/<routing>` after the class.
    pub fn make_id(&self) -> String {
        if let Some(moe) = &self.moe {
            let mut id = format!(
                "{}/{}/T={}/{}/{}/g{}/{}/e{}-top{}/{}",
                self.suite,
                self.shape_name,
                self.m,
                self.dtype.name(),
                self.symmetry.name(),
                self.shape.group,
                self.class.name(),
                moe.experts,
                moe.top_k,
                moe.routing.name()
            );
            if let Some(v) = self.variant() {
                id.push('/');
                id.push_str(&v);
            }
            return id;
        }
        let mut id = format!(
            "{}/{}/M={}/{}/{}/g{}/{}",
            self.suite,
            self.shape_name,
            self.m,
            self.dtype.name(),
            self.symmetry.name(),
            self.shape.group,
            self.class.name()
        );
        if let Some(v) = self.variant() {
            id.push('/');
            id.push_str(&v);
        }
        id
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

/// A named layer shape: `<model>.<layer>` from `[[model]]`, or an edge shape from `[[shape]]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedShape {
    pub name: String,
    pub shape: LayerShape,
    /// The model it belongs to (`None` for edge shapes).
    pub model: Option<String>,
}

/// A named mixture-of-experts layer: one expert's shape, the router's expert count and top-k.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedMoeShape {
    pub name: String,
    pub shape: LayerShape,
    pub experts: usize,
    pub top_k: usize,
    pub model: Option<String>,
}

/// One of the field's four providers (dtype × symmetry), as the perf suite names them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provider {
    pub name: String,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
}

/// A suite and its expanded cases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suite {
    pub name: String,
    pub description: String,
    pub file: PathBuf,
    pub allow_unsupported: bool,
    /// `on_request` of `[suite]`: the suite runs only when named (`--suite`), never in a run of
    /// every suite (it would slow CI's default run; a scheduled job or a person names it).
    pub on_request: bool,
    /// `isa_emulator_max_macs` of `[suite]`: the ISA emulator's budget for this suite, where
    /// it declares one.
    pub isa_emulator_max_macs: Option<u64>,
    /// Case id → the `isa_emulator_max_macs` of the sweep that made it, where it declares one.
    pub isa_emulator_sweep_budgets: std::collections::BTreeMap<String, u64>,
    pub cases: Vec<Case>,
}

impl Suite {
    /// The ISA emulator's declared budget for case `id`: its sweep's, else the suite's.
    pub fn isa_emulator_max_macs_of(&self, id: &str) -> Option<u64> {
        self.isa_emulator_sweep_budgets
            .get(id)
            .copied()
            .or(self.isa_emulator_max_macs)
    }
}

/// What `w4a16 cases` prints per suite.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SuiteCount {
    pub name: String,
    pub description: String,
    pub file: PathBuf,
    pub cases: usize,
    /// Distinct shapes, M values and (dtype, symmetry) providers in the suite.
    pub shapes: usize,
    pub batch_sizes: usize,
    pub providers: usize,
}

/// Everything under `cases/`, loaded and checked.
#[derive(Clone, Debug, Default)]
pub struct CaseSet {
    pub(crate) suites: Vec<Suite>,
    pub(crate) shapes: Vec<NamedShape>,
    pub(crate) moe_shapes: Vec<NamedMoeShape>,
    pub(crate) batch_sizes: Vec<usize>,
    pub(crate) providers: Vec<Provider>,
    pub(crate) known_bad: Vec<KnownBad>,
    pub(crate) models: Vec<ModelDescription>,
}

impl CaseSet {
    /// Suites in name order, with their case counts.
    pub fn suites(&self) -> Vec<SuiteCount> {
        self.suites
            .iter()
            .map(|s| {
                let distinct = |f: &dyn Fn(&Case) -> String| {
                    s.cases
                        .iter()
                        .map(f)
                        .collect::<std::collections::BTreeSet<_>>()
                        .len()
                };
                SuiteCount {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    file: s.file.clone(),
                    cases: s.cases.len(),
                    shapes: distinct(&|c| c.shape_name.clone()),
                    batch_sizes: distinct(&|c| c.m.to_string()),
                    providers: distinct(&|c| format!("{}/{}", c.dtype.name(), c.symmetry.name())),
                }
            })
            .collect()
    }

    pub fn suite(&self, name: &str) -> Option<&Suite> {
        self.suites.iter().find(|s| s.name == name)
    }

    pub fn suite_names(&self) -> Vec<&str> {
        self.suites.iter().map(|s| s.name.as_str()).collect()
    }

    /// Every case of every suite, suites in name order.
    pub fn cases(&self) -> impl Iterator<Item = &Case> {
        self.suites.iter().flat_map(|s| s.cases.iter())
    }

    pub fn case(&self, id: &str) -> Option<&Case> {
        self.cases().find(|c| c.id == id)
    }

    pub fn total_cases(&self) -> usize {
        self.suites.iter().map(|s| s.cases.len()).sum()
    }

    pub fn shapes(&self) -> &[NamedShape] {
        &self.shapes
    }

    pub fn shape(&self, name: &str) -> Option<&NamedShape> {
        self.shapes.iter().find(|s| s.name == name)
    }

    /// The shapes of docs/contract.md §7 (every `[[model]]` layer), in file order.
    /// The mixture-of-experts layers (`[[model.moe]]`, `[[moe_shape]]`).
    pub fn moe_shapes(&self) -> &[NamedMoeShape] {
        &self.moe_shapes
    }

    pub fn model_shapes(&self) -> impl Iterator<Item = &NamedShape> {
        self.shapes.iter().filter(|s| s.model.is_some())
    }

    pub fn batch_sizes(&self) -> &[usize] {
        &self.batch_sizes
    }

    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    pub fn known_bad(&self) -> &[KnownBad] {
        &self.known_bad
    }

    /// The known-bad entry covering this case on this target, if any.
    pub fn known_bad_for(&self, case_id: &str, target: &str) -> Option<&KnownBad> {
        known_bad::known_bad_for(&self.known_bad, case_id, target)
    }

    /// Model descriptions from `cases/models/*.toml` (for the startup memory check).
    pub fn models(&self) -> &[ModelDescription] {
        &self.models
    }

    pub fn model(&self, name: &str) -> Option<&ModelDescription> {
        self.models.iter().find(|m| m.name == name)
    }
}

/// The table `w4a16 cases` prints: one row per suite and a total.
pub fn render_counts(set: &CaseSet) -> String {
    use fmt::Write as _;
    let rows = set.suites();
    let width = rows
        .iter()
        .map(|r| r.name.len())
        .chain(["suite".len(), "total".len()])
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>6}  {:>8}  {:>9}  description",
        "suite", "cases", "shapes", "M values", "providers"
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6}  {:>8}  {:>9}  {}",
            r.name, r.cases, r.shapes, r.batch_sizes, r.providers, r.description
        );
    }
    let _ = writeln!(out, "{:<width$}  {:>6}", "total", set.total_cases());
    out
}

/// The variable naming the case folder where a binary runs away from its checkout (the staged
/// GPU run: `scripts/gpu-job.sh` sets it).
pub const CASES_ENV: &str = "W4A16_CASES";

/// No case folder to be found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    #[error(
        "no cases/ folder (one holding models.toml) in {} or above; pass --cases DIR or set {CASES_ENV}",
        start.display()
    )]
    NotFound { start: PathBuf },
    #[error("the working directory cannot be read ({reason}); pass --cases DIR or set {CASES_ENV}")]
    NoWorkingDir { reason: String },
}

/// The case folder, found the one way the command line and the tests share: `explicit`
/// (`--cases DIR`), else [`CASES_ENV`], else the nearest `cases/` holding `models.toml` in the
/// working directory or above it. Never through the source tree, so a binary finds the cases of
/// the checkout it runs in (tests run in their package's folder, whose workspace holds them).
pub fn locate(explicit: Option<PathBuf>) -> Result<PathBuf, LocateError> {
    if let Some(dir) = explicit.or_else(|| std::env::var_os(CASES_ENV).map(PathBuf::from)) {
        return Ok(dir);
    }
    let start = std::env::current_dir().map_err(|e| LocateError::NoWorkingDir {
        reason: e.to_string(),
    })?;
    start
        .ancestors()
        .map(|dir| dir.join("cases"))
        .find(|cases| cases.join("models.toml").is_file())
        .ok_or(LocateError::NotFound { start })
}

#[cfg(test)]
mod named_tests {
    use crate::{CarrierMode, Mode, RowPadding, ViewLayout};

    w4a16_reference::named_enum_tests! {
        row_padding: RowPadding,
        view_layout: ViewLayout,
        carrier_mode: CarrierMode,
        suppression_mode: Mode,
    }
}
