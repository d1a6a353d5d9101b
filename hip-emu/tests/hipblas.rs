//! The hipBLAS stand-in (`src/blas.rs`, `src/hipblas.rs`): its GEMM against an independent
//! product, each ABI, each misuse with the status the rocm backend's binding receives (read
//! through the backend's own `hipblas::Status`), and an operand outside its allocation faulting
//! the device as a kernel's out-of-bounds access does.
//!
//! The C functions run on the process's one device and must not fault it; the fault tests call
//! `blas::gemm` on a fresh `Runtime` of their own.

use std::ffi::{CStr, c_int, c_void};
use std::ptr::{null, null_mut};

use w4a16_device::hipblas::{Status, StatusMeaning};
use w4a16_device::{FaultClass, hipblas::abi};
use w4a16_emu::machine::Machine;
use w4a16_hip_emu::blas::{self, GemmArgs, TypeAbi};
use w4a16_hip_emu::error::HipError;
use w4a16_hip_emu::hipblas::*;
use w4a16_hip_emu::runtime::{self, Runtime};
use w4a16_hip_emu::*;
use w4a16_reference::ActDtype;

const N: c_int = abi::HIPBLAS_OP_N;
const T: c_int = abi::HIPBLAS_OP_T;

fn status(rc: c_int) -> Status {
    Status::from_raw(rc)
}

/// A small GEMM's operands: `op(A) = Aᵀ` with A stored `k × m` (lda = k + 3), B `k × n`
/// (ldb = k + 1), C `m × n` (ldc = m + 2) holding a prior value; small integers, exact in both
/// dtypes and in f32.
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

fn problem() -> Problem {
    let (m, n, k) = (5, 3, 7);
    let (lda, ldb, ldc) = (k + 3, k + 1, m + 2);
    let a = (0..lda * m).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let b = (0..ldb * n).map(|i| ((i * 5) % 9) as f32 - 4.0).collect();
    let c = (0..ldc * n).map(|i| (i % 4) as f32).collect();
    Problem {
        m,
        n,
        k,
        lda,
        ldb,
        ldc,
        a,
        b,
        c,
    }
}

impl Problem {
    /// `alpha·Aᵀ·B + beta·C` written out here, independently of the stand-in; padding of C kept.
    fn expected(&self, alpha: f32, beta: f32) -> Vec<f32> {
        let mut out = self.c.clone();
        for j in 0..self.n {
            for i in 0..self.m {
                let dot: f32 = (0..self.k)
                    .map(|p| self.a[p + i * self.lda] * self.b[p + j * self.ldb])
                    .sum();
                out[i + j * self.ldc] = alpha * dot + beta * self.c[i + j * self.ldc];
            }
        }
        out
    }
}

fn bits(dtype: ActDtype, v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| dtype.from_f32(*x).to_le_bytes())
        .collect()
}

fn values(dtype: ActDtype, bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|c| dtype.to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

/// Device copies of A, B, C on the process's device (through the exported HIP calls).
fn upload(data: &[u8]) -> *mut c_void {
    let mut p = null_mut();
    // SAFETY: out-parameter; `data` is a host range of its length.
    unsafe {
        assert_eq!(hipMalloc(&mut p, data.len()), 0);
        assert_eq!(hipMemcpy(p, data.as_ptr().cast(), data.len(), 1), 0);
    }
    p
}

fn download(p: *const c_void, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is a host range of `len` bytes.
    assert_eq!(unsafe { hipMemcpy(out.as_mut_ptr().cast(), p, len, 2) }, 0);
    out
}

fn handle() -> hipblasHandle_t {
    let mut h = null_mut();
    // SAFETY: out-parameter.
    assert_eq!(unsafe { hipblasCreate(&mut h) }, 0);
    h
}

/// `hipblasGemmEx_v2` with C's type and the compute type given; everything else valid.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_v2(
    h: hipblasHandle_t,
    p: &Problem,
    (ta, tb): (c_int, c_int),
    (a, b, c): (*const c_void, *const c_void, *mut c_void),
    types: (c_int, c_int, c_int),
    compute: c_int,
    alpha: *const f32,
    beta: *const f32,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        hipblasGemmEx_v2(
            h,
            ta,
            tb,
            p.m as c_int,
            p.n as c_int,
            p.k as c_int,
            alpha.cast(),
            a,
            types.0,
            p.lda as c_int,
            b,
            types.1,
            p.ldb as c_int,
            beta.cast(),
            c,
            types.2,
            p.ldc as c_int,
            compute,
            abi::HIPBLAS_GEMM_DEFAULT,
        )
    }
}

