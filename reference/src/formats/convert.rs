//! What every converter shares: the typed error, the conversion result with its notes, and the
//! tensor checks a loader makes before it reads any value.

use super::layout::{LayoutError, RowPadding};
use super::nibble::NibbleOrder;
use super::resident::ResidentLayer;
use super::tensor::{StoredDtype, Tensor, TensorData, shape_str};
use crate::dtype::ActDtype;
use crate::layer::{DequantizedWeights, LayerShape, QuantizedLayer, SYMMETRIC_ZERO};
use std::fmt;

/// What the model architecture says the layer is (out_features, in_features, torch dtype); the
/// checkpoint's tensors are checked against it, never trusted to define it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoadTarget {
    pub n: usize,
    pub k: usize,
    pub dtype: ActDtype,
}

/// A checkpoint the converter cannot take. Every variant names the tensor (or setting), what was
/// expected and what it got.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConvertError {
    #[error(
        "{tensor}: expected dtype {expected} with shape {layout} = {}, got {got} {}",
        shape_str(.shape),
        shape_str(.got_shape)
    )]
    Dtype {
        tensor: String,
        layout: &'static str,
        shape: Vec<usize>,
        expected: StoredDtype,
        got: StoredDtype,
        got_shape: Vec<usize>,
    },
    #[error("{tensor}: expected shape {layout} = {}, got {}", shape_str(.expected), shape_str(.got))]
    Shape {
        tensor: String,
        layout: &'static str,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("{tensor}: shape {} holds {expected} elements, got {got}", shape_str(.shape))]
    DataLength {
        tensor: String,
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
    #[error(
        "{tensor}: packs 8 codes per i32 along {dim}, so {dim} must be a multiple of 8; got {dim} = {got}"
    )]
    PackedDim {
        tensor: String,
        dim: &'static str,
        got: usize,
    },
    #[error("group_size: expected a positive divisor of K = {k}, got {got}")]
    Group { k: usize, got: usize },
    #[error("desc_act: act-order (g_idx) checkpoints are not supported; expected false, got true")]
    ActOrder,
    #[error("{tensor}: expected a zero-point tensor for an asymmetric checkpoint, got none")]
    MissingZeroPoints { tensor: &'static str },
    #[error(
        "{tensor}: a symmetric checkpoint may carry zero points only if every z = 8 (they are then ignored); got z = {got} at (n = {n}, g = {g})"
    )]
    SymmetricZeroPoint {
        tensor: String,
        n: usize,
        g: usize,
        got: u8,
    },
    #[error("{tensor}: expected integer zero points 0..=15, got {got} at (n = {n}, g = {g})")]
    ZeroPointValue {
        tensor: String,
        n: usize,
        g: usize,
        got: f64,
    },
    #[error("{tensor}: expected a rank-{rank} tensor {layout}, got shape {}", shape_str(.got))]
    Rank {
        tensor: String,
        layout: &'static str,
        rank: usize,
        got: Vec<usize>,
    },
    #[error("{tensor}: expected the activation dtype (f16 or bf16), got {got}")]
    NotActDtype { tensor: String, got: StoredDtype },
    #[error(
        "{tensor}: N = {n} fills {used} of the 8 nibbles of the last word of each group, so nibbles {used}..=7 must be 0; got {word:#010x} at [{row}, {g}]"
    )]
    UnusedZeroPointNibbles {
        tensor: String,
        n: usize,
        used: usize,
        row: usize,
        g: usize,
        word: u32,
    },
    /// A check-model worker launches the conversion its parent made and handed over; it has no
    /// tensors of its own to convert, so a case that asks for a conversion there is refused.
    #[error(
        "{module}: converted by the check-model parent and handed to its worker, which converts nothing; expected this case to reuse the layer handed over"
    )]
    NotHandedOver { module: String },
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Something a converter accepted but did not take at face value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConversionNote {
    /// A symmetric checkpoint carried zero points, all equal to 8: dropped, the layer stays
    /// symmetric.
    IgnoredSymmetricZeroPoints { tensor: String },
}

impl fmt::Display for ConversionNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConversionNote::IgnoredSymmetricZeroPoints { tensor } => write!(
                f,
                "{tensor}: symmetric checkpoint carries zero points, all equal to 8; ignored"
            ),
        }
    }
}

