//! The per-element bound of docs/contract.md §6, derived from a kernel's numeric recipe.
//!
//! `|ŷ − y| ≤ c·(γ_K·A + u_w·a) + u_out·|y|`, `A = a` (or `a_offset` for offset-accumulating
//! recipes), made a theorem by the small terms the spec formula leaves out:
//!
//! * Accumulator: `E_acc = c·[γ_K·(1+u_w)·A + u_w·a + (2K+2)·2⁻¹⁵⁰]`. The `(1+u_w)` is the
//!   magnitude growth of rounded weights; the last term is fp32 gradual underflow (each of at most
//!   `2K+2` fp32 operations per output loses at most half the smallest fp32 subnormal).
//! * Bias before the cast (one rounding of `acc + b` in fp32, then one cast):
//!   `(1+u_out)(1+u32)·E_acc + (u_out + u32·(1+u_out))·|y| + η`.
//! * Bias after the cast: `t = fl(acc)` then `ŷ = fl(t + b)`. With `y₀ = y − b`,
//!   `|t − y₀| ≤ (1+u_out)·E_acc + u_out·|y₀| + η` and the second rounding adds `u_out·|t + b| + η`,
//!   so `(1+u_out)²·E_acc + u_out·(1+u_out)·|y₀| + u_out·|y| + (2+u_out)·η`. The extra term over
//!   before-cast is `u_out·|y − b|`: large when the bias cancels the product. Adding in fp32 and
//!   rounding to the dtype equals the dtype addition (fp32 has ≥ 2p+2 bits for p = 11 and 8, so the
//!   double rounding is innocuous).
//! * Without bias (or a zero bias) there is no add: `(1+u_out)·E_acc + u_out·|y| + η`.
//! * `η` is the output's absolute floor: half the spacing of the dtype's subnormals, 2⁻²⁵ for
//!   fp16 and 2⁻¹³⁴ for bf16 (below the smallest normal the relative `u_out` no longer holds).
//!   A kernel that flushes subnormals to zero would need more; none of ours does.
//! * The reference's own f64 error (`γ64_{K+2}` relative to `a + |b|`) is added and every
//!   coefficient inflated by `1 + 2γ64_{K+2}`; negligible, but it keeps exact-only reasoning out.
//!
//! * Pre-rounded bias (the fp16 carrier): the kernel forms `ŵ = fl(fl(q·s) + b)` or
//!   `ŵ = fl(q·s + b)` (FMA) with `b = fl(−z·s)`. Every value involved is an integer multiple of
//!   the dtype's smallest subnormal (an integer times `s`, or a rounding of one), which the dtype
//!   holds exactly below its smallest normal, so each rounding is relative without an absolute
//!   floor: `|ŵ − w| ≤ u·|w| + u(1+u)·|s|·(q + z)` for both evaluations (the FMA drops the
//!   `q·|s|` part). The sign of a nonzero w is kept; mul+add keeps w = 0 exact, the FMA leaves
//!   the residue `z·s − fl(z·s)` (so IEEE special values in X are refused for this recipe). With `a_c = Σ|x|·|s|·(q + z)` (the offset magnitude at offset 0),
//!   `Σ|x||ŵ| ≤ (1+u)·a + u(1+u)·a_c` and `Σ|x||ŵ − w| ≤ u·a + u(1+u)·a_c`, so
//!   `E_acc = c·[(γ_K·(1+u) + u)·a + u(1+u)(1+γ_K)·a_c + (2K+2)·2⁻¹⁵⁰]`, with `A = a_c`.
//!   (Overflow of `q·s` or `z·s` is outside the bound, as for every recipe.)
//!
//! * Routed weight (MoE, docs/contract.md §4 item 5): `ŷ = fl_out(fl32(acc·r))` against `y·r`, no bias. The
//!   fp32 product is one more rounding before the cast, like the before-cast bias add, plus the
//!   fp32 underflow of a product (an addition near zero is exact, a product is not):
//!   `(1+u_out)(1+u32)·|r|·E_acc + (u_out + u32·(1+u_out))·|y·r| + (1+u_out)·2⁻¹⁵⁰ + η`.
//!   `E_acc` scales with `|r|` term by term, its fp32 floor included ([`RoutedTerms`]).
//!
//! `c_target` multiplies the accumulator term only: it stands for how a target accumulates
//! (blocked order, matrix units that do not round to nearest), not for the final cast.

use crate::dtype::ActDtype;
use crate::gemm::InputError;
use crate::recipe::{BiasStage, NumericRecipe};

/// Unit roundoff of fp32.
pub const U32: f64 = 1.0 / 16_777_216.0;
/// Unit roundoff of f64.
pub const U64: f64 = 1.0 / 9_007_199_254_740_992.0;

