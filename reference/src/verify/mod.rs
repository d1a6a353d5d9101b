//! The second oracle: checks that need no full reference, for shapes too big for it and as an
//! independent opinion on every case. Freivalds sees every element but only through line sums;
//! sampled verification sees chosen lines exactly. Together: whole-output coverage for gross
//! errors, per-element rigour on the strata where tiling bugs live.

pub mod freivalds;
pub mod sampled;

pub use freivalds::{FreivaldsReport, Line, freivalds, freivalds_with};
pub use sampled::{SampledReport, sampled, sampled_with, select_lines};

use crate::bound::BoundModel;
use crate::compare::OutputBits;
use crate::gemm::{InputError, NonFiniteX, SpecialRows, validate_with};
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;
use serde::{Deserialize, Serialize};

/// Reference flops for sampled lines by default. On the 4096×14336×28672 case this buys the first
/// and last rows and 20 columns, about a third of the verification time (examples/verify_large).
pub const DEFAULT_SAMPLE_FLOPS: f64 = 8e9;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerifyBudget {
    /// Flops the sampled lines may cost (see [`sampled::plan`]).
    pub sample_flops: f64,
    /// Seeds both the ±1 vectors and the line choice; print it with the case.
    pub seed: u64,
}

impl VerifyBudget {
    pub fn new(seed: u64) -> Self {
        VerifyBudget {
            sample_flops: DEFAULT_SAMPLE_FLOPS,
            seed,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub freivalds: FreivaldsReport,
    pub sampled: SampledReport,
}

impl VerifyReport {
    pub fn passed(&self) -> bool {
        self.freivalds.passed() && self.sampled.passed()
    }
}

/// Freivalds over the whole output plus sampled lines, for outputs too big for the reference.
pub fn verify_large(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    y: OutputBits<'_>,
    c_target: f64,
    budget: &VerifyBudget,
) -> Result<VerifyReport, InputError> {
    verify_large_with(x, layer, recipe, y, c_target, budget, NonFiniteX::Refuse)
}

/// [`verify_large`], with the policy for non-finite X (the data class says which).
pub fn verify_large_with(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    y: OutputBits<'_>,
    c_target: f64,
    budget: &VerifyBudget,
    non_finite_x: NonFiniteX,
) -> Result<VerifyReport, InputError> {
    validate_with(x, layer, recipe, non_finite_x)?;
    y.validate(x.m, layer.shape.n)?;
    let model = BoundModel::new(recipe, layer.shape.k, c_target)?;
    // The sampled lines ride the Freivalds passes: the rows on the W pass, the columns on the
    // first X pass, so W and X are each read as few times as possible.
    let offset = recipe.magnitude_offset().is_some();
    let (rows, cols) = sampled::choose(
        x.m,
        layer.shape.n,
        layer.shape.k,
        offset,
        budget.sample_flops,
        budget.seed,
    );
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    let (freivalds, row_lines, col_lines) =
        freivalds::run(&xz, &special, layer, &model, y, budget.seed, &rows, &cols);
    let sampled = sampled::from_lines(&row_lines, &col_lines, &model, y);
    Ok(VerifyReport { freivalds, sampled })
}