/// Through each exported GEMM name with the backend's own type codes (`GemmAbi::types`): the
/// product written out independently, bit for bit, C's padding untouched, in both dtypes.
#[test]
fn the_gemm_computes_alpha_op_a_op_b_plus_beta_c_through_both_abis() {
    let p = problem();
    let h = handle();
    let (alpha, beta) = (1.0f32, 2.0f32);
    for dtype in [ActDtype::F16, ActDtype::Bf16] {
        for abi_ in [
            w4a16_device::hipblas::GemmAbi::HipDataType,
            w4a16_device::hipblas::GemmAbi::Legacy,
        ] {
            let t = abi_.types(dtype);
            let (a, b, c) = (
                upload(&bits(dtype, &p.a)),
                upload(&bits(dtype, &p.b)),
                upload(&bits(dtype, &p.c)),
            );
            let f = match abi_ {
                w4a16_device::hipblas::GemmAbi::HipDataType => hipblasGemmEx_v2,
                w4a16_device::hipblas::GemmAbi::Legacy => hipblasGemmEx,
            };
            // SAFETY: device operands of the problem's extents; host scalars.
            let rc = unsafe {
                f(
                    h,
                    T,
                    N,
                    p.m as c_int,
                    p.n as c_int,
                    p.k as c_int,
                    (&alpha as *const f32).cast(),
                    a,
                    t.data,
                    p.lda as c_int,
                    b,
                    t.data,
                    p.ldb as c_int,
                    (&beta as *const f32).cast(),
                    c,
                    t.data,
                    p.ldc as c_int,
                    t.compute,
                    abi::HIPBLAS_GEMM_DEFAULT,
                )
            };
            assert_eq!(status(rc), Status::Success, "{dtype:?} {abi_:?}");
            let got = values(dtype, &download(c, p.c.len() * 2));
            assert_eq!(got, p.expected(alpha, beta), "{dtype:?} {abi_:?}");
            for ptr in [a, b, c] {
                assert_eq!(hipFree(ptr), 0);
            }
        }
    }
    assert_eq!(hipblasDestroy(h), 0);
}

/// Handles: creation into a null pointer, calls on a null or destroyed handle, bad enum
/// values and an unknown stream, each with its hipBLAS status and the backend's meaning.
#[test]
fn handle_misuse_gets_hipblas_statuses() {
    // SAFETY: a null out-parameter is refused before anything is written.
    assert_eq!(
        status(unsafe { hipblasCreate(null_mut()) }),
        Status::HandleIsNullptr
    );
    let no_device = blas::create(Err(HipError::NoDevice(
        "W4A16_HIP_EMU_TARGET=gfx90a".into(),
    )));
    assert_eq!(
        no_device.map_err(|e| status(e.code())),
        Err(Status::NotInitialized),
        "hipblasCreate without a device"
    );
    let h = handle();
    assert_eq!(status(hipblasSetPointerMode(h, 7)), Status::InvalidEnum);
    assert_eq!(status(hipblasSetAtomicsMode(h, -1)), Status::InvalidEnum);
    assert_eq!(
        Status::InvalidEnum.meaning(),
        StatusMeaning::Fault(FaultClass::Launch),
        "a refusal, the context usable"
    );
    let stream = 0x1234 as hipStream_t;
    assert_eq!(status(hipblasSetStream(h, stream)), Status::InvalidValue);
    let mut live = null_mut();
    // SAFETY: out-parameter.
    assert_eq!(unsafe { hipStreamCreate(&mut live) }, 0);
    assert_eq!(status(hipblasSetStream(h, live)), Status::Success);
    assert_eq!(status(hipblasSetPointerMode(h, 0)), Status::Success);
    assert_eq!(status(hipblasSetAtomicsMode(h, 0)), Status::Success);
    assert_eq!(hipStreamDestroy(live), 0);
    let p = problem();
    let one = 1.0f32;
    let c = upload(&vec![0u8; p.c.len() * 2]);
    let f16 = (abi::HIP_R_16F, abi::HIP_R_16F, abi::HIP_R_16F);
    // SAFETY: the stream check refuses the call before any operand is touched.
    let rc = unsafe { gemm_v2(h, &p, (T, N), (c, c, c), f16, 2, &one, &one) };
    assert_eq!(
        status(rc),
        Status::InvalidValue,
        "the handle's stream was destroyed"
    );
    assert_eq!(hipblasDestroy(h), 0);
    for dead in [null_mut(), h] {
        assert_eq!(status(hipblasDestroy(dead)), Status::NotInitialized);
        assert_eq!(
            status(hipblasSetStream(dead, null_mut())),
            Status::NotInitialized
        );
        assert_eq!(
            status(hipblasSetPointerMode(dead, 0)),
            Status::NotInitialized
        );
        assert_eq!(
            status(hipblasSetAtomicsMode(dead, 0)),
            Status::NotInitialized
        );
        // SAFETY: refused on the handle before anything is read.
        let rc = unsafe { gemm_v2(dead, &p, (T, N), (c, c, c), f16, 2, &one, &one) };
        assert_eq!(status(rc), Status::NotInitialized);
    }
    assert_eq!(hipFree(c), 0);
    // SAFETY: a static NUL-terminated string.
    let stand_in = unsafe { CStr::from_ptr(w4a16HipBlasStandIn()) };
    assert!(
        stand_in.to_str().unwrap().contains("stand-in")
            && stand_in.to_str().unwrap().contains("not rocBLAS"),
        "{stand_in:?}"
    );
}

