//! An engine's fused projection (q|k|v, gate|up): the parts' layers stacked along N, as an
//! engine's loader writes each part's rows at its offset into one weight. Checked as one layer,
//! the way the engine launches it.

use rayon::prelude::*;
use std::sync::Arc;
use w4a16_reference::formats::{Checkpoint, ConvertError, Converted, LoadTarget, RowPadding};
use w4a16_reference::layer::{LayerShape, QuantizedLayer};

/// Why parts cannot be fused into one layer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FuseError {
    #[error("a fused projection needs at least two parts, got {got}")]
    TooFewParts { got: usize },
    #[error(
        "{part}: {what} is {got}, but {first} has {expected}; an engine fuses only parts quantized alike"
    )]
    Mismatch {
        part: String,
        first: String,
        what: &'static str,
        expected: String,
        got: String,
    },
}

/// One part: its module name, its checkpoint and the shape the architecture gives it.
#[derive(Clone, Debug)]
pub struct FusedPart {
    pub module: String,
    pub checkpoint: Arc<dyn Checkpoint>,
    pub target: LoadTarget,
    pub group: usize,
    pub symmetric: bool,
}

/// The parts of one fused projection, in the engine's order (q, k, v; gate, up).
#[derive(Clone, Debug)]
pub struct FusedProjection {
    parts: Vec<FusedPart>,
    format: &'static str,
}

impl FusedProjection {
    /// Parts that agree in K, group size, dtype and format; N is their sum.
    pub fn new(parts: Vec<FusedPart>) -> Result<Self, FuseError> {
        let Some(first) = parts.first() else {
            return Err(FuseError::TooFewParts { got: 0 });
        };
        if parts.len() < 2 {
            return Err(FuseError::TooFewParts { got: parts.len() });
        }
        let format = first.checkpoint.format_name();
        for p in &parts[1..] {
            let mismatch = |what, expected: String, got: String| FuseError::Mismatch {
                part: p.module.clone(),
                first: first.module.clone(),
                what,
                expected,
                got,
            };
            if p.target.k != first.target.k {
                return Err(mismatch(
                    "K",
                    first.target.k.to_string(),
                    p.target.k.to_string(),
                ));
            }
            if p.group != first.group {
                return Err(mismatch(
                    "the group size",
                    first.group.to_string(),
                    p.group.to_string(),
                ));
            }
            if p.target.dtype != first.target.dtype {
                return Err(mismatch(
                    "the dtype",
                    first.target.dtype.name().into(),
                    p.target.dtype.name().into(),
                ));
            }
            if p.symmetric != first.symmetric {
                let sym = |s: bool| if s { "symmetric" } else { "asymmetric" };
                return Err(mismatch(
                    "the symmetry",
                    sym(first.symmetric).into(),
                    sym(p.symmetric).into(),
                ));
            }
            if p.checkpoint.format_name() != format {
                return Err(mismatch(
                    "the format",
                    format.into(),
                    p.checkpoint.format_name().into(),
                ));
            }
        }
        Ok(FusedProjection { parts, format })
    }

    /// The fused layer's target: the parts' N summed.
    pub fn target(&self) -> LoadTarget {
        let first = self.parts[0].target;
        LoadTarget {
            n: self.parts.iter().map(|p| p.target.n).sum(),
            ..first
        }
    }

    pub fn group(&self) -> usize {
        self.parts[0].group
    }

    pub fn parts(&self) -> &[FusedPart] {
        &self.parts
    }

    /// Stacks the parts' logical layers along N. Symmetric and asymmetric parts cannot share
    /// one zero-point tensor (the symmetric ones would need z = 8 written out): refused.
    fn stack(&self, layers: Vec<QuantizedLayer>) -> Result<QuantizedLayer, ConvertError> {
        let first = &layers[0];
        let asym = first.zeros.is_some();
        // `new` refused parts of different symmetry; a reading that disagrees with its config
        // is the part's own converter's refusal.
        if layers.iter().any(|l| l.zeros.is_some() != asym) {
            return Err(ConvertError::MissingZeroPoints {
                tensor: "zero points (a fused part's reading disagrees with its symmetry)",
            });
        }
        let shape = LayerShape::new(
            layers.iter().map(|l| l.shape.n).sum(),
            first.shape.k,
            first.shape.group,
        );
        let any_bias = layers.iter().any(|l| l.bias.is_some());
        let mut out = QuantizedLayer {
            shape,
            dtype: first.dtype,
            q: Vec::with_capacity(shape.n * shape.k),
            zeros: asym.then(Vec::new),
            scales: Vec::new(),
            bias: any_bias.then(Vec::new),
        };
        for l in &layers {
            out.q.extend_from_slice(&l.q);
            if let (Some(z), Some(lz)) = (out.zeros.as_mut(), l.zeros.as_ref()) {
                z.extend_from_slice(lz);
            }
            out.scales.extend_from_slice(&l.scales);
            if let Some(b) = out.bias.as_mut() {
                // A part without a bias contributes zeros, as an engine's zero-initialised
                // fused bias does.
                match &l.bias {
                    Some(lb) => b.extend_from_slice(lb),
                    None => b.extend(std::iter::repeat_n(0u16, l.shape.n)),
                }
            }
        }
        Ok(out)
    }
}

impl Checkpoint for FusedProjection {
    fn format_name(&self) -> &'static str {
        self.format
    }

    /// Each part through its own converter, then stacked: what the engine's loader does. The
    /// parts convert in parallel (gate and up are each a 70B layer's largest), the first error
    /// in part order is the one returned.
    fn to_resident(
        &self,
        target: &LoadTarget,
        padding: RowPadding,
    ) -> Result<Converted, ConvertError> {
        let converted: Vec<Result<_, ConvertError>> = self
            .parts
            .par_iter()
            .map(|p| {
                let c = p.checkpoint.to_resident(&p.target, RowPadding::NONE)?;
                let logical = c.layer.to_logical()?;
                Ok((c.notes, logical))
            })
            .collect();
        let mut layers = Vec::with_capacity(self.parts.len());
        let mut notes = Vec::new();
        for c in converted {
            let (n, logical) = c?;
            notes.extend(n);
            layers.push(logical);
        }
        let fused = self.stack(layers)?;
        let mine = self.target();
        if (target.n, target.k, target.dtype) != (mine.n, mine.k, mine.dtype) {
            return Err(ConvertError::Shape {
                tensor: self.parts[0].module.clone(),
                layout: "[N_total, K]",
                expected: vec![target.n, target.k],
                got: vec![mine.n, mine.k],
            });
        }
        Ok(Converted {
            layer: w4a16_reference::formats::ResidentLayer::from_logical(&fused, padding)?,
            notes,
        })
    }

    /// The parts' own readings (in parallel), stacked; the first error in part order is the one
    /// returned.
    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError> {
        let read: Vec<Result<QuantizedLayer, ConvertError>> = self
            .parts
            .par_iter()
            .map(|p| p.checkpoint.decode_own_semantics())
            .collect();
        let layers = read.into_iter().collect::<Result<Vec<_>, _>>()?;
        self.stack(layers)
    }
}
