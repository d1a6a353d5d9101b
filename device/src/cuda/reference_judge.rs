//! The GPU reference kept on the device (`--reference gpu`): the DGEMM's lanes stay in device
//! memory, |X| and |W| are formed there, and the kernel output is judged there by
//! `cuda/reference_judge.cu` (the device twin of `compare::judge_plain`). Only the report, the
//! cross-check's sampled elements, or, for the rare output with a special element, the lanes
//! themselves come back.

use cudarc::cublas::{Gemm, GemmConfig, sys::cublasOperation_t};
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use w4a16_reference::compare::{CompareReport, JudgeRequest};
use w4a16_reference::offload::{ActivationOperand, RawLanes, WeightOperand};
use w4a16_reference::{ActDtype, BiasStage};

use super::{CudaDevice, lock};
use crate::held::HeldLanes;
use crate::{Capability, DeviceFault, Runtime};

/// The harness's device code: the judge and the realistic-X generator, compiled on their own
/// (never with the kernels under test).
const SOURCE: &str = concat!(
    include_str!("../../cuda/reference_judge.cu"),
    include_str!("../../cuda/seeded_activations.cu")
);

/// Threads per block of every entry (the judge's shared arrays are sized for it).
const THREADS: u32 = 256;
/// At most this many judge blocks (each thread strides over the output): their reports are
/// what comes back.
const MAX_BLOCKS: usize = 1024;
/// Words of one block's report (`JudgeBlock`).
const BLOCK_WORDS: usize = 13;

/// A keyed W (and |W|, and the offset rows) is kept up to this many bytes in all.
pub(super) const HELD_LANES_W_BYTES: usize = 6 << 30;

/// The harness module's entries.
#[derive(Clone)]
pub(super) struct HarnessFunctions {
    judge: CudaFunction,
    gather: CudaFunction,
    decode: CudaFunction,
    widen: CudaFunction,
    pub(super) realistic: CudaFunction,
    differences: CudaFunction,
}

/// The lanes of one reference on this device.
struct CudaLanes {
    y: CudaSlice<f64>,
    a: CudaSlice<f64>,
    offset: Option<CudaSlice<f64>>,
}

/// The held path's W under its key: W, |W| (formed on the device) and the offset rows.
pub(super) struct HeldLanesW {
    key: u64,
    w: CudaSlice<f64>,
    w_abs: CudaSlice<f64>,
    w_offset: Option<CudaSlice<f64>>,
}

/// The row-major `y[M, N] = x[M, K]·w[N, K]ᵀ` as cuBLAS's column-major `yᵀ = w·xᵀ`:
/// `gemm(T, N, m = N, n = M, k = K, A = w, lda = K, B = x, ldb = K, C = y, ldc = N)`.
pub(super) fn dgemm_config(
    m: usize,
    n: usize,
    k: usize,
    during: &str,
) -> Result<GemmConfig<f64>, DeviceFault> {
    let int = |v: usize, what: &str| {
        i32::try_from(v).map_err(|_| DeviceFault::Call {
            during: during.to_string(),
            code: format!("{what} = {v} exceeds cuBLAS's 32-bit int"),
        })
    };
    Ok(GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: int(n, "N")?,
        n: int(m, "M")?,
        k: int(k.max(1), "K")?,
        alpha: 1.0f64,
        lda: int(k.max(1), "K")?,
        ldb: int(k.max(1), "K")?,
        beta: 0.0f64,
        ldc: int(n, "N")?,
    })
}

pub(super) fn grid(count: usize, max: usize) -> u32 {
    count.div_ceil(THREADS as usize).clamp(1, max) as u32
}