/// GEMM arguments hipBLAS refuses: unknown enums (INVALID_ENUM), null scalars and operands
/// (INVALID_VALUE; A and B may be null when alpha = 0), valid types the stand-in does not
/// compute (NOT_SUPPORTED, the backend's skip).
#[test]
fn gemm_misuse_gets_hipblas_statuses() {
    let h = handle();
    let p = problem();
    let (a, b, c) = (
        upload(&vec![0u8; p.a.len() * 2]),
        upload(&vec![0u8; p.b.len() * 2]),
        upload(&vec![0u8; p.c.len() * 2]),
    );
    let ops = (a as *const c_void, b as *const c_void, c);
    let one = 1.0f32;
    let f16 = (abi::HIP_R_16F, abi::HIP_R_16F, abi::HIP_R_16F);
    let f32c = abi::HIPBLAS_COMPUTE_32F;
    // SAFETY (every call below): device operands of the problem's extents, host scalars.
    let call = |trans, ops, types, compute, alpha: *const f32, beta: *const f32| unsafe {
        status(gemm_v2(h, &p, trans, ops, types, compute, alpha, beta))
    };
    assert_eq!(call((T, N), ops, f16, f32c, &one, &one), Status::Success);
    assert_eq!(
        call((114, N), ops, f16, f32c, &one, &one),
        Status::InvalidEnum
    );
    assert_eq!(
        call((T, 0), ops, f16, f32c, &one, &one),
        Status::InvalidEnum
    );
    assert_eq!(
        call((T, N), ops, (99, 2, 2), f32c, &one, &one),
        Status::InvalidEnum
    );
    assert_eq!(call((T, N), ops, f16, 42, &one, &one), Status::InvalidEnum);
    assert_eq!(
        call((T, N), ops, f16, f32c, null(), &one),
        Status::InvalidValue
    );
    assert_eq!(
        call((T, N), ops, f16, f32c, &one, null()),
        Status::InvalidValue
    );
    assert_eq!(
        call((T, N), (null(), ops.1, ops.2), f16, f32c, &one, &one),
        Status::InvalidValue
    );
    assert_eq!(
        call((T, N), (ops.0, ops.1, null_mut()), f16, f32c, &one, &one),
        Status::InvalidValue
    );
    // With alpha = 0, A and B are not read: null is allowed there.
    let zero = 0.0f32;
    assert_eq!(
        call((T, N), (null(), null(), ops.2), f16, f32c, &zero, &one),
        Status::Success
    );
    let fp32 = (abi::HIP_R_32F, abi::HIP_R_32F, abi::HIP_R_32F);
    assert_eq!(
        call((T, N), ops, fp32, f32c, &one, &one),
        Status::NotSupported
    );
    let mixed = (abi::HIP_R_16F, abi::HIP_R_16BF, abi::HIP_R_16F);
    assert_eq!(
        call((T, N), ops, mixed, f32c, &one, &one),
        Status::NotSupported
    );
    assert_eq!(
        call((T, N), ops, f16, 0, &one, &one),
        Status::NotSupported,
        "16F compute"
    );
    assert_eq!(
        Status::NotSupported.meaning(),
        StatusMeaning::Unsupported,
        "the backend's skip"
    );
    for ptr in [a, b, c] {
        assert_eq!(hipFree(ptr), 0);
    }
    assert_eq!(hipblasDestroy(h), 0);
}

