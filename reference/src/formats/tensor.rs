//! Checkpoint tensors as a loader finds them: a name, a shape and typed data. Converters check
//! all three against what the format promises before reading a single value.

use crate::dtype::ActDtype;

crate::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum StoredDtype {
        I32 = "i32",
        /// compressed-tensors' `weight_shape` and other int64 metadata.
        I64 = "i64",
        U32 = "u32",
        F16 = "f16",
        Bf16 = "bf16",
        F32 = "f32",
    }
}

impl StoredDtype {
    /// Bytes per element as stored.
    pub fn size_bytes(self) -> usize {
        match self {
            StoredDtype::F16 | StoredDtype::Bf16 => 2,
            StoredDtype::I32 | StoredDtype::U32 | StoredDtype::F32 => 4,
            StoredDtype::I64 => 8,
        }
    }
}

impl From<ActDtype> for StoredDtype {
    fn from(d: ActDtype) -> Self {
        match d {
            ActDtype::F16 => StoredDtype::F16,
            ActDtype::Bf16 => StoredDtype::Bf16,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    I32(Vec<i32>),
    I64(Vec<i64>),
    U32(Vec<u32>),
    /// Raw bits.
    F16(Vec<u16>),
    /// Raw bits.
    Bf16(Vec<u16>),
    F32(Vec<f32>),
}

impl TensorData {
    pub fn dtype(&self) -> StoredDtype {
        match self {
            TensorData::I32(_) => StoredDtype::I32,
            TensorData::I64(_) => StoredDtype::I64,
            TensorData::U32(_) => StoredDtype::U32,
            TensorData::F16(_) => StoredDtype::F16,
            TensorData::Bf16(_) => StoredDtype::Bf16,
            TensorData::F32(_) => StoredDtype::F32,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            TensorData::I32(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::U32(v) => v.len(),
            TensorData::F16(v) | TensorData::Bf16(v) => v.len(),
            TensorData::F32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Half-precision bits in the given activation dtype.
    pub fn act(dtype: ActDtype, bits: Vec<u16>) -> Self {
        match dtype {
            ActDtype::F16 => TensorData::F16(bits),
            ActDtype::Bf16 => TensorData::Bf16(bits),
        }
    }
}

/// One named tensor of a checkpoint, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: TensorData,
}

impl Tensor {
    pub fn new(name: impl Into<String>, shape: Vec<usize>, data: TensorData) -> Self {
        Tensor {
            name: name.into(),
            shape,
            data,
        }
    }

    /// Packed words as a loader reinterprets them (an i32 tensor's bits are the u32 words).
    pub fn i32_packed(name: impl Into<String>, shape: Vec<usize>, words: Vec<u32>) -> Self {
        Tensor::new(
            name,
            shape,
            TensorData::I32(words.into_iter().map(|w| w as i32).collect()),
        )
    }

    pub fn dtype(&self) -> StoredDtype {
        self.data.dtype()
    }
}

/// Shapes printed the way error messages want them: `[32, 8]`.
pub(crate) fn shape_str(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// compressed-tensors' `weight_shape` is int64; a loader must be able to hand it over as is.
    #[test]
    fn i64_tensors_report_their_dtype_and_length() {
        let t = Tensor::new("weight_shape", vec![2], TensorData::I64(vec![256, 4096]));
        assert_eq!(t.dtype(), StoredDtype::I64);
        assert_eq!(t.dtype().to_string(), "i64");
        assert_eq!(t.data.len(), 2);
    }
}
