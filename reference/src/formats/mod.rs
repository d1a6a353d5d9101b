//! Checkpoint formats going in (docs/contract.md §3) and the resident layout every kernel reads (docs/contract.md §2).

pub mod awq;
pub mod carrier;
pub mod compressed;
pub mod convert;
pub mod exllama;
pub mod gptq;
pub mod layout;
pub mod legacy;
pub mod nibble;
pub mod own;
pub mod producer;
pub mod resident;
pub mod tensor;

pub use awq::{AwqConfig, AwqLayer};
pub use carrier::{BiasEvaluation, Carrier, CarrierError};
pub use compressed::{CompressedTensorsConfig, CompressedTensorsLayer};
pub use convert::{
    Checkpoint, ConversionNote, ConvertError, Converted, LoadTarget, expect as expect_tensor,
};
pub use exllama::{pack_exllama_row, pack_zero_points, unpack_exllama_row, unpack_zero_points};
pub use gptq::{GptqConfig, GptqLayer, GptqVersion};
pub use layout::{
    LayerError, LayoutError, PaddingRule, RowPadding, dense_row_stride_elems,
    packed_zero_point_formula, packed_zero_point_rows, validate_logical, weight_row_stride_bytes,
};
pub use legacy::{LegacyConfig, LegacyLayer};
pub use nibble::{AWQ_ORDER, EXLLAMA_SHIFTS, NibbleOrder};
pub use producer::Producer;
pub use resident::{
    PackedZeroPoints, ResidentLayer, ResidentScales, ResidentWeights, UnpackedZeroPoints,
    ZeroPoints,
};
pub use tensor::{StoredDtype, Tensor, TensorData};