/// Sizes and leading dimensions rocBLAS refuses (INVALID_VALUE), the quick return of an empty
/// output, and an unknown algorithm (INVALID_ENUM).
#[test]
fn bad_sizes_and_algorithms_get_hipblas_statuses() {
    let h = handle();
    let p = problem();
    let (a, b, c) = (
        upload(&vec![0u8; p.a.len() * 2]),
        upload(&vec![0u8; p.b.len() * 2]),
        upload(&vec![0u8; p.c.len() * 2]),
    );
    let one = 1.0f32;
    let f32c = abi::HIPBLAS_COMPUTE_32F;
    let sized = |m: c_int, n: c_int, k: c_int, lda: c_int, ldb: c_int, ldc: c_int, ta| {
        // SAFETY: refused or empty before any operand is read.
        status(unsafe {
            hipblasGemmEx_v2(
                h,
                ta,
                N,
                m,
                n,
                k,
                (&one as *const f32).cast(),
                a,
                abi::HIP_R_16F,
                lda,
                b,
                abi::HIP_R_16F,
                ldb,
                (&one as *const f32).cast(),
                c,
                abi::HIP_R_16F,
                ldc,
                f32c,
                abi::HIPBLAS_GEMM_DEFAULT,
            )
        })
    };
    assert_eq!(sized(-1, 3, 7, 10, 8, 7, T), Status::InvalidValue, "m < 0");
    assert_eq!(sized(5, 3, -7, 10, 8, 7, T), Status::InvalidValue, "k < 0");
    assert_eq!(
        sized(5, 3, 7, 6, 8, 7, T),
        Status::InvalidValue,
        "lda < k (A transposed)"
    );
    assert_eq!(
        sized(5, 3, 7, 4, 8, 7, N),
        Status::InvalidValue,
        "lda < m (A as stored)"
    );
    assert_eq!(sized(5, 3, 7, 10, 6, 7, T), Status::InvalidValue, "ldb < k");
    assert_eq!(sized(5, 3, 7, 10, 8, 4, T), Status::InvalidValue, "ldc < m");
    assert_eq!(
        sized(0, 3, 7, 10, 8, 7, T),
        Status::Success,
        "m = 0 returns at once"
    );
    // SAFETY: the algorithm is refused before any operand is read.
    let rc = unsafe {
        hipblasGemmEx_v2(
            h,
            T,
            N,
            5,
            3,
            7,
            (&one as *const f32).cast(),
            a,
            abi::HIP_R_16F,
            10,
            b,
            abi::HIP_R_16F,
            8,
            (&one as *const f32).cast(),
            c,
            abi::HIP_R_16F,
            7,
            f32c,
            99,
        )
    };
    assert_eq!(
        status(rc),
        Status::InvalidEnum,
        "an unknown hipblasGemmAlgo_t"
    );
    for ptr in [a, b, c] {
        assert_eq!(hipFree(ptr), 0);
    }
    assert_eq!(hipblasDestroy(h), 0);
}

/// A fresh device of its own (faulting the process's would spoil the other tests).
fn device() -> Runtime {
    Runtime::new(Machine::of("gfx1151").expect("a declared machine"), 1 << 20)
}

fn put(rt: &mut Runtime, data: &[u8]) -> u64 {
    let at = rt.malloc(data.len()).unwrap();
    // SAFETY: `data` is a host range of its length.
    unsafe {
        rt.memcpy(
            at,
            data.as_ptr() as u64,
            data.len(),
            runtime::HOST_TO_DEVICE,
        )
    }
    .unwrap();
    at
}

