//! A prepared layer written by one process and read back by another: check-model's parent
//! converts a layer once (with its `convert` checks) and the fault-isolated worker that launches
//! it reads the conversion instead of converting again (docs/check-model.md, "At model scale").
//!
//! The format is private to one run of one binary: a length-prefixed JSON header (the key, the
//! `convert` verdicts, the shapes) and then the raw little-endian arrays, in a fixed order.

use super::prepare::{PreparedHandoff, PreparedKey, PreparedLayer};
use crate::runner::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::sync::{Arc, OnceLock};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{
    PackedZeroPoints, ResidentLayer, ResidentScales, ResidentWeights, UnpackedZeroPoints,
    ZeroPoints,
};
use w4a16_reference::layer::{LayerShape, QuantizedLayer};

/// Why a handed-over layer could not be written or read back.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("a handed-over layer: {0}")]
    Io(#[from] io::Error),
    #[error("a handed-over layer's header: {0}")]
    Header(#[from] serde_json::Error),
    #[error("a handed-over layer's header announces {what} of {len} bytes; expected at most {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: u64,
    },
    /// A MoE layer's handed-over experts that no longer stack (shape, dtype, symmetry).
    #[error("a handed-over MoE layer's experts: {0}")]
    Experts(#[from] w4a16_reference::moe::MoeLayerError),
}

/// Everything but the arrays.
#[derive(Serialize, Deserialize)]
struct Header {
    key: PreparedKey,
    convert_verdicts: Vec<Verdict>,
    shape: LayerShape,
    dtype: ActDtype,
    zeros: bool,
    bias: bool,
    resident: Option<ResidentHeader>,
}

#[derive(Serialize, Deserialize)]
struct ResidentHeader {
    shape: LayerShape,
    dtype: ActDtype,
    weights: (usize, usize, usize),
    scales: (usize, usize, usize, ActDtype),
    zeros: Option<ZerosHeader>,
    bias: bool,
}

#[derive(Serialize, Deserialize)]
enum ZerosHeader {
    Packed {
        n: usize,
        groups: usize,
    },
    Legacy {
        n: usize,
        groups: usize,
        dtype: ActDtype,
    },
}

/// No header is near this long; a longer one means the stream is not a handed-over layer.
const MAX_HEADER: u64 = 1 << 30;
/// Elements converted per write or read of a u16/u32 array.
const CHUNK: usize = 1 << 16;

impl PreparedHandoff {
    /// Writes the layer, its resident form and its `convert` verdicts to `w`.
    pub fn write_to(&self, w: &mut impl Write) -> Result<(), HandoffError> {
        let p: &PreparedLayer = &self.0;
        let header = Header {
            key: p.key.clone(),
            convert_verdicts: p.convert_verdicts.clone(),
            shape: p.layer.shape,
            dtype: p.layer.dtype,
            zeros: p.layer.zeros.is_some(),
            bias: p.layer.bias.is_some(),
            resident: p.resident.as_ref().map(resident_header),
        };
        write_header(w, &header)?;
        let l = &p.layer;
        write_u8(w, &l.q)?;
        if let Some(z) = &l.zeros {
            write_u8(w, z)?;
        }
        write_u16(w, &l.scales)?;
        if let Some(b) = &l.bias {
            write_u16(w, b)?;
        }
        if let Some(r) = &p.resident {
            write_resident_arrays(w, r)?;
        }
        Ok(())
    }

    /// Reads back what [`PreparedHandoff::write_to`] wrote.
    pub fn read_from(r: &mut impl Read) -> Result<PreparedHandoff, HandoffError> {
        let h: Header = read_header(r, "a header", MAX_HEADER)?;
        let (n, k, groups) = (h.shape.n, h.shape.k, h.shape.groups());
        let q = read_u8(r, n * k)?;
        let zeros = h.zeros.then(|| read_u8(r, n * groups)).transpose()?;
        let scales = read_u16(r, n * groups)?;
        let bias = h.bias.then(|| read_u16(r, n)).transpose()?;
        let layer = QuantizedLayer {
            shape: h.shape,
            dtype: h.dtype,
            q,
            zeros,
            scales,
            bias,
        };
        let resident = h.resident.map(|rh| read_resident(r, rh)).transpose()?;
        Ok(PreparedHandoff(Arc::new(PreparedLayer {
            key: h.key,
            layer,
            resident,
            convert_verdicts: h.convert_verdicts,
            weights: OnceLock::new(),
            dense_copy: OnceLock::new(),
            dequant_payload: Default::default(),
        })))
    }
}

fn write_resident_arrays(w: &mut impl Write, r: &ResidentLayer) -> io::Result<()> {
    write_u8(w, &r.weights.bytes)?;
    write_u16(w, &r.scales.bits)?;
    match &r.zeros {
        Some(ZeroPoints::Packed(z)) => write_u32(w, &z.words)?,
        Some(ZeroPoints::UnpackedLegacy(z)) => write_u16(w, &z.bits)?,
        None => {}
    }
    if let Some(b) = &r.bias {
        write_u16(w, b)?;
    }
    Ok(())
}

/// Writes one resident layer alone (its header, then its arrays): a MoE layer's experts are
/// handed over as a count and these.
pub fn write_resident_layer(w: &mut impl Write, r: &ResidentLayer) -> Result<(), HandoffError> {
    write_header(w, &resident_header(r))?;
    Ok(write_resident_arrays(w, r)?)
}

/// A header: its length (u64, little-endian), then its JSON.
pub(crate) fn write_header(
    w: &mut impl Write,
    header: &impl Serialize,
) -> Result<(), HandoffError> {
    let json = serde_json::to_vec(header)?;
    w.write_all(&(json.len() as u64).to_le_bytes())?;
    w.write_all(&json)?;
    Ok(())
}

/// Reads back what [`write_header`] wrote; a length over `max` is refused before reading it.
pub(crate) fn read_header<T: serde::de::DeserializeOwned>(
    r: &mut impl Read,
    what: &'static str,
    max: u64,
) -> Result<T, HandoffError> {
    let mut len = [0u8; 8];
    r.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > max {
        return Err(HandoffError::TooLong { what, len, max });
    }
    let mut json = vec![0u8; len as usize];
    r.read_exact(&mut json)?;
    Ok(serde_json::from_slice(&json)?)
}

/// Reads back what [`write_resident_layer`] wrote.
pub fn read_resident_layer(r: &mut impl Read) -> Result<ResidentLayer, HandoffError> {
    let header: ResidentHeader = read_header(r, "a resident layer's header", MAX_HEADER)?;
    read_resident(r, header)
}

fn resident_header(r: &ResidentLayer) -> ResidentHeader {
    let w = &r.weights;
    let s = &r.scales;
    ResidentHeader {
        shape: r.shape,
        dtype: r.dtype,
        weights: (w.n, w.k, w.row_stride_bytes),
        scales: (s.n, s.groups, s.row_stride, s.dtype),
        zeros: r.zeros.as_ref().map(|z| match z {
            ZeroPoints::Packed(z) => ZerosHeader::Packed {
                n: z.n,
                groups: z.groups,
            },
            ZeroPoints::UnpackedLegacy(z) => ZerosHeader::Legacy {
                n: z.n,
                groups: z.groups,
                dtype: z.dtype,
            },
        }),
        bias: r.bias.is_some(),
    }
}

/// The resident arrays' lengths follow from the header, as [`ResidentLayer`] lays them out.
fn read_resident(r: &mut impl Read, h: ResidentHeader) -> Result<ResidentLayer, HandoffError> {
    let (wn, wk, stride) = h.weights;
    let bytes_len = if wn == 0 {
        0
    } else {
        (wn - 1) * stride + wk / 2
    };
    // The converter may leave the last row padded too: the length is written, not derived.
    let bytes = read_len_u8(r, bytes_len)?;
    let (sn, sg, srs, sdt) = h.scales;
    let bits = read_len_u16(r)?;
    let zeros = match h.zeros {
        Some(ZerosHeader::Packed { n, groups }) => Some(ZeroPoints::Packed(PackedZeroPoints {
            n,
            groups,
            words: read_len_u32(r)?,
        })),
        Some(ZerosHeader::Legacy { n, groups, dtype }) => {
            Some(ZeroPoints::UnpackedLegacy(UnpackedZeroPoints {
                n,
                groups,
                dtype,
                bits: read_len_u16(r)?,
            }))
        }
        None => None,
    };
    let bias = h.bias.then(|| read_len_u16(r)).transpose()?;
    Ok(ResidentLayer {
        shape: h.shape,
        dtype: h.dtype,
        weights: ResidentWeights {
            n: wn,
            k: wk,
            row_stride_bytes: stride,
            bytes,
        },
        scales: ResidentScales {
            n: sn,
            groups: sg,
            row_stride: srs,
            dtype: sdt,
            bits,
        },
        zeros,
        bias,
    })
}

/// Each array is its element count (u64) and its elements, little-endian.
fn write_u8(w: &mut impl Write, v: &[u8]) -> io::Result<()> {
    w.write_all(&(v.len() as u64).to_le_bytes())?;
    w.write_all(v)
}

fn write_u16(w: &mut impl Write, v: &[u16]) -> io::Result<()> {
    w.write_all(&(v.len() as u64).to_le_bytes())?;
    let mut buf = Vec::with_capacity(CHUNK * 2);
    for chunk in v.chunks(CHUNK) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

fn write_u32(w: &mut impl Write, v: &[u32]) -> io::Result<()> {
    w.write_all(&(v.len() as u64).to_le_bytes())?;
    let mut buf = Vec::with_capacity(CHUNK * 4);
    for chunk in v.chunks(CHUNK) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

/// An array's element count, refused above `max` (a stream that is not a handed-over layer
/// must not allocate without bound).
fn read_count(r: &mut impl Read, what: &'static str, max: u64) -> Result<usize, HandoffError> {
    let mut len = [0u8; 8];
    r.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > max {
        return Err(HandoffError::TooLong { what, len, max });
    }
    Ok(len as usize)
}

/// An array of exactly `expected` bytes (its length is the layer's shape).
fn read_u8(r: &mut impl Read, expected: usize) -> Result<Vec<u8>, HandoffError> {
    let len = read_count(r, "a byte array", expected as u64)?;
    let mut v = vec![0u8; len];
    r.read_exact(&mut v)?;
    Ok(v)
}

/// A byte array of at least `min` bytes (a padded layout may be longer).
fn read_len_u8(r: &mut impl Read, min: usize) -> Result<Vec<u8>, HandoffError> {
    let len = read_count(r, "a byte array", MAX_ARRAY)?;
    if len < min {
        let err = io::Error::new(io::ErrorKind::UnexpectedEof, "shorter than its shape");
        return Err(HandoffError::Io(err));
    }
    let mut v = vec![0u8; len];
    r.read_exact(&mut v)?;
    Ok(v)
}

/// No layer's array is near this many elements.
const MAX_ARRAY: u64 = 1 << 40;

fn read_u16(r: &mut impl Read, expected: usize) -> Result<Vec<u16>, HandoffError> {
    let len = read_count(r, "a u16 array", expected as u64)?;
    read_u16_elems(r, len)
}

fn read_len_u16(r: &mut impl Read) -> Result<Vec<u16>, HandoffError> {
    let len = read_count(r, "a u16 array", MAX_ARRAY)?;
    read_u16_elems(r, len)
}

fn read_u16_elems(r: &mut impl Read, len: usize) -> Result<Vec<u16>, HandoffError> {
    let mut out = Vec::with_capacity(len);
    let mut buf = vec![0u8; CHUNK * 2];
    while out.len() < len {
        let take = (len - out.len()).min(CHUNK);
        r.read_exact(&mut buf[..take * 2])?;
        out.extend(
            buf[..take * 2]
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]])),
        );
    }
    Ok(out)
}

