//! A hipBLAS stand-in on the emulated runtime: the handful of hipBLAS calls the rocm backend
//! makes (`device/src/hipblas/`), so the dense path (`dequant+dense`) runs through the backend's
//! real hipBLAS binding — its search, symbol table, GEMM ABI choice, handle set-up, status
//! mapping — instead of skipping for want of a library.
//!
//! **Not rocBLAS.** The GEMM is the host BLAS stand-in of the ISA emulator device
//! (`w4a16_reference::blas::host_gemm_ex`, one piece of code for both), computed on the host
//! over the emulated device memory: fp16/bf16 operands, f32 accumulation in `k` order, one
//! rounding per output. Its numerics are that stand-in's and its time on the model clock is its
//! operands' bytes at the declared bandwidth; neither says anything about rocBLAS/Tensile, and
//! the backend names the stand-in in the device name of every report
//! ([`STAND_IN_DESCRIPTION`]).
//!
//! **Semantics** follow hipBLAS over rocBLAS (hipblas.h, rocBLAS's `gemm_ex` argument checks
//! and hipBLAS's status conversion): enum arguments are converted first (an unknown value is
//! `HIPBLAS_STATUS_INVALID_ENUM`), then sizes and leading dimensions are checked
//! (`INVALID_VALUE`), `m == 0 || n == 0` returns at once, null scalars or operands are
//! `INVALID_VALUE`, a known type combination the stand-in does not compute is `NOT_SUPPORTED`,
//! and a dead or null handle is `NOT_INITIALIZED`. An operand reaching outside its device
//! allocation is what it is on a GPU: the call returns success (the work is asynchronous) and
//! the device faults — a sticky `hipErrorIllegalAddress` for the next call that waits, exactly
//! like a kernel's out-of-bounds access on this runtime.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use w4a16_emu::fault::FaultKind;
use w4a16_reference::ActDtype;
use w4a16_reference::blas::{BlasOp, ColumnMajorGemm, host_gemm_ex};

use crate::error::HipError;
use crate::runtime::Runtime;

/// What the library says it is (`w4a16HipBlasStandIn`), for the device name of every report.
pub const STAND_IN_DESCRIPTION: &std::ffi::CStr = c"hipBLAS stand-in on the emulated HIP runtime \
(the ISA emulator device's host GEMM, not rocBLAS: neither its numerics nor its timing)";

/// Why a hipBLAS call failed: the `hipblasStatus_t` (hipblas-common.h) and what a person needs
/// to see in the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlasError {
    /// A null handle, or one hipblasCreate did not return (or that was destroyed); no device.
    #[error("HIPBLAS_STATUS_NOT_INITIALIZED: {0}")]
    NotInitialized(String),
    /// A negative size, a short leading dimension, a null scalar or operand, an unknown stream.
    #[error("HIPBLAS_STATUS_INVALID_VALUE: {0}")]
    InvalidValue(String),
    /// The device already faulted (a sticky error): nothing more runs on it.
    #[error("HIPBLAS_STATUS_EXECUTION_FAILED: {0}")]
    ExecutionFailed(String),
    /// A valid type combination the stand-in does not compute.
    #[error("HIPBLAS_STATUS_NOT_SUPPORTED: {0}")]
    NotSupported(String),
    /// `hipblasCreate(NULL)`.
    #[error("HIPBLAS_STATUS_HANDLE_IS_NULLPTR: {0}")]
    HandleIsNullptr(String),
    /// An enum argument with a value the header does not define.
    #[error("HIPBLAS_STATUS_INVALID_ENUM: {0}")]
    InvalidEnum(String),
}

impl BlasError {
    /// The `hipblasStatus_t` value.
    pub fn code(&self) -> c_int {
        match self {
            BlasError::NotInitialized(_) => 1,
            BlasError::InvalidValue(_) => 3,
            BlasError::ExecutionFailed(_) => 5,
            BlasError::NotSupported(_) => 7,
            BlasError::HandleIsNullptr(_) => 9,
            BlasError::InvalidEnum(_) => 10,
        }
    }
}