/// `γ_n = n·u/(1 − n·u)`, defined while `n·u < 1`.
pub fn gamma(n: usize, u: f64) -> Option<f64> {
    let nu = n as f64 * u;
    (nu < 1.0).then(|| nu / (1.0 - nu))
}

/// Half the spacing of the dtype's subnormals: the absolute error of rounding near zero.
pub fn output_underflow(dtype: ActDtype) -> f64 {
    match dtype {
        ActDtype::F16 => 2f64.powi(-25),
        ActDtype::Bf16 => 2f64.powi(-134),
    }
}

/// Half the smallest fp32 subnormal: the absolute error of one fp32 operation near zero.
pub fn fp32_underflow() -> f64 {
    2f64.powi(-150)
}

/// The bound is linear in the magnitudes: this is the list of coefficients, so that sums of
/// bounds (Freivalds) can be formed from sums of magnitudes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundTerms {
    /// Multiplies `A` (`a`, or `a_offset` for offset recipes).
    pub accumulation: f64,
    /// Multiplies `a` (weight rounding and the reference's slack).
    pub weight: f64,
    /// Multiplies `|y|`.
    pub y: f64,
    /// Multiplies `|y − bias|`.
    pub y_pre_bias: f64,
    /// Absolute floor.
    pub floor: f64,
}

impl BoundTerms {
    #[inline]
    pub fn eval(&self, acc_magnitude: f64, a: f64, y_abs: f64, y_pre_bias_abs: f64) -> f64 {
        self.accumulation * acc_magnitude
            + self.weight * a
            + self.y * y_abs
            + self.y_pre_bias * y_pre_bias_abs
            + self.floor
    }

    /// Term by term the larger of two bounds: covers an implementation that may do either.
    pub fn max(&self, other: &BoundTerms) -> BoundTerms {
        BoundTerms {
            accumulation: self.accumulation.max(other.accumulation),
            weight: self.weight.max(other.weight),
            y: self.y.max(other.y),
            y_pre_bias: self.y_pre_bias.max(other.y_pre_bias),
            floor: self.floor.max(other.floor),
        }
    }
}

/// The coefficients of the routed-weight bound: `terms` evaluated on the magnitudes scaled by
/// `|r|`, plus `accumulator_floor·|r|` (the accumulator's fp32 floor also shrinks with `|r|`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoutedTerms {
    pub terms: BoundTerms,
    pub accumulator_floor: f64,
}

/// The bound of one kernel recipe for one K, ready to evaluate per element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundModel {
    pub recipe: NumericRecipe,
    pub k: usize,
    pub c_target: f64,
    pub gamma_k: f64,
    pub u_w: f64,
    pub u_out: f64,
    with_bias: BoundTerms,
    without_bias: BoundTerms,
    routed: RoutedTerms,
}

