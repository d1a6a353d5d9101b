//! Selection for mixture-of-experts layers: the engine's MoE method either takes the layer with
//! `moe_align` + `moe` (the tile, and with it `block_m`, from the target's decode or prefill
//! table) or refuses it with a reason per rule. There is no MoE fallback in the set, so a
//! refusal means the engine cannot run the layer quantized; the rules are `moe`'s declared
//! contract, read from its declaration.

use serde::Serialize;
use w4a16_kernels::decl::{GroupRule, Tile};
use w4a16_kernels::{KernelId, Target, set, tiles};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;
use w4a16_reference::layer::{LayerShape, Symmetry};

use crate::{MoeRefusal, MoeRefusals};
use w4a16_cases::{Case, MoeRouting, RowPadding};

/// One MoE layer call as the engine sees it: T tokens, each routed to `top_k` of `experts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MoeRequest {
    /// One expert's layer.
    pub shape: LayerShape,
    pub tokens: usize,
    pub top_k: usize,
    /// Global experts (the router's).
    pub experts: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub padding: RowPadding,
    /// The checkpoint format the experts were loaded from.
    #[serde(skip)]
    pub producer: Producer,
}

impl MoeRequest {
    pub fn from_case(case: &Case, routing: MoeRouting) -> Self {
        MoeRequest {
            shape: case.shape,
            tokens: case.m,
            top_k: routing.top_k,
            experts: routing.experts,
            dtype: case.dtype,
            symmetry: case.symmetry,
            padding: case.padding,
            producer: case.producer,
        }
    }

    /// Routed rows of C: `T·top_k`.
    pub fn slots(&self) -> usize {
        self.tokens * self.top_k
    }
}

/// Which table a MoE launch read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MoePhase {
    /// Few slots per expert: `block_m` = 16.
    Decode,
    /// The rest: `block_m` 32 or 64.
    Prefill,
}

/// The chosen launch of a MoE layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoeChoice {
    pub target: Target,
    pub request: MoeRequest,
    pub phase: MoePhase,
    /// The mean slots per expert that picked the table: `⌈T·top_k / E⌉`.
    pub slots_per_expert: usize,
    /// The table's name and the rung that took the launch.
    pub table: &'static str,
    pub rung: usize,
    /// The `moe` tile; its BM is `moe_align`'s `block_m`.
    pub tile: Tile,
}

impl MoeChoice {
    pub fn path(&self) -> [KernelId; 2] {
        [KernelId::MoeAlign, KernelId::Moe]
    }

    pub fn block_m(&self) -> usize {
        self.tile.bm as usize
    }

    /// One line: the path, the tile and why this table.
    pub fn describe(&self) -> String {
        let t = self.tile;
        format!(
            "moe_align+moe {}x{}x{}w{} (block_m {}): {} slots / {} experts = {} per expert {} {} → {} rung {}",
            t.bm,
            t.bn,
            t.bk,
            t.warps,
            t.bm,
            self.request.slots(),
            self.request.experts,
            self.slots_per_expert,
            if self.phase == MoePhase::Decode {
                "≤"
            } else {
                ">"
            },
            tiles::DECODE_SLOTS_PER_EXPERT,
            self.table,
            self.rung
        )
    }
}

/// What the selection does with a MoE layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum MoeSelection {
    Chosen(MoeChoice),
    /// No kernel of the set takes the layer; one reason per broken rule.
    Refused {
        reasons: MoeRefusals,
    },
}

/// The rules of `moe`'s declared contract the layer breaks.
fn refusals(r: &MoeRequest) -> MoeRefusals {
    let c = set::MOE.contract;
    let LayerShape { n, k, group } = r.shape;
    let mut out = Vec::new();
    if let GroupRule::OneOf(allowed) = c.groups
        && !allowed.contains(&group)
    {
        out.push(MoeRefusal::GroupNotAllowed { group, allowed });
    }
    if !k.is_multiple_of(c.k_multiple) {
        out.push(MoeRefusal::KNotMultiple {
            k,
            multiple: c.k_multiple,
        });
    }
    if r.symmetry == Symmetry::Asym && !n.is_multiple_of(8) {
        out.push(MoeRefusal::ZeroPointsNNotMultipleOf8 { n });
    }
    if r.symmetry == Symmetry::Asym
        && c.packed_zero_points
        && r.producer == Producer::LegacyUnpackedZp
    {
        out.push(MoeRefusal::UnpackedZeroPoints);
    }
    if r.top_k == 0 || r.top_k > r.experts {
        out.push(MoeRefusal::TopK {
            top_k: r.top_k,
            experts: r.experts,
        });
    }
    if r.tokens == 0 {
        out.push(MoeRefusal::NoTokens);
    }
    MoeRefusals(out)
}

/// The MoE selection on `target`.
pub fn select_moe(target: Target, r: &MoeRequest) -> MoeSelection {
    let reasons = refusals(r);
    if !reasons.is_empty() {
        return MoeSelection::Refused { reasons };
    }
    let spe = tiles::slots_per_expert(r.tokens, r.top_k, r.experts);
    let tables = tiles::moe_tables(target);
    let (phase, table) = if spe <= tiles::DECODE_SLOTS_PER_EXPERT {
        (MoePhase::Decode, tables.decode)
    } else {
        (MoePhase::Prefill, tables.prefill)
    };
    let (rung, tile) = table.pick(spe, r.shape.n);
    debug_assert_eq!(
        tile,
        tiles::moe_tile(
            target,
            r.dtype,
            r.tokens,
            r.top_k,
            r.experts,
            r.shape.n,
            r.shape.k,
            r.shape.group
        ),
        "the selection and the launch read the same table"
    );
    MoeSelection::Chosen(MoeChoice {
        target,
        request: *r,
        phase,
        slots_per_expert: spe,
        table: table.name,
        rung,
        tile,
    })
}

/// One snapshot row: the request and what the selection did with it.
pub fn row(r: &MoeRequest, sel: &MoeSelection) -> String {
    let head = format!(
        "k{}-n{}-g{} T={} E={} top{} {} {}",
        r.shape.k,
        r.shape.n,
        r.shape.group,
        r.tokens,
        r.experts,
        r.top_k,
        r.dtype.name(),
        r.symmetry.name()
    );
    match sel {
        MoeSelection::Chosen(c) => format!("{head}: {}", c.describe()),
        MoeSelection::Refused { reasons } => format!("{head}: refused: {reasons}"),
    }
}