pub type BlasResult<T> = Result<T, BlasError>;

/// `hipblasPointerMode_t`: where `alpha` and `beta` live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointerMode {
    Host,
    Device,
}

/// One handle's settings (hipBLAS's defaults: the null stream, host scalars, atomics allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle {
    pub stream: usize,
    pub pointer_mode: PointerMode,
    /// Recorded only: the stand-in is deterministic either way.
    pub atomics_allowed: bool,
}

struct Handles {
    next: usize,
    live: BTreeMap<usize, Handle>,
}

static HANDLES: Mutex<Handles> = Mutex::new(Handles {
    next: 0xb1a5_0000,
    live: BTreeMap::new(),
});

fn handles() -> MutexGuard<'static, Handles> {
    HANDLES.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new handle on the device (`rt`: `None` when the runtime could not start, e.g. a bad
/// `W4A16_HIP_EMU_TARGET`).
pub fn create(device: Result<(), HipError>) -> BlasResult<usize> {
    device.map_err(|e| BlasError::NotInitialized(format!("no device: {e}")))?;
    let mut h = handles();
    h.next += 0x10;
    let raw = h.next;
    h.live.insert(
        raw,
        Handle {
            stream: 0,
            pointer_mode: PointerMode::Host,
            atomics_allowed: true,
        },
    );
    Ok(raw)
}

/// The settings of a live handle.
pub fn handle(raw: usize) -> BlasResult<Handle> {
    if raw == 0 {
        return Err(BlasError::NotInitialized("the handle is null".into()));
    }
    handles().live.get(&raw).copied().ok_or_else(|| {
        BlasError::NotInitialized(format!(
            "handle {raw:#x} was not created by hipblasCreate (or was destroyed)"
        ))
    })
}

fn update(raw: usize, f: impl FnOnce(&mut Handle)) -> BlasResult<()> {
    handle(raw)?;
    if let Some(h) = handles().live.get_mut(&raw) {
        f(h);
    }
    Ok(())
}

pub fn destroy(raw: usize) -> BlasResult<()> {
    handle(raw)?;
    handles().live.remove(&raw);
    Ok(())
}

/// Binds the handle to `stream`, which must be the null stream or a live one of the runtime.
pub fn set_stream(rt: &Runtime, raw: usize, stream: usize) -> BlasResult<()> {
    handle(raw)?;
    rt.stream(stream)
        .map_err(|e| BlasError::InvalidValue(e.to_string()))?;
    update(raw, |h| h.stream = stream)
}

/// `HIPBLAS_POINTER_MODE_HOST` (0) or `_DEVICE` (1).
pub fn set_pointer_mode(raw: usize, mode: c_int) -> BlasResult<()> {
    handle(raw)?;
    let mode = match mode {
        0 => PointerMode::Host,
        1 => PointerMode::Device,
        other => {
            return Err(BlasError::InvalidEnum(format!(
                "hipblasPointerMode_t {other} (0 host, 1 device)"
            )));
        }
    };
    update(raw, |h| h.pointer_mode = mode)
}

/// `HIPBLAS_ATOMICS_NOT_ALLOWED` (0) or `_ALLOWED` (1).
pub fn set_atomics_mode(raw: usize, mode: c_int) -> BlasResult<()> {
    handle(raw)?;
    let allowed = match mode {
        0 => false,
        1 => true,
        other => {
            return Err(BlasError::InvalidEnum(format!(
                "hipblasAtomicsMode_t {other} (0 not allowed, 1 allowed)"
            )));
        }
    };
    update(raw, |h| h.atomics_allowed = allowed)
}

/// Which `hipblasGemmEx` prototype a call came through: `hipblasGemmEx_v2` takes
/// `hipDataType` and `hipblasComputeType_t`; hipBLAS 2.x's plain `hipblasGemmEx` the legacy
/// `hipblasDatatype_t` for both (device/src/hipblas/mod.rs explains the history).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeAbi {
    HipDataType,
    Legacy,
}