pub(super) fn config(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The harness module for `arch`, every product and sum rounded on its own (`--fmad=false`)
/// as on the host.
fn compile(arch: &str) -> Result<cudarc::nvrtc::Ptx, cudarc::nvrtc::CompileError> {
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--fmad=false".into(),
            "--prec-div=true".into(),
            "--ftz=false".into(),
        ],
        name: Some("reference_judge.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(SOURCE, opts)
}

impl CudaDevice {
    /// The harness module, compiled by NVRTC for this device on first use.
    pub(super) fn harness_functions(&self) -> Result<HarnessFunctions, DeviceFault> {
        if let Some(f) = lock(&self.judge).as_ref() {
            return Ok(f.clone());
        }
        let arch = self.nvrtc_arch();
        let compile_error = |log: String| DeviceFault::Compile {
            source_file: "device/cuda/reference_judge.cu + seeded_activations.cu".into(),
            arch: arch.clone(),
            log,
        };
        let ptx = compile(&arch).map_err(|e| match e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                compile_error(log.to_string_lossy().into_owned())
            }
            other => compile_error(other.to_string()),
        })?;
        let during = "loading the reference judge";
        self.bind(during)?;
        let module = self
            .ctx
            .load_module(ptx)
            .map_err(|e| self.fault(e, during))?;
        let load = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| self.fault(e, during))
        };
        let functions = HarnessFunctions {
            judge: load("judge")?,
            gather: load("gather_lanes")?,
            decode: load("decode_weights")?,
            widen: load("widen_activations")?,
            realistic: load("realistic_activations")?,
            differences: load("count_differences")?,
        };
        *lock(&self.judge) = Some(functions.clone());
        Ok(functions)
    }

    fn upload<T: cudarc::driver::DeviceRepr>(
        &self,
        v: &[T],
        during: &str,
    ) -> Result<CudaSlice<T>, DeviceFault> {
        self.stream
            .memcpy_stod(v)
            .map_err(|e| self.fault(e, during))
    }

    /// An f64 buffer of `len` elements the next call overwrites whole.
    fn scratch_f64(&self, len: usize, during: &str) -> Result<CudaSlice<f64>, DeviceFault> {
        // SAFETY: every caller writes all `len` elements (a DGEMM with beta = 0, or one of the
        // judge module's kernels) before anything reads them.
        unsafe { self.stream.alloc::<f64>(len.max(1)) }.map_err(|e| self.fault(e, during))
    }

    /// The exact weights decoded on the device from the codes and per-group scales and zero
    /// points: W, |W| and the offset rows, `[N, K]` each.
    fn decode_held(
        &self,
        f: &HarnessFunctions,
        weights: &WeightOperand<'_>,
        key: u64,
        during: &str,
    ) -> Result<HeldLanesW, DeviceFault> {
        let (n, k) = (weights.n, weights.k);
        let len = n * k;
        let codes = self.upload(&weights.codes[..len], during)?;
        let scales = self.upload(&weights.scales, during)?;
        let zeros = self.upload(&weights.zeros, during)?;
        let mut w = self.scratch_f64(len, during)?;
        let mut w_abs = self.scratch_f64(len, during)?;
        let mut w_offset = match weights.offset {
            Some(_) => Some(self.scratch_f64(len, during)?),
            None => None,
        };
        let (nn, kk, group) = (n as u64, k as u64, weights.group.max(1) as u64);
        let has_offset = i32::from(weights.offset.is_some());
        let offset = weights.offset.unwrap_or(0.0);
        let mut b = self.stream.launch_builder(&f.decode);
        b.arg(&codes)
            .arg(&scales)
            .arg(&zeros)
            .arg(&nn)
            .arg(&kk)
            .arg(&group);
        b.arg(&has_offset).arg(&offset).arg(&mut w);
        // Never written without an offset lane.
        let mut unused = self.scratch_f64(1, during)?;
        b.arg(&mut w_abs)
            .arg(w_offset.as_mut().unwrap_or(&mut unused));
        // SAFETY: `codes` holds N·K bytes, `scales` and `zeros` N·groups doubles (checked by
        // the caller), `w`, `w_abs` and the offset rows N·K doubles each.
        unsafe { b.launch(config(grid(len, MAX_BLOCKS))) }.map_err(|e| self.fault(e, during))?;
        Ok(HeldLanesW {
            key,
            w,
            w_abs,
            w_offset,
        })
    }

    pub(super) fn products_held(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<HeldLanes>, DeviceFault> {
        let (m, n, k) = (x.m, weights.n, weights.k);
        let during = format!("the device-held f64 reference M={m} N={n} K={k}");
        let groups = k.div_ceil(weights.group.max(1));
        let lengths_ok = x.bits.len() == m * k
            && x.k == k
            && weights.codes.len() >= n * k
            && weights.scales.len() == n * groups
            && weights.zeros.len() == n * groups;
        if !lengths_ok {
            return Err(DeviceFault::Unsupported {
                what: format!(
                    "an f64 GEMM of x with {} values (K = {}), {} codes, {} scales and {} zero \
                     points (expected M·K = {}, N·K = {} and N·groups = {})",
                    x.bits.len(),
                    x.k,
                    weights.codes.len(),
                    weights.scales.len(),
                    weights.zeros.len(),
                    m * k,
                    n * k,
                    n * groups
                ),
                device: self.name.clone(),
            });
        }
        if m == 0 || n == 0 || k == 0 {
            return Ok(None);
        }
        let cfg = dgemm_config(m, n, k, &during)?;
        let f = self.harness_functions()?;
        self.bind(&during)?;
        let guard = self.blas_handle()?;
        let Some(blas) = guard.as_ref() else {
            return Err(DeviceFault::MissingCapability {
                capability: Capability::F64Gemm,
                device: self.name.clone(),
                why: "no cuBLAS handle".into(),
            });
        };
        let lanes_w = (2 + usize::from(weights.offset.is_some())) * 8 * n * k;
        let keep = w_key.filter(|_| lanes_w <= HELD_LANES_W_BYTES);
        let mut held = lock(&self.held_lanes_w);
        let hit = matches!((&*held, keep), (Some(r), Some(key)) if r.key == key);
        if !hit {
            *held = None;
            *held = Some(self.decode_held(&f, weights, keep.unwrap_or_default(), &during)?);
        }
        let Some(on_device) = held.as_ref() else {
            unreachable!("set above")
        };
        let (dx, dxa) = self.widen(&f, x, &during)?;
        let product = |dw: &CudaSlice<f64>, dx: &CudaSlice<f64>| {
            let mut dy = self.scratch_f64(m * n, &during)?;
            // SAFETY: the buffers hold exactly what the configuration reads and writes
            // (lda = ldb = K, ldc = N; w `[N, K]`, x `[M, K]`, y `[M, N]`).
            unsafe { blas.gemm(cfg, dw, dx, &mut dy) }.map_err(|e| DeviceFault::Call {
                during: during.clone(),
                code: format!("{:?}", e.0),
            })?;
            Ok::<_, DeviceFault>(dy)
        };
        let y = product(&on_device.w, &dx)?;
        let a = product(&on_device.w_abs, &dxa)?;
        let offset = match &on_device.w_offset {
            Some(o) if weights.offset.is_some() => Some(product(o, &dxa)?),
            _ => None,
        };
        if keep.is_none() {
            *held = None;
        }
        drop(held);
        drop(guard);
        self.synchronize(&during)?;
        Ok(Some(HeldLanes {
            m,
            n,
            has_offset: offset.is_some(),
            inner: Box::new(CudaLanes { y, a, offset }),
        }))
    }

    /// X and |X| in f64, widened on the device from the activation bits.
    fn widen(
        &self,
        f: &HarnessFunctions,
        x: &ActivationOperand<'_>,
        during: &str,
    ) -> Result<(CudaSlice<f64>, CudaSlice<f64>), DeviceFault> {
        let len = x.bits.len();
        let bits = self.upload(&x.bits, during)?;
        let mut dx = self.scratch_f64(len, during)?;
        let mut dxa = self.scratch_f64(len, during)?;
        let (bf16, count) = (i32::from(x.dtype == ActDtype::Bf16), len as u64);
        let mut b = self.stream.launch_builder(&f.widen);
        b.arg(&bits)
            .arg(&bf16)
            .arg(&mut dx)
            .arg(&mut dxa)
            .arg(&count);
        // SAFETY: `bits` holds `len` values, `dx` and `dxa` `len` doubles each.
        unsafe { b.launch(config(grid(len, MAX_BLOCKS))) }.map_err(|e| self.fault(e, during))?;
        Ok((dx, dxa))
    }

    pub(super) fn gather_held(
        &self,
        lanes: &HeldLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        let during = "gathering the held reference's sampled elements";
        let l: &CudaLanes = lanes.inner(&self.name)?;
        let total = lanes.m * lanes.n;
        if let Some(&i) = index.iter().find(|&&i| i >= total) {
            return Err(DeviceFault::Unsupported {
                what: format!("element {i} of a held reference of {total}"),
                device: self.name.clone(),
            });
        }
        if index.is_empty() {
            return Ok(Vec::new());
        }
        let f = self.harness_functions()?;
        self.bind(during)?;
        let idx: Vec<u64> = index.iter().map(|&i| i as u64).collect();
        let didx = self.upload(&idx, during)?;
        let mut out = self.scratch_f64(3 * index.len(), during)?;
        let (count, has_offset) = (index.len() as u64, i32::from(l.offset.is_some()));
        let offset = l.offset.as_ref().unwrap_or(&l.a);
        let mut b = self.stream.launch_builder(&f.gather);
        b.arg(&l.y).arg(&l.a).arg(offset).arg(&has_offset);
        b.arg(&didx).arg(&count).arg(&mut out);
        // SAFETY: every index is below M·N (checked above), the lanes' length; `out` holds
        // 3·count doubles.
        unsafe { b.launch(config(grid(index.len(), usize::MAX))) }
            .map_err(|e| self.fault(e, during))?;
        self.synchronize(during)?;
        let flat = self
            .stream
            .memcpy_dtov(&out)
            .map_err(|e| self.fault(e, during))?;
        Ok(flat[..3 * index.len()]
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect())
    }

    /// How many of the first `bytes` bytes of two device buffers (addresses `a`, `b`) differ,
    /// counted on the device: only the count comes back.
    pub(super) fn count_differences(
        &self,
        a: u64,
        b: u64,
        bytes: usize,
    ) -> Result<u64, DeviceFault> {
        let during = "comparing an output with its expected buffer on the device";
        let f = self.harness_functions()?;
        self.bind(during)?;
        let mut count = self.upload(&[0u64], during)?;
        let n = bytes as u64;
        let mut l = self.stream.launch_builder(&f.differences);
        l.arg(&a).arg(&b).arg(&n).arg(&mut count);
        // SAFETY: the caller checked that both allocations hold at least `bytes` bytes; `count`
        // holds one word.
        unsafe { l.launch(config(grid(bytes, MAX_BLOCKS))) }.map_err(|e| self.fault(e, during))?;
        self.synchronize(during)?;
        let back = self
            .stream
            .memcpy_dtov(&count)
            .map_err(|e| self.fault(e, during))?;
        Ok(back.first().copied().unwrap_or(u64::MAX))
    }

    /// Overwrites whole rows of the held `y` lane, one copy per row.
    pub(super) fn overwrite_held_rows(
        &self,
        lanes: &mut HeldLanes,
        rows: &[(usize, Vec<f64>)],
    ) -> Result<(), DeviceFault> {
        let during = "writing the special rows of the held reference";
        lanes.check_rows(rows, &self.name)?;
        let n = lanes.n;
        let l: &mut CudaLanes = lanes.inner_mut(&self.name)?;
        self.bind(during)?;
        for (m, values) in rows {
            let mut row = l.y.slice_mut(m * n..(m + 1) * n);
            self.stream
                .memcpy_htod(values, &mut row)
                .map_err(|e| self.fault(e, during))?;
        }
        self.synchronize(during)
    }

    pub(super) fn download_held(&self, lanes: &HeldLanes) -> Result<RawLanes, DeviceFault> {
        let during = "downloading the held reference";
        let l: &CudaLanes = lanes.inner(&self.name)?;
        self.bind(during)?;
        let total = lanes.m * lanes.n;
        let down = |s: &CudaSlice<f64>| {
            let mut v = self
                .stream
                .memcpy_dtov(s)
                .map_err(|e| self.fault(e, during))?;
            v.truncate(total);
            Ok::<_, DeviceFault>(v)
        };
        let offset = l.offset.as_ref().map(down).transpose()?;
        Ok((down(&l.y)?, down(&l.a)?, offset))
    }

    pub(super) fn judge_held(
        &self,
        lanes: &HeldLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        let during = "judging the output against the held reference";
        let l: &CudaLanes = lanes.inner(&self.name)?;
        let (m, n) = (lanes.m, lanes.n);
        let out = request.out;
        out.validate(m, n).map_err(|e| DeviceFault::Unsupported {
            what: format!("an output that does not fit the reference: {e}"),
            device: self.name.clone(),
        })?;
        if request.bias.len() != n || request.model.uses_offset() != l.offset.is_some() {
            return Err(DeviceFault::Unsupported {
                what: format!(
                    "a judge request with {} bias values and offset lane {} (the reference has \
                     N = {n} and offset lane {})",
                    request.bias.len(),
                    request.model.uses_offset(),
                    l.offset.is_some()
                ),
                device: self.name.clone(),
            });
        }
        let total = m * n;
        if total == 0 {
            return Ok(Some(CompareReport::new(request.mode)));
        }
        let f = self.harness_functions()?;
        self.bind(during)?;
        let needed = (m - 1) * out.row_stride + n;
        let bits = self.upload(&out.bits[..needed], during)?;
        let bias = self.upload(request.bias, during)?;
        let terms: Vec<f64> = [request.model.terms(true), request.model.terms(false)]
            .iter()
            .flat_map(|t| [t.accumulation, t.weight, t.y, t.y_pre_bias, t.floor])
            .collect();
        let terms = self.upload(&terms, during)?;
        let blocks = grid(total, MAX_BLOCKS);
        let mut report = self.scratch_u64(blocks as usize * BLOCK_WORDS, during)?;
        let dtype = request.model.recipe.output;
        let bf16 = i32::from(dtype == ActDtype::Bf16);
        let stage: i32 = match request.model.recipe.bias {
            BiasStage::BeforeCast => 0,
            BiasStage::AfterCast => 1,
            BiasStage::Either => 2,
        };
        let (row_stride, mm, nn) = (out.row_stride as u64, m as u64, n as u64);
        let has_bias = i32::from(request.has_bias);
        let poison = dtype.poison_bits();
        let acc = l.offset.as_ref().unwrap_or(&l.a);
        let mut b = self.stream.launch_builder(&f.judge);
        b.arg(&bits).arg(&row_stride).arg(&l.y).arg(&l.a).arg(acc);
        b.arg(&bias).arg(&has_bias).arg(&mm).arg(&nn).arg(&bf16);
        b.arg(&stage).arg(&poison).arg(&terms).arg(&mut report);
        // SAFETY: the lanes hold M·N doubles, `bits` the output's (M − 1)·stride + N values,
        // `bias` N, `terms` 10, `report` 13 words per block of the grid.
        unsafe { b.launch(config(blocks)) }.map_err(|e| self.fault(e, during))?;
        self.synchronize(during)?;
        let words = self
            .stream
            .memcpy_dtov(&report)
            .map_err(|e| self.fault(e, during))?;
        Ok(reduce_blocks(&words, blocks as usize, n, request))
    }

    fn scratch_u64(&self, len: usize, during: &str) -> Result<CudaSlice<u64>, DeviceFault> {
        // SAFETY: the judge writes every block's words before the host reads them.
        unsafe { self.stream.alloc::<u64>(len.max(1)) }.map_err(|e| self.fault(e, during))
    }
}