fn read_len_u32(r: &mut impl Read) -> Result<Vec<u32>, HandoffError> {
    let len = read_count(r, "a u32 array", MAX_ARRAY)?;
    let mut out = Vec::with_capacity(len);
    let mut buf = vec![0u8; CHUNK * 4];
    while out.len() < len {
        let take = (len - out.len()).min(CHUNK);
        r.read_exact(&mut buf[..take * 4])?;
        out.extend(
            buf[..take * 4]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::verdict::{Check, Outcome};
    use w4a16_kernels::Target;
    use w4a16_reference::data::{self, DataClass, DataSpec};
    use w4a16_reference::formats::{Producer, RowPadding};
    use w4a16_reference::layer::Symmetry;

    /// A padded, biased, asymmetric layer and its `convert` verdict come back equal.
    #[test]
    fn a_prepared_layer_reads_back_as_it_was_written() {
        let spec = DataSpec {
            class: DataClass::Realistic,
            m: 0,
            shape: LayerShape::new(24, 256, 64),
            dtype: ActDtype::Bf16,
            symmetry: Symmetry::Asym,
            with_bias: true,
        };
        let layer = data::generate_layer(7, &spec).expect("a layer");
        let padding = RowPadding {
            weight_extra_bytes: 16,
            scale_extra_elems: 3,
        };
        let resident = ResidentLayer::from_logical(&layer, padding).expect("packs");
        let verdict = Verdict::new("m/l/M=1", Check::Convert(Producer::Awq), Outcome::Pass);
        let written = PreparedHandoff(Arc::new(PreparedLayer {
            key: PreparedKey {
                layer: "m/l".into(),
                spec,
                target: Target::Sm90,
            },
            layer: layer.clone(),
            resident: Some(resident.clone()),
            convert_verdicts: vec![verdict.clone()],
            weights: OnceLock::new(),
            dense_copy: OnceLock::new(),
            dequant_payload: Default::default(),
        }));
        let mut bytes = Vec::new();
        written.write_to(&mut bytes).expect("writes");
        let back = PreparedHandoff::read_from(&mut bytes.as_slice()).expect("reads");
        assert_eq!(back.0.key, written.0.key);
        assert!(back.0.layer == layer, "the logical layer changed");
        assert!(
            back.0.resident == Some(resident),
            "the resident layer changed"
        );
        assert_eq!(back.0.convert_verdicts, vec![verdict]);
        // A stream cut short is an error, not a shorter layer.
        let cut = &bytes[..bytes.len() - 1];
        assert!(PreparedHandoff::read_from(&mut &cut[..]).is_err());
    }
}