/// What a data-type code names: one the stand-in computes, or another valid type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DataType {
    Computed(ActDtype),
    Other(&'static str),
}

impl TypeAbi {
    fn data_type(self, code: c_int) -> BlasResult<DataType> {
        use DataType::{Computed, Other};
        let t = match (self, code) {
            (TypeAbi::HipDataType, 2) | (TypeAbi::Legacy, 150) => Computed(ActDtype::F16),
            (TypeAbi::HipDataType, 14) | (TypeAbi::Legacy, 168) => Computed(ActDtype::Bf16),
            (TypeAbi::HipDataType, 0) | (TypeAbi::Legacy, 151) => Other("fp32"),
            (TypeAbi::HipDataType, 1) | (TypeAbi::Legacy, 152) => Other("fp64"),
            (TypeAbi::HipDataType, 3) | (TypeAbi::Legacy, 160) => Other("int8"),
            (TypeAbi::HipDataType, 8) | (TypeAbi::Legacy, 161) => Other("uint8"),
            (TypeAbi::HipDataType, 10) | (TypeAbi::Legacy, 162) => Other("int32"),
            (TypeAbi::HipDataType, 12) | (TypeAbi::Legacy, 163) => Other("uint32"),
            (TypeAbi::HipDataType, 4..=7 | 9 | 11 | 13 | 15)
            | (TypeAbi::Legacy, 153..=155 | 164..=167 | 169) => Other("complex"),
            (abi, other) => {
                return Err(BlasError::InvalidEnum(format!(
                    "data type {other}: not a {} value",
                    abi.type_name()
                )));
            }
        };
        Ok(t)
    }

    /// Whether `code` is fp32 compute (the only one the stand-in has), or which error.
    fn compute_is_f32(self, code: c_int) -> BlasResult<bool> {
        match (self, code) {
            (TypeAbi::HipDataType, 2) | (TypeAbi::Legacy, 151) => Ok(true),
            // hipblasComputeType_t 0..=10: 16F, 32F and 64F with their pedantic/fast forms, 32I.
            (TypeAbi::HipDataType, 0..=10) => Ok(false),
            (TypeAbi::Legacy, c) if self.data_type(c).is_ok() => Ok(false),
            (abi, other) => Err(BlasError::InvalidEnum(format!(
                "compute type {other}: not a {} value",
                match abi {
                    TypeAbi::HipDataType => "hipblasComputeType_t",
                    TypeAbi::Legacy => "hipblasDatatype_t",
                }
            ))),
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            TypeAbi::HipDataType => "hipDataType",
            TypeAbi::Legacy => "hipblasDatatype_t",
        }
    }
}

/// `hipblasOperation_t`: N (111), T (112), C (113, the transpose for real types).
fn operation(code: c_int, which: &str) -> BlasResult<BlasOp> {
    match code {
        111 => Ok(BlasOp::N),
        112 | 113 => Ok(BlasOp::T),
        other => Err(BlasError::InvalidEnum(format!(
            "{which} = {other}: not a hipblasOperation_t (111 N, 112 T, 113 C)"
        ))),
    }
}

/// The arguments of `hipblasGemmEx[_v2]` as passed, addresses as integers.
#[derive(Clone, Copy, Debug)]
pub struct GemmArgs {
    pub trans_a: c_int,
    pub trans_b: c_int,
    pub m: c_int,
    pub n: c_int,
    pub k: c_int,
    pub alpha: *const c_void,
    pub a: u64,
    pub a_type: c_int,
    pub lda: c_int,
    pub b: u64,
    pub b_type: c_int,
    pub ldb: c_int,
    pub beta: *const c_void,
    pub c: u64,
    pub c_type: c_int,
    pub ldc: c_int,
    pub compute_type: c_int,
    pub algo: c_int,
}