/// A converted layer with whatever the converter had to note on the way.
#[derive(Clone, Debug, PartialEq)]
pub struct Converted {
    pub layer: ResidentLayer,
    pub notes: Vec<ConversionNote>,
}

/// A checkpoint format that a loader turns into the resident layout.
///
/// `Send + Sync + Debug` so the runner can hold built checkpoints across threads and print them.
pub trait Checkpoint: fmt::Debug + Send + Sync {
    /// Human-readable format name, e.g. `gptq-v1`.
    fn format_name(&self) -> &'static str;
    fn to_resident(
        &self,
        target: &LoadTarget,
        padding: RowPadding,
    ) -> Result<Converted, ConvertError>;
    /// The layer as the format's own reference dequantizer reads these tensors (docs/contract.md §3),
    /// written apart from [`Checkpoint::to_resident`] so that the two readings can disagree.
    /// Shapes come from the tensors alone; see [`super::own`].
    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError>;

    /// The whole dequantized weight `[N, K]`, exact in f64, as the format's own semantics read
    /// the tensors ([`Checkpoint::decode_own_semantics`], then
    /// [`QuantizedLayer::dequantize_all`]): the checkpoint's meaning, independent of the
    /// converter.
    fn dequantize_all(&self) -> Result<DequantizedWeights, ConvertError> {
        self.decode_own_semantics()?
            .dequantize_all()
            .map_err(|e| ConvertError::Layout(e.into()))
    }
}

/// Checks dtype, shape and element count, in that order: the one tensor check every converter
/// and the model-directory loader make before reading a value.
pub fn expect(
    t: &Tensor,
    dtype: StoredDtype,
    layout: &'static str,
    shape: &[usize],
) -> Result<(), ConvertError> {
    if t.dtype() != dtype {
        return Err(ConvertError::Dtype {
            tensor: t.name.clone(),
            layout,
            shape: shape.to_vec(),
            expected: dtype,
            got: t.dtype(),
            got_shape: t.shape.clone(),
        });
    }
    if t.shape != shape {
        return Err(ConvertError::Shape {
            tensor: t.name.clone(),
            layout,
            expected: shape.to_vec(),
            got: t.shape.clone(),
        });
    }
    let expected: usize = shape.iter().product();
    if t.data.len() != expected {
        return Err(ConvertError::DataLength {
            tensor: t.name.clone(),
            shape: shape.to_vec(),
            expected,
            got: t.data.len(),
        });
    }
    Ok(())
}

/// The u32 words of an i32 tensor (call after [`expect`] with `I32`).
pub(crate) fn words(t: &Tensor) -> Vec<u32> {
    match &t.data {
        TensorData::I32(v) => v.iter().map(|&x| x as u32).collect(),
        TensorData::U32(v) => v.clone(),
        _ => Vec::new(),
    }
}

/// The half-precision bits of an activation-dtype tensor (call after [`expect`]).
pub(crate) fn half_bits(t: &Tensor) -> &[u16] {
    match &t.data {
        TensorData::F16(v) | TensorData::Bf16(v) => v,
        _ => &[],
    }
}

pub(crate) fn check_group(k: usize, group: usize) -> Result<(), ConvertError> {
    if group == 0 || !k.is_multiple_of(group) {
        return Err(ConvertError::Group { k, got: group });
    }
    Ok(())
}

pub(crate) fn check_packed_dim(
    tensor: &str,
    dim: &'static str,
    value: usize,
) -> Result<(), ConvertError> {
    if !value.is_multiple_of(8) {
        return Err(ConvertError::PackedDim {
            tensor: tensor.to_string(),
            dim,
            got: value,
        });
    }
    Ok(())
}

/// Optional bias `[N]` in the activation dtype.
pub(crate) fn read_bias(
    bias: Option<&Tensor>,
    target: &LoadTarget,
) -> Result<Option<Vec<u16>>, ConvertError> {
    bias.map(|b| {
        expect(b, target.dtype.into(), "[N]", &[target.n])?;
        Ok(half_bits(b).to_vec())
    })
    .transpose()
}

/// Logical `[N, K/G]` scales as the group-major `[K/G, N]` tensor GPTQ and AWQ store.
pub(crate) fn scales_to_group_major(scales: &[u16], n: usize, groups: usize) -> Vec<u16> {
    (0..groups)
        .flat_map(|g| (0..n).map(move |col| scales[col * groups + g]))
        .collect()
}