impl BoundModel {
    pub fn new(recipe: &NumericRecipe, k: usize, c_target: f64) -> Result<Self, InputError> {
        if !(c_target.is_finite() && c_target > 0.0) {
            return Err(InputError::Mismatch {
                what: "c_target",
                expected: "a finite factor > 0".into(),
                got: c_target.to_string(),
            });
        }
        if recipe.pre_rounded_bias
            && (!recipe.rounds_dequantized_weight || recipe.offset_accumulation.is_some())
        {
            return Err(InputError::Mismatch {
                what: "recipe pre_rounded_bias",
                expected: "rounded dequantized weights and no offset accumulation".into(),
                got: format!(
                    "rounds_dequantized_weight = {}, offset_accumulation = {:?}",
                    recipe.rounds_dequantized_weight, recipe.offset_accumulation
                ),
            });
        }
        let gamma_k = gamma(k, U32)
            .filter(|g| *g <= 1.0)
            .ok_or_else(|| InputError::Mismatch {
                what: "K for the fp32 bound",
                expected: "K·2⁻²⁴ ≤ 1/2".into(),
                got: k.to_string(),
            })?;
        let dtype = recipe.output;
        let u = U32;
        let ud = dtype.unit_roundoff();
        let eta = output_underflow(dtype);
        let u_w = if recipe.rounds_dequantized_weight {
            ud
        } else {
            0.0
        };
        let (acc_m, acc_a) = if recipe.pre_rounded_bias {
            // `A = a_c`; see the module comment.
            (
                c_target * ud * (1.0 + ud) * (1.0 + gamma_k),
                c_target * (gamma_k * (1.0 + ud) + ud),
            )
        } else {
            (c_target * gamma_k * (1.0 + u_w), c_target * u_w)
        };
        let acc_f = c_target * (2 * k + 2) as f64 * fp32_underflow();

        let plain = |f: f64, y: f64, y0: f64, floor: f64| BoundTerms {
            accumulation: f * acc_m,
            weight: f * acc_a,
            y,
            y_pre_bias: y0,
            floor: f * acc_f + floor,
        };
        let without_bias = plain(1.0 + ud, ud, 0.0, eta);
        let before_cast = plain((1.0 + ud) * (1.0 + u), ud + u * (1.0 + ud), 0.0, eta);
        let after_cast = plain(
            (1.0 + ud) * (1.0 + ud),
            ud,
            ud * (1.0 + ud),
            (2.0 + ud) * eta,
        );
        let with_bias = match recipe.bias {
            BiasStage::BeforeCast => before_cast,
            BiasStage::AfterCast => after_cast,
            BiasStage::Either => before_cast.max(&after_cast),
        };
        let routed_factor = (1.0 + ud) * (1.0 + u);
        let routed = RoutedTerms {
            terms: BoundTerms {
                floor: eta + (1.0 + ud) * fp32_underflow(),
                ..plain(routed_factor, ud + u * (1.0 + ud), 0.0, 0.0)
            },
            accumulator_floor: routed_factor * acc_f,
        };
        let rho = gamma(k + 2, U64).unwrap_or(f64::INFINITY);
        let with_slack = |t: BoundTerms| {
            let i = 1.0 + 2.0 * rho;
            BoundTerms {
                accumulation: t.accumulation * i,
                weight: t.weight * i + 2.0 * rho,
                y: t.y * i + 2.0 * rho,
                y_pre_bias: t.y_pre_bias * i + 2.0 * rho,
                floor: t.floor * i,
            }
        };
        Ok(BoundModel {
            recipe: *recipe,
            k,
            c_target,
            gamma_k,
            u_w,
            u_out: ud,
            with_bias: with_slack(with_bias),
            without_bias: with_slack(without_bias),
            routed: RoutedTerms {
                terms: with_slack(routed.terms),
                accumulator_floor: routed.accumulator_floor * (1.0 + 2.0 * rho),
            },
        })
    }

    /// The coefficients for an element whose bias is nonzero (or zero/absent). The nonzero-bias
    /// terms dominate the others coefficient by coefficient, so they bound sums over mixed rows.
    #[inline]
    pub fn terms(&self, bias_nonzero: bool) -> &BoundTerms {
        if bias_nonzero {
            &self.with_bias
        } else {
            &self.without_bias
        }
    }

    /// The routed-weight coefficients (see the module doc).
    pub fn routed_terms(&self) -> &RoutedTerms {
        &self.routed
    }

    /// The bound for one element of `cast(fl32(acc·r))` against `y·r`: `y`, `a` and
    /// `acc_magnitude` are the dense (unrouted) row's values, `routed` the slot's weight `r`.
    pub fn routed_element(&self, y: f64, a: f64, acc_magnitude: f64, routed: f64) -> f64 {
        let r = routed.abs();
        let yr = (y * routed).abs();
        self.routed.terms.eval(r * acc_magnitude, r * a, yr, yr) + self.routed.accumulator_floor * r
    }

    /// A bound on `|acc − (y − bias)|` for the fp32 accumulator before any later rounding:
    /// `c·[γ_K·(1+u_w)·A + u_w·a + (2K+2)·2⁻¹⁵⁰]`, or the pre-rounded-bias recipe's `E_acc` of
    /// the module doc (no slack: used only to decide whether the accumulator itself may
    /// overflow fp32).
    pub fn accumulator_error(&self, a: f64, acc_magnitude: f64) -> f64 {
        let floor = (2 * self.k + 2) as f64 * fp32_underflow();
        if self.recipe.pre_rounded_bias {
            let (g, u) = (self.gamma_k, self.u_out);
            return self.c_target
                * ((g * (1.0 + u) + u) * a + u * (1.0 + u) * (1.0 + g) * acc_magnitude + floor);
        }
        self.c_target * (self.gamma_k * (1.0 + self.u_w) * acc_magnitude + self.u_w * a + floor)
    }

    /// Whether `A` is the reference's extra magnitude lane (`a_offset`): offset-accumulating
    /// and pre-rounded-bias recipes.
    pub fn uses_offset(&self) -> bool {
        self.recipe.magnitude_offset().is_some()
    }

    /// The bound for one element: `acc_magnitude` is `a_offset` for offset and pre-rounded-bias
    /// recipes, else `a`.
    #[inline]
    pub fn element(&self, y: f64, a: f64, acc_magnitude: f64, bias: f64) -> f64 {
        self.terms(bias != 0.0)
            .eval(acc_magnitude, a, y.abs(), (y - bias).abs())
    }
}