/// `HIPBLAS_GEMM_DEFAULT`, the only `hipblasGemmAlgo_t`.
const GEMM_DEFAULT: c_int = 160;

/// The validated call: the column-major shape and the 16-bit type.
struct Checked {
    call: ColumnMajorGemm,
    dtype: ActDtype,
}

/// The enum conversions and rocBLAS's size checks, in their order; `None`: the quick return of
/// an empty output (`m == 0 || n == 0`).
fn check(g: &GemmArgs, abi: TypeAbi) -> BlasResult<Option<Checked>> {
    let op_a = operation(g.trans_a, "transA")?;
    let op_b = operation(g.trans_b, "transB")?;
    let types = [
        abi.data_type(g.a_type)?,
        abi.data_type(g.b_type)?,
        abi.data_type(g.c_type)?,
    ];
    let f32_compute = abi.compute_is_f32(g.compute_type)?;
    if g.algo != GEMM_DEFAULT {
        return Err(BlasError::InvalidEnum(format!(
            "hipblasGemmAlgo_t {} (160 HIPBLAS_GEMM_DEFAULT)",
            g.algo
        )));
    }
    let rows_a = if op_a == BlasOp::N { g.m } else { g.k };
    let rows_b = if op_b == BlasOp::N { g.k } else { g.n };
    let short = [
        ("lda", g.lda, rows_a),
        ("ldb", g.ldb, rows_b),
        ("ldc", g.ldc, g.m),
    ]
    .into_iter()
    .find(|(_, ld, rows)| ld < rows);
    if g.m < 0 || g.n < 0 || g.k < 0 {
        return Err(BlasError::InvalidValue(format!(
            "m = {}, n = {}, k = {}: negative size",
            g.m, g.n, g.k
        )));
    }
    if let Some((name, ld, rows)) = short {
        return Err(BlasError::InvalidValue(format!(
            "{name} = {ld} is shorter than the {rows} rows it must hold"
        )));
    }
    if g.m == 0 || g.n == 0 {
        return Ok(None);
    }
    if g.alpha.is_null() || g.beta.is_null() {
        return Err(BlasError::InvalidValue("alpha or beta is null".into()));
    }
    let dtype = match (types, f32_compute) {
        (
            [
                DataType::Computed(a),
                DataType::Computed(b),
                DataType::Computed(c),
            ],
            true,
        ) if a == b && b == c => a,
        _ => {
            return Err(BlasError::NotSupported(format!(
                "types (A {:?}, B {:?}, C {:?}) with compute {}: the stand-in computes fp16 or \
                 bf16 operands of one type with fp32 compute only",
                types[0], types[1], types[2], g.compute_type
            )));
        }
    };
    Ok(Some(Checked {
        call: ColumnMajorGemm {
            op_a,
            op_b,
            m: g.m,
            n: g.n,
            k: g.k,
            lda: g.lda,
            ldb: g.ldb,
            ldc: g.ldc,
        },
        dtype,
    }))
}

/// Elements a column-major operand of `rows × cols` with leading dimension `ld` spans.
fn span(rows: i32, cols: i32, ld: i32) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (cols as usize - 1) * ld as usize + rows as usize
    }
}