/// The inverse of [`scales_to_group_major`].
pub(crate) fn scales_from_group_major(stored: &[u16], n: usize, groups: usize) -> Vec<u16> {
    (0..n)
        .flat_map(|col| (0..groups).map(move |g| stored[g * n + col]))
        .collect()
}

/// `[N, K/G]` zero points packed 8 per word along N into the `[K/G, N/8]` words GPTQ and AWQ
/// store, in their nibble `order`; `stored(n, g)` gives the nibble for row n, group g.
pub(crate) fn pack_zeros_group_major(
    n: usize,
    groups: usize,
    order: NibbleOrder,
    stored: impl Fn(usize, usize) -> u8,
) -> Vec<u32> {
    (0..groups)
        .flat_map(|g| (0..n / 8).map(move |nw| (g, nw)))
        .map(|(g, nw)| order.pack(std::array::from_fn(|c| stored(8 * nw + c, g))))
        .collect()
}

/// The inverse of [`pack_zeros_group_major`]: `[N, K/G]` codes, each nibble through `load`.
pub(crate) fn unpack_zeros_group_major(
    words: &[u32],
    n: usize,
    groups: usize,
    order: NibbleOrder,
    load: impl Fn(u8) -> u8,
) -> Vec<u8> {
    let mut z = vec![0u8; n * groups];
    for g in 0..groups {
        for nw in 0..n / 8 {
            for (c, code) in order
                .unpack(words[g * (n / 8) + nw])
                .into_iter()
                .enumerate()
            {
                z[(8 * nw + c) * groups + g] = load(code);
            }
        }
    }
    z
}

/// A checkpoint's zero points as its converter decoded them, with what its config says.
pub(crate) struct StoredZeros<'a> {
    /// The config declares the layer symmetric.
    pub symmetric: bool,
    /// The format's name for the tensor, and the name it is stored under (when present).
    pub expected_name: &'static str,
    pub stored_name: Option<&'a str>,
    /// Decoded `[N, K/G]` codes, when the checkpoint carries any.
    pub decoded: Option<Vec<u8>>,
}

/// The end every converter shares: the zero points resolved against the config's symmetry,
/// the bias read, and the logical layer (`q` `[N, K]`, `scales` `[N, K/G]`) laid out resident.
pub(crate) fn assemble(
    target: &LoadTarget,
    group: usize,
    q: Vec<u8>,
    scales: Vec<u16>,
    zeros: StoredZeros<'_>,
    bias: Option<&Tensor>,
    padding: RowPadding,
) -> Result<Converted, ConvertError> {
    let mut notes = Vec::new();
    let zeros = resolve_zeros(
        zeros.symmetric,
        zeros.expected_name,
        zeros.stored_name,
        zeros.decoded,
        target.k / group,
        &mut notes,
    )?;
    let logical = QuantizedLayer {
        shape: LayerShape::new(target.n, target.k, group),
        dtype: target.dtype,
        q,
        zeros,
        scales,
        bias: read_bias(bias, target)?,
    };
    Ok(Converted {
        layer: ResidentLayer::from_logical(&logical, padding)?,
        notes,
    })
}

/// Applies the symmetry of the checkpoint's config to the decoded `[N, K/G]` zero points.
///
/// Symmetric with zero points: accepted only if every z is 8, then dropped with a note (a
/// misread z would shift every weight of its group silently). Asymmetric without: refused.
pub(crate) fn resolve_zeros(
    symmetric: bool,
    expected_name: &'static str,
    stored_name: Option<&str>,
    zeros: Option<Vec<u8>>,
    groups: usize,
    notes: &mut Vec<ConversionNote>,
) -> Result<Option<Vec<u8>>, ConvertError> {
    match (symmetric, zeros) {
        (true, None) => Ok(None),
        (true, Some(z)) => {
            let name = stored_name.unwrap_or(expected_name).to_string();
            if let Some(i) = z.iter().position(|&v| v != SYMMETRIC_ZERO) {
                return Err(ConvertError::SymmetricZeroPoint {
                    tensor: name,
                    n: i / groups.max(1),
                    g: i % groups.max(1),
                    got: z[i],
                });
            }
            notes.push(ConversionNote::IgnoredSymmetricZeroPoints { tensor: name });
            Ok(None)
        }
        (false, Some(z)) => Ok(Some(z)),
        (false, None) => Err(ConvertError::MissingZeroPoints {
            tensor: expected_name,
        }),
    }
}
