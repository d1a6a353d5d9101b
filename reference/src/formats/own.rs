//! Each producer's own reading of its checkpoint, written per element from docs/contract.md §3's table and
//! the formats' reference dequantizers (AutoGPTQ, AutoAWQ, compressed-tensors), not from the
//! converters. The runner compares "checkpoint → converter → resident" against this reading;
//! only the sequential nibble primitive and the tensor checks are shared with the converters.
//!
//! Shapes are taken from the checkpoint's tensors, never from a load target. Zero points: a
//! symmetric checkpoint whose stored z are all 8 reads as symmetric; any other stored z is
//! applied, as those dequantizers do (the converters refuse such a checkpoint instead).

use super::awq::AwqLayer;
use super::compressed::CompressedTensorsLayer;
use super::convert::{
    ConvertError, LoadTarget, check_group, check_packed_dim, expect, half_bits, read_bias, words,
};
use super::gptq::{GptqLayer, GptqVersion};
use super::legacy::LegacyLayer;
use super::nibble::NibbleOrder;
use super::tensor::{StoredDtype, Tensor};
use crate::dtype::ActDtype;
use crate::layer::{LayerShape, QuantizedLayer};
use rayon::prelude::*;

/// AutoAWQ's `AWQ_REVERSE_ORDER`: within each 8 columns, column `j` sits in bit slot
/// `AWQ_REVERSE_ORDER[j]`. Kept as AutoAWQ writes it, not derived from [`super::AWQ_ORDER`].
pub const AWQ_REVERSE_ORDER: [usize; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// The 4-bit code in bit slot `slot` (bits `4·slot`), as every format's unpacker extracts it.
fn nibble(word: u32, slot: usize) -> u8 {
    ((word >> NibbleOrder::Sequential.shift(slot)) & 0xF) as u8
}

fn dims(t: &Tensor, layout: &'static str) -> Result<(usize, usize), ConvertError> {
    match t.shape[..] {
        [a, b] => Ok((a, b)),
        _ => Err(ConvertError::Rank {
            tensor: t.name.clone(),
            layout,
            rank: 2,
            got: t.shape.clone(),
        }),
    }
}

fn act_dtype(t: &Tensor) -> Result<ActDtype, ConvertError> {
    match t.dtype() {
        StoredDtype::F16 => Ok(ActDtype::F16),
        StoredDtype::Bf16 => Ok(ActDtype::Bf16),
        got => Err(ConvertError::NotActDtype {
            tensor: t.name.clone(),
            got,
        }),
    }
}

/// An `[N/8, ·]`-style packed-along-N zero-point tensor needs N % 8 == 0 before its shape can
/// even be stated.
fn packed_zeros(
    t: &Tensor,
    n: usize,
    layout: &'static str,
    shape: &[usize],
) -> Result<Vec<u32>, ConvertError> {
    check_packed_dim(&t.name, "N", n)?;
    expect(t, StoredDtype::I32, layout, shape)?;
    Ok(words(t))
}

fn symmetry(
    symmetric: bool,
    tensor: &'static str,
    zeros: Option<Vec<u8>>,
) -> Result<Option<Vec<u8>>, ConvertError> {
    match zeros {
        None if symmetric => Ok(None),
        None => Err(ConvertError::MissingZeroPoints { tensor }),
        Some(z) if symmetric && z.iter().all(|&v| v == 8) => Ok(None),
        Some(z) => Ok(Some(z)),
    }
}

struct Read {
    n: usize,
    k: usize,
    group: usize,
    dtype: ActDtype,
}

impl Read {
    fn groups(&self) -> usize {
        self.k / self.group
    }

    /// `[N, K]` codes from `code(n, k)`, rows in parallel (no division per element: every
    /// layer's conversion reads all N·K codes, 235 M of them in a 70B-class MLP projection).
    fn codes(&self, code: impl Fn(usize, usize) -> u8 + Sync) -> Vec<u8> {
        let mut q = vec![0u8; self.n * self.k];
        if self.k > 0 {
            q.par_chunks_mut(self.k).enumerate().for_each(|(n, row)| {
                for (k, c) in row.iter_mut().enumerate() {
                    *c = code(n, k);
                }
            });
        }
        q
    }

    /// `[N, K/G]` entries from `at(n, g)`, rows in parallel.
    fn per_group<T: Send>(&self, at: impl Fn(usize, usize) -> T + Sync) -> Vec<T> {
        let groups = self.groups();
        (0..self.n)
            .into_par_iter()
            .flat_map_iter(|n| (0..groups).map(move |g| (n, g)))
            .map(|(n, g)| at(n, g))
            .collect()
    }

    fn finish(
        self,
        q: Vec<u8>,
        zeros: Option<Vec<u8>>,
        scales: Vec<u16>,
        bias: Option<&Tensor>,
    ) -> Result<QuantizedLayer, ConvertError> {
        let target = LoadTarget {
            n: self.n,
            k: self.k,
            dtype: self.dtype,
        };
        Ok(QuantizedLayer {
            shape: LayerShape::new(self.n, self.k, self.group),
            dtype: self.dtype,
            q,
            zeros,
            scales,
            bias: read_bias(bias, &target)?,
        })
    }
}

/// AutoGPTQ: `qweight[k/8, n]` nibble `k%8`, `scales[k/G, n]`, `qzeros[k/G, n/8]` nibble `n%8`,
/// v1 applying `(stored + 1) & 15`.
pub fn gptq(c: &GptqLayer) -> Result<QuantizedLayer, ConvertError> {
    if c.config.desc_act {
        return Err(ConvertError::ActOrder);
    }
    let (k8, n) = dims(&c.qweight, "[K/8, N]")?;
    let k = 8 * k8;
    let group = c.config.group_size;
    check_group(k, group)?;
    let r = Read {
        n,
        k,
        group,
        dtype: act_dtype(&c.scales)?,
    };
    let groups = r.groups();
    expect(&c.qweight, StoredDtype::I32, "[K/8, N]", &[k8, n])?;
    expect(&c.scales, r.dtype.into(), "[K/G, N]", &[groups, n])?;
    let qw = words(&c.qweight);
    let s = half_bits(&c.scales);
    let q = r.codes(|col, kk| nibble(qw[kk / 8 * n + col], kk % 8));
    let scales = r.per_group(|col, g| s[g * n + col]);
    let zeros = match &c.qzeros {
        None => None,
        Some(t) => {
            let qz = packed_zeros(t, n, "[K/G, N/8]", &[groups, n / 8])?;
            Some(r.per_group(|col, g| {
                let stored = nibble(qz[g * (n / 8) + col / 8], col % 8);
                match c.config.version {
                    GptqVersion::V1 => (stored + 1) & 15,
                    GptqVersion::V2 => stored,
                }
            }))
        }
    };
    let zeros = symmetry(c.config.sym, "qzeros", zeros)?;
    r.finish(q, zeros, scales, c.bias.as_ref())
}

/// AutoAWQ: `qweight[k, n/8]` and `qzeros[k/G, n/8]` with column `n` in slot
/// `AWQ_REVERSE_ORDER[n%8]`, `scales[k/G, n]`.
pub fn awq(c: &AwqLayer) -> Result<QuantizedLayer, ConvertError> {
    let (k, n8) = dims(&c.qweight, "[K, N/8]")?;
    let n = 8 * n8;
    let group = c.config.group_size;
    check_group(k, group)?;
    let r = Read {
        n,
        k,
        group,
        dtype: act_dtype(&c.scales)?,
    };
    let groups = r.groups();
    expect(&c.qweight, StoredDtype::I32, "[K, N/8]", &[k, n8])?;
    expect(&c.scales, r.dtype.into(), "[K/G, N]", &[groups, n])?;
    let qw = words(&c.qweight);
    let s = half_bits(&c.scales);
    let q = r.codes(|col, kk| nibble(qw[kk * n8 + col / 8], AWQ_REVERSE_ORDER[col % 8]));
    let scales = r.per_group(|col, g| s[g * n + col]);
    let zeros = match &c.qzeros {
        None => None,
        Some(t) => {
            let qz = packed_zeros(t, n, "[K/G, N/8]", &[groups, n8])?;
            Some(r.per_group(|col, g| nibble(qz[g * n8 + col / 8], AWQ_REVERSE_ORDER[col % 8])))
        }
    };
    let zeros = symmetry(!c.config.zero_point, "qzeros", zeros)?;
    r.finish(q, zeros, scales, c.bias.as_ref())
}

/// compressed-tensors weights and scales, shared by the legacy layout: `weight_packed[n, k/8]`
/// nibble `k%8`, `weight_scale[n, k/G]`.
fn ct_codes_and_scales(
    weight_packed: &Tensor,
    weight_scale: &Tensor,
    group: usize,
) -> Result<(Read, Vec<u8>, Vec<u16>), ConvertError> {
    let (n, k8) = dims(weight_packed, "[N, K/8]")?;
    let k = 8 * k8;
    check_group(k, group)?;
    let r = Read {
        n,
        k,
        group,
        dtype: act_dtype(weight_scale)?,
    };
    expect(weight_packed, StoredDtype::I32, "[N, K/8]", &[n, k8])?;
    expect(weight_scale, r.dtype.into(), "[N, K/G]", &[n, r.groups()])?;
    // `[N, K/8]` words, eight codes each in order: the rows' codes are the words' in turn.
    let q = NibbleOrder::Sequential.unpack_run(&words(weight_packed));
    Ok((r, q, half_bits(weight_scale).to_vec()))
}

/// compressed-tensors `pack-quantized`: zero points `[ceil(n/8), k/G]`, row `n` at nibble `n%8`.
/// As the library's `unpack_from_int32` does, the rows past N of a partial last word are
/// unpacked and dropped, never read (the converter refuses nonzero ones instead).
pub fn compressed_tensors(c: &CompressedTensorsLayer) -> Result<QuantizedLayer, ConvertError> {
    let (r, q, scales) =
        ct_codes_and_scales(&c.weight_packed, &c.weight_scale, c.config.group_size)?;
    let groups = r.groups();
    let zeros = match &c.weight_zero_point {
        None => None,
        Some(t) => {
            let layout = if r.n.is_multiple_of(8) {
                "[N/8, K/G]"
            } else {
                "[ceil(N/8), K/G]"
            };
            expect(t, StoredDtype::I32, layout, &[r.n.div_ceil(8), groups])?;
            let zp = words(t);
            Some(r.per_group(|col, g| nibble(zp[col / 8 * groups + g], col % 8)))
        }
    };
    let zeros = symmetry(c.config.symmetric, "weight_zero_point", zeros)?;
    r.finish(q, zeros, scales, c.bias.as_ref())
}

/// Legacy: zero points `[n, k/G]` as activation-dtype values, which must be integers 0..=15 to
/// be codes at all.
pub fn legacy(c: &LegacyLayer) -> Result<QuantizedLayer, ConvertError> {
    let (r, q, scales) =
        ct_codes_and_scales(&c.weight_packed, &c.weight_scale, c.config.group_size)?;
    let groups = r.groups();
    let zeros = match &c.weight_zero_point {
        None => None,
        Some(t) => {
            expect(t, r.dtype.into(), "[N, K/G]", &[r.n, groups])?;
            let bits = half_bits(t);
            let codes = r.per_group(|n, g| {
                let v = r.dtype.to_f64(bits[n * groups + g]);
                if (0.0..=15.0).contains(&v) && v.fract() == 0.0 {
                    Ok(v as u8)
                } else {
                    Err(ConvertError::ZeroPointValue {
                        tensor: t.name.clone(),
                        n,
                        g,
                        got: v,
                    })
                }
            });
            let codes = codes.into_iter().collect::<Result<Vec<u8>, _>>()?;
            Some(codes)
        }
    };
    let zeros = symmetry(c.config.symmetric, "weight_zero_point", zeros)?;
    r.finish(q, zeros, scales, c.bias.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::AWQ_ORDER;

    /// The two statements of the interleave (ours and AutoAWQ's) are inverse permutations.
    #[test]
    fn reverse_order_inverts_the_pack_order() {
        for (slot, &col) in AWQ_ORDER.iter().enumerate() {
            assert_eq!(AWQ_REVERSE_ORDER[col], slot);
        }
    }
}