/// Reads an f32 scalar from the host or (pointer mode device) from device memory.
///
/// # Safety
/// In host mode `p` must point to a readable f32 (hipBLAS's own requirement).
unsafe fn scalar(rt: &Runtime, mode: PointerMode, p: *const c_void) -> Result<f32, FaultKind> {
    match mode {
        // SAFETY: a host f32 (caller).
        PointerMode::Host => Ok(unsafe { p.cast::<f32>().read_unaligned() }),
        PointerMode::Device => {
            let bytes = rt.device_bytes(p as u64, 4)?;
            Ok(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        }
    }
}

fn halves(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// `hipblasGemmEx[_v2]`: `C = alpha·op(A)·op(B) + beta·C` on the handle's stream.
///
/// # Safety
/// In host pointer mode `alpha` and `beta` must each be null or point to a readable f32.
pub unsafe fn gemm(rt: &mut Runtime, raw: usize, g: &GemmArgs, abi: TypeAbi) -> BlasResult<()> {
    let h = handle(raw)?;
    rt.healthy()
        .map_err(|e| BlasError::ExecutionFailed(format!("the device faulted before: {e}")))?;
    rt.stream(h.stream)
        .map_err(|e| BlasError::InvalidValue(format!("the handle's stream is gone: {e}")))?;
    let Some(Checked { call, dtype }) = check(g, abi)? else {
        return Ok(());
    };
    // SAFETY: forwarded from the caller.
    let scalars = unsafe { scalar(rt, h.pointer_mode, g.alpha) }
        .and_then(|a| unsafe { scalar(rt, h.pointer_mode, g.beta) }.map(|b| (a, b)));
    let (alpha, beta) = match scalars {
        Ok(s) => s,
        Err(e) => return fault(rt, format!("hipBLAS stand-in GEMM: a device scalar: {e}")),
    };
    // BLAS rule: A and B are not read when alpha = 0 or k = 0; C is always written.
    let reads_ab = g.k > 0 && alpha != 0.0;
    if (reads_ab && (g.a == 0 || g.b == 0)) || g.c == 0 {
        return Err(BlasError::InvalidValue("A, B or C is null".into()));
    }
    let (rows_a, cols_a) = if call.op_a == BlasOp::N {
        (g.m, g.k)
    } else {
        (g.k, g.m)
    };
    let (rows_b, cols_b) = if call.op_b == BlasOp::N {
        (g.k, g.n)
    } else {
        (g.n, g.k)
    };
    let extents = [
        (
            "A",
            g.a,
            if reads_ab {
                span(rows_a, cols_a, g.lda)
            } else {
                0
            },
        ),
        (
            "B",
            g.b,
            if reads_ab {
                span(rows_b, cols_b, g.ldb)
            } else {
                0
            },
        ),
        ("C", g.c, span(g.m, g.n, g.ldc)),
    ];
    let mut operands = Vec::with_capacity(3);
    for (name, at, elements) in extents {
        let bytes = elements * dtype.size_bytes();
        match rt.device_bytes(at, bytes) {
            Ok(data) => operands.push(halves(&data)),
            Err(e) => return fault(rt, format!("hipBLAS stand-in GEMM: operand {name}: {e}")),
        }
    }
    let mut c = operands.pop().unwrap_or_default();
    let (b, a) = (
        operands.pop().unwrap_or_default(),
        operands.pop().unwrap_or_default(),
    );
    let call = ColumnMajorGemm {
        k: if reads_ab { call.k } else { 0 },
        ..call
    };
    host_gemm_ex(&call, dtype, alpha, beta, &a, &b, &mut c)
        .map_err(|e| BlasError::ExecutionFailed(format!("hipBLAS stand-in GEMM: {e}")))?;
    let out: Vec<u8> = c.iter().flat_map(|v| v.to_le_bytes()).collect();
    rt.write_device_bytes(g.c, &out)
        .map_err(|e| BlasError::ExecutionFailed(e.to_string()))?;
    rt.advance_copy((a.len() + b.len() + 2 * c.len()) * dtype.size_bytes());
    Ok(())
}

/// An access outside device memory: the call itself succeeds (asynchronous, as on a GPU) and
/// the device faults, a sticky `hipErrorIllegalAddress` for the next call that waits.
fn fault(rt: &mut Runtime, what: String) -> BlasResult<()> {
    rt.fault(HipError::IllegalAddress(what));
    Ok(())
}