fn args(p: &Problem, a: u64, b: u64, c: u64, alpha: &f32, beta: &f32) -> GemmArgs {
    GemmArgs {
        trans_a: T,
        trans_b: N,
        m: p.m as c_int,
        n: p.n as c_int,
        k: p.k as c_int,
        alpha: (alpha as *const f32).cast(),
        a,
        a_type: abi::HIP_R_16F,
        lda: p.lda as c_int,
        b,
        b_type: abi::HIP_R_16F,
        ldb: p.ldb as c_int,
        beta: (beta as *const f32).cast(),
        c,
        c_type: abi::HIP_R_16F,
        ldc: p.ldc as c_int,
        compute_type: abi::HIPBLAS_COMPUTE_32F,
        algo: abi::HIPBLAS_GEMM_DEFAULT,
    }
}

/// A whose extent runs past its allocation: the call returns success, as a GPU's asynchronous
/// library call does, and the device faults — hipErrorIllegalAddress (700) from every later
/// call that touches it, a lost device in the backend; a GEMM after that is EXECUTION_FAILED.
#[test]
fn an_operand_past_its_allocation_faults_the_device_like_a_kernel() {
    let mut rt = device();
    let p = problem();
    // One element short of the last one op(A) reads ((m − 1)·lda + k elements).
    let a = put(
        &mut rt,
        &bits(ActDtype::F16, &p.a[..(p.m - 1) * p.lda + p.k - 1]),
    );
    let b = put(&mut rt, &bits(ActDtype::F16, &p.b));
    let c = put(&mut rt, &bits(ActDtype::F16, &p.c));
    let h = blas::create(Ok(())).unwrap();
    let one = 1.0f32;
    let g = args(&p, a, b, c, &one, &one);
    // SAFETY: host scalars.
    let r = unsafe { blas::gemm(&mut rt, h, &g, TypeAbi::HipDataType) };
    assert_eq!(r, Ok(()), "the call itself succeeds");
    let sticky = rt.healthy().unwrap_err();
    assert_eq!(sticky.code(), 700, "{sticky}");
    assert!(sticky.to_string().contains("operand A"), "{sticky}");
    assert!(rt.malloc(16).is_err(), "sticky");
    // SAFETY: refused before anything is read.
    let again = unsafe { blas::gemm(&mut rt, h, &g, TypeAbi::HipDataType) }.unwrap_err();
    assert_eq!(status(again.code()), Status::ExecutionFailed, "{again}");
    blas::destroy(h).unwrap();
}

/// Pointer mode device reads alpha and beta from device memory; a device scalar outside every
/// allocation faults the device the same way.
#[test]
fn device_scalars_are_read_from_device_memory_or_fault() {
    let mut rt = device();
    let p = problem();
    let dtype = ActDtype::F16;
    let a = put(&mut rt, &bits(dtype, &p.a));
    let b = put(&mut rt, &bits(dtype, &p.b));
    let c = put(&mut rt, &bits(dtype, &p.c));
    let scalars = put(
        &mut rt,
        &[3.0f32.to_le_bytes(), 0.5f32.to_le_bytes()].concat(),
    );
    let h = blas::create(Ok(())).unwrap();
    blas::set_pointer_mode(h, 1).unwrap();
    let mut g = args(&p, a, b, c, &0.0, &0.0);
    g.alpha = scalars as *const c_void;
    g.beta = (scalars + 4) as *const c_void;
    // SAFETY: device scalars (pointer mode device).
    unsafe { blas::gemm(&mut rt, h, &g, TypeAbi::HipDataType) }.unwrap();
    let mut out = vec![0u8; p.c.len() * 2];
    // SAFETY: `out` is a host range of its length.
    unsafe {
        rt.memcpy(
            out.as_mut_ptr() as u64,
            c,
            out.len(),
            runtime::DEVICE_TO_HOST,
        )
    }
    .unwrap();
    assert_eq!(values(dtype, &out), p.expected(3.0, 0.5));
    g.beta = (scalars + 8) as *const c_void;
    // SAFETY: as above; the scalar is past its allocation.
    assert_eq!(
        unsafe { blas::gemm(&mut rt, h, &g, TypeAbi::HipDataType) },
        Ok(())
    );
    assert_eq!(rt.healthy().unwrap_err().code(), 700);
    blas::destroy(h).unwrap();
}