/// The blocks' reports summed; the worst is the largest ratio, the smallest index among
/// equals (the host comparison's order). `None` when a block saw a special element.
fn reduce_blocks(
    words: &[u64],
    blocks: usize,
    n: usize,
    request: &JudgeRequest<'_>,
) -> Option<CompareReport> {
    let mut report = CompareReport::new(request.mode);
    let mut worst: Option<(f64, u64)> = None;
    for block in words.chunks_exact(BLOCK_WORDS).take(blocks) {
        if block[1] != 0 {
            return None;
        }
        report.checked += block[0] as usize;
        report.exact_mismatches += block[2] as usize;
        report.over_bound += block[3] as usize;
        for (sum, &count) in report.buckets.iter_mut().zip(&block[4..11]) {
            *sum += count as usize;
        }
        let (ratio, at) = (f64::from_bits(block[11]), block[12]);
        if ratio < 0.0 {
            continue;
        }
        let better = match worst {
            None => true,
            Some((r, i)) => ratio > r || (ratio == r && at < i),
        };
        if better {
            worst = Some((ratio, at));
        }
    }
    if let Some((ratio, at)) = worst {
        report.worst_ratio = ratio;
        report.worst_at = Some((at as usize / n, at as usize % n));
    }
    Some(report)
}

/// Keeps the module's cached entries alive with the device (see `CudaDevice::judge`).
pub(super) type JudgeCache = Option<HarnessFunctions>;

#[cfg(test)]
mod tests {
    use w4a16_require::{Requirement, Skip, skip_or_fail};

    /// The harness module compiles without a GPU wherever NVRTC loads, every entry the device
    /// loads present (a syntax error in either source is found here, not on the GPU runner).
    #[test]
    fn the_harness_module_compiles_with_nvrtc() {
        if let Err(u) = w4a16_kernels::nvrtc::nvrtc_loadable() {
            let requirement = Requirement::Nvrtc;
            return skip_or_fail(&Skip {
                requirement,
                reason: u.reason,
            });
        }
        let ptx = super::compile("sm_90")
            .expect("the harness module compiles")
            .to_src();
        for entry in [
            "judge",
            "gather_lanes",
            "decode_weights",
            "widen_activations",
            "realistic_activations",
            "count_differences",
        ] {
            assert!(ptx.contains(&format!(".entry {entry}(")), "{entry}");
        }
    }
}
