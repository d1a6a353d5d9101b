//! A kernel's output and the checks that it, and the bound model, fit the reference.

use crate::bound::BoundModel;
use crate::dtype::ActDtype;
use crate::gemm::InputError;

/// A kernel's output: `[M, N]` bits of the activation dtype with a row stride in elements.
#[derive(Clone, Copy, Debug)]
pub struct OutputBits<'a> {
    pub bits: &'a [u16],
    pub row_stride: usize,
}

impl<'a> OutputBits<'a> {
    pub fn new(bits: &'a [u16], row_stride: usize) -> Self {
        OutputBits { bits, row_stride }
    }

    pub fn get(&self, m: usize, n: usize) -> u16 {
        self.bits[m * self.row_stride + n]
    }

    /// Checks that an `[m, n]` output fits.
    pub fn validate(&self, m: usize, n: usize) -> Result<(), InputError> {
        if self.row_stride < n {
            return Err(InputError::Mismatch {
                what: "Y row stride",
                expected: format!("≥ N = {n}"),
                got: self.row_stride.to_string(),
            });
        }
        let needed = if m == 0 {
            0
        } else {
            (m - 1) * self.row_stride + n
        };
        if self.bits.len() < needed {
            return Err(InputError::Mismatch {
                what: "Y data length",
                expected: format!("≥ {needed}"),
                got: self.bits.len().to_string(),
            });
        }
        Ok(())
    }
}

pub(crate) fn check_model(
    model: &BoundModel,
    k: usize,
    dtype: ActDtype,
    has_offset: bool,
) -> Result<(), InputError> {
    if model.k != k {
        return Err(InputError::Mismatch {
            what: "bound model K",
            expected: k.to_string(),
            got: model.k.to_string(),
        });
    }
    if model.recipe.output != dtype {
        return Err(InputError::Mismatch {
            what: "bound model output dtype",
            expected: dtype.to_string(),
            got: model.recipe.output.to_string(),
        });
    }
    if model.uses_offset() != has_offset {
        return Err(InputError::Mismatch {
            what: "reference a_offset (recipe offset_accumulation)",
            expected: if model.uses_offset() {
                "present"
            } else {
                "absent"
            }
            .into(),
            got: if has_offset { "present" } else { "absent" }.into(),
        });
    }
    Ok(())
}

pub(crate) fn check_model_for(
    model: &BoundModel,
    k: usize,
    dtype: ActDtype,
) -> Result<(), InputError> {
    check_model(model, k, dtype, model.uses_offset())
}
