//! The CUDA device as a [`Runtime`]: the driver's memory, launches and events, cuBLAS for
//! the dense path and the reference's DGEMM, each call checked and classified.

use super::*;

impl DeviceInfo for CudaDevice {
    fn target(&self) -> Target {
        self.emulating.unwrap_or(self.target)
    }

    fn execution(&self) -> Execution {
        match self.emulating {
            Some(_) => Execution::Emulated,
            None => Execution::Native,
        }
    }

    fn name(&self) -> String {
        match self.emulating {
            Some(t) => format!(
                "{} (CUDA device {}, {}) emulating {t}",
                self.name, self.ordinal, self.target
            ),
            None => format!(
                "{} (CUDA device {}, {})",
                self.name, self.ordinal, self.target
            ),
        }
    }

    fn health(&self) -> Health {
        Health::from_lost(&self.lost)
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn allocation(&self) -> Allocation {
        self.allocation
    }
}

impl ReferenceOffload for CudaDevice {
    /// Two cuBLAS DGEMMs on fresh f64 buffers (nothing shared with the kernels' buffers): the
    /// row-major `y[M, N] = x[M, K]·w[N, K]ᵀ` is the column-major `yᵀ = w·xᵀ`, so the call is
    /// `gemm(T, N, m = N, n = M, k = K, A = w, lda = K, B = x, ldb = K, C = y, ldc = N)` (as in
    /// `blas.rs`); then the same on `|x|`, `|w|`. W is dropped before `|W|` is uploaded.
    fn reference_gemm_f64(
        &self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        self.reference_gemm_f64_keyed(x, w, None, m, n, k)
    }

    /// W and |W| stay on the device under `w_key` (within [`HELD_W_BYTES`]); X is sent each
    /// call. A key that does not match the held one replaces it.
    fn reference_gemm_f64_keyed(
        &self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        use cudarc::cublas::Gemm;
        let during = format!("cuBLAS DGEMM (reference) M={m} N={n} K={k}");
        if x.len() != m * k || w.len() != n * k {
            return Err(DeviceFault::Unsupported {
                what: format!(
                    "an f64 GEMM of x with {} values and w with {} values (expected M·K = {} and \
                     N·K = {})",
                    x.len(),
                    w.len(),
                    m * k,
                    n * k
                ),
                device: self.name.clone(),
            });
        }
        if m == 0 || n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let cfg = reference_judge::dgemm_config(m, n, k, &during)?;
        self.bind(&during)?;
        let blas = self.blas_handle()?;
        let Some(blas) = blas.as_ref() else {
            return Err(DeviceFault::MissingCapability {
                capability: Capability::F64Gemm,
                device: self.name.clone(),
                why: "no cuBLAS handle".into(),
            });
        };
        if k == 0 {
            return Ok((vec![0.0; m * n], vec![0.0; m * n]));
        }
        let mut held = self.held_w.lock().unwrap_or_else(|p| p.into_inner());
        let keep = w_key.filter(|_| 2 * 8 * w.len() <= HELD_W_BYTES);
        let hit = matches!((&*held, keep), (Some(r), Some(key)) if r.key == key);
        if !hit {
            *held = None;
            let upload = |v: &[f64]| {
                self.stream
                    .memcpy_stod(v)
                    .map_err(|e| self.fault(e, &during))
            };
            let w_abs: Vec<f64> = w.iter().map(|v| v.abs()).collect();
            let fresh = HeldW {
                key: keep.unwrap_or_default(),
                w: upload(w)?,
                w_abs: upload(&w_abs)?,
            };
            *held = Some(fresh);
        }
        let Some(on_device) = held.as_ref() else {
            unreachable!("set above")
        };
        let product = |xs: &[f64], dw: &CudaSlice<f64>| -> Result<Vec<f64>, DeviceFault> {
            let dx = self
                .stream
                .memcpy_stod(xs)
                .map_err(|e| self.fault(e, &during))?;
            let mut dy = self
                .stream
                .alloc_zeros::<f64>(m * n)
                .map_err(|e| self.fault(e, &during))?;
            // SAFETY: the buffers were allocated above with exactly the sizes the configuration
            // reads and writes (lda = ldb = K, ldc = N, column-major extents as documented).
            unsafe { blas.gemm(cfg, dw, &dx, &mut dy) }.map_err(|e| DeviceFault::Call {
                during: during.clone(),
                code: format!("{:?}", e.0),
            })?;
            self.synchronize(&during)?;
            self.stream
                .memcpy_dtov(&dy)
                .map_err(|e| self.fault(e, &during))
        };
        let y = product(x, &on_device.w)?;
        let xa: Vec<f64> = x.iter().map(|v| v.abs()).collect();
        let a = product(&xa, &on_device.w_abs)?;
        if keep.is_none() {
            *held = None;
        }
        Ok((y, a))
    }

    fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        CudaDevice::draw_realistic(self, stream, dtype, count)
    }

    fn reference_products_held(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<HeldLanes>, DeviceFault> {
        self.products_held(x, weights, w_key)
    }

    fn held_gather(
        &self,
        lanes: &HeldLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        self.gather_held(lanes, index)
    }

    fn held_download(&self, lanes: &HeldLanes) -> Result<RawLanes, DeviceFault> {
        self.download_held(lanes)
    }

    fn held_overwrite_y_rows(
        &self,
        lanes: &mut HeldLanes,
        rows: &[(usize, Vec<f64>)],
    ) -> Result<(), DeviceFault> {
        self.overwrite_held_rows(lanes, rows)
    }

    fn held_judge(
        &self,
        lanes: &HeldLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        self.judge_held(lanes, request)
    }
}

impl Runtime for CudaDevice {
    type Buffer = CudaBuffer;

    type Event = CudaEvent;

    fn alloc(&self, bytes: usize) -> Result<CudaBuffer, DeviceFault> {
        let during = format!("allocating {bytes} bytes");
        self.bind(&during)?;
        let memory = match self.allocation {
            Allocation::Guarded => {
                // SAFETY: every buffer is written (upload) or only used as a copy target before
                // it is read.
                let slice = unsafe { self.stream.alloc::<u8>(bytes.max(1)) }
                    .map_err(|e| self.fault(e, &during))?;
                Memory::Pooled(slice)
            }
            Allocation::Exact => {
                // SAFETY: a plain allocation of `bytes`; freed once by `ExactAllocation::drop`.
                let ptr = unsafe { cudarc::driver::result::malloc_sync(bytes.max(1)) }
                    .map_err(|e| self.fault(e, &during))?;
                Memory::Exact(ExactAllocation {
                    ptr,
                    len: bytes.max(1),
                    stream: Arc::clone(&self.stream),
                })
            }
        };
        Ok(CudaBuffer { memory })
    }

    fn address(&self, buf: &CudaBuffer) -> u64 {
        addr(buf, &self.stream)
    }

    fn upload(&self, dst: &mut CudaBuffer, src: &[u8]) -> Result<(), DeviceFault> {
        let during = format!("uploading {} bytes", src.len());
        self.bind(&during)?;
        if src.len() > dst.len() {
            return Err(DeviceFault::Call {
                during,
                code: format!("buffer holds only {} bytes", dst.len()),
            });
        }
        match &mut dst.memory {
            Memory::Pooled(slice) => {
                let mut view = slice.slice_mut(0..src.len());
                self.stream
                    .memcpy_htod(src, &mut view)
                    .map_err(|e| self.fault(e, &during))
            }
            // SAFETY: `src.len()` ≤ the allocation (checked above); a copy from pageable host
            // memory is staged before the call returns, so `src` may go away after it.
            Memory::Exact(e) => unsafe {
                cudarc::driver::result::memcpy_htod_async(e.ptr, src, self.stream.cu_stream())
            }
            .map_err(|err| self.fault(err, &during)),
        }
    }

    fn download(&self, src: &CudaBuffer) -> Result<Vec<u8>, DeviceFault> {
        let during = format!("downloading {} bytes", src.len());
        self.bind(&during)?;
        match &src.memory {
            Memory::Pooled(slice) => self
                .stream
                .memcpy_dtov(slice)
                .map_err(|e| self.fault(e, &during)),
            Memory::Exact(e) => {
                let mut out = vec![0u8; e.len];
                // SAFETY: `out` holds the whole allocation and outlives the copy, which the
                // stream synchronisation below completes.
                unsafe {
                    cudarc::driver::result::memcpy_dtoh_async(
                        &mut out,
                        e.ptr,
                        self.stream.cu_stream(),
                    )
                }
                .map_err(|err| self.fault(err, &during))?;
                self.stream
                    .synchronize()
                    .map_err(|err| self.fault(err, &during))?;
                Ok(out)
            }
        }
    }

    fn copy(
        &self,
        dst: &mut CudaBuffer,
        src: &CudaBuffer,
        bytes: usize,
    ) -> Result<(), DeviceFault> {
        let during = format!("copying {bytes} bytes on the device");
        self.bind(&during)?;
        if bytes > src.len() || bytes > dst.len() {
            return Err(DeviceFault::Call {
                during,
                code: "copy larger than its buffers".into(),
            });
        }
        if let (Memory::Pooled(s), Memory::Pooled(d)) = (&src.memory, &mut dst.memory) {
            let from = s.slice(0..bytes);
            let mut to = d.slice_mut(0..bytes);
            return self
                .stream
                .memcpy_dtod(&from, &mut to)
                .map_err(|e| self.fault(e, &during));
        }
        let (from, to) = (addr(src, &self.stream), addr(dst, &self.stream));
        // SAFETY: both are live allocations of at least `bytes` (checked above).
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(to, from, bytes, self.stream.cu_stream())
        }
        .map_err(|e| self.fault(e, &during))
    }

    fn launch(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        args: &PackedArgs,
    ) -> Result<(), DeviceFault> {
        self.bind(&format!("launching {entry}"))?;
        let func = self.function(kernel, entry)?;
        let values = args.values(kernel).ok_or_else(|| DeviceFault::Launch {
            kernel: entry.to_string(),
            code: "argument buffer does not match the declaration".into(),
            detail: String::new(),
        })?;
        let detail = format!(
            "grid {:?}, block {:?}, {} B shared",
            geometry.grid, geometry.block, geometry.shared_mem_bytes
        );
        let refused = |e: DriverError| match self.fault(e, &format!("launching {entry}")) {
            DeviceFault::Launch { code, .. } => DeviceFault::Launch {
                kernel: entry.to_string(),
                code,
                detail: detail.clone(),
            },
            other => other,
        };
        // The 48 KiB default caps static plus dynamic shared memory together: a kernel with static
        // arrays (skinny) needs the opt-in for any dynamic amount, so ask whenever there is one.
        if geometry.shared_mem_bytes > 0 {
            func.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                geometry.shared_mem_bytes as i32,
            )
            .map_err(refused)?;
        }
        let cfg = LaunchConfig {
            grid_dim: (geometry.grid[0], geometry.grid[1], geometry.grid[2]),
            block_dim: (geometry.block[0], geometry.block[1], geometry.block[2]),
            shared_mem_bytes: geometry.shared_mem_bytes,
        };
        let mut builder = self.stream.launch_builder(&func);
        for v in &values {
            match v {
                RawArg::Pointer(p) => builder.arg(p),
                RawArg::I32(i) => builder.arg(i),
            };
        }
        // SAFETY: the arguments were validated against the kernel's declaration and packed from
        // it; every pointer is a live buffer of this device of at least the validated size.
        unsafe { builder.launch(cfg) }.map(|_| ()).map_err(refused)
    }

    fn blas_gemm(
        &self,
        g: &BlasGemm,
        x: &CudaBuffer,
        dense: &CudaBuffer,
        y: &mut CudaBuffer,
    ) -> Result<(), DeviceFault> {
        use cudarc::cublas::sys::{
            cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType,
        };
        let during = format!("cuBLAS GEMM M={} N={} K={}", g.m, g.n, g.k);
        self.bind(&during)?;
        let blas = self.blas_handle()?;
        let Some(blas) = blas.as_ref() else {
            return Err(DeviceFault::MissingCapability {
                capability: Capability::VendorBlas,
                device: self.name.clone(),
                why: "no cuBLAS handle".into(),
            });
        };
        let dt = match g.dtype {
            ActDtype::F16 => cudaDataType::CUDA_R_16F,
            ActDtype::Bf16 => cudaDataType::CUDA_R_16BF,
        };
        // The column-major call shared with the ROCm backend (`blas.rs`): op(A) = T on the
        // row-major dense copy [N, K] (ld = its padded row stride), op(B) = N on X.
        let c = g.column_major().map_err(|e| DeviceFault::Call {
            during: during.clone(),
            code: e.to_string(),
        })?;
        let op = |o: BlasOp| match o {
            BlasOp::N => cublasOperation_t::CUBLAS_OP_N,
            BlasOp::T => cublasOperation_t::CUBLAS_OP_T,
        };
        let alpha = 1.0f32;
        let beta = g.beta;
        let x_ptr = (addr(x, &self.stream) + g.x_offset as u64) as *const std::ffi::c_void;
        let d_ptr = (addr(dense, &self.stream) + g.dense_offset as u64) as *const std::ffi::c_void;
        let y_ptr = (addr(y, &self.stream) + g.y_offset as u64) as *mut std::ffi::c_void;
        // SAFETY: the operands were validated (shapes, strides, bytes) against the dense
        // declaration; the pointers are live buffers of this device.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *blas.handle(),
                op(c.op_a),
                op(c.op_b),
                c.m,
                c.n,
                c.k,
                (&alpha as *const f32).cast(),
                d_ptr,
                dt,
                c.lda,
                x_ptr,
                dt,
                c.ldb,
                (&beta as *const f32).cast(),
                y_ptr,
                dt,
                c.ldc,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .map_err(|e| DeviceFault::Call {
            during,
            code: format!("{:?}", e.0),
        })
    }

    fn record(&self) -> Result<CudaEvent, DeviceFault> {
        self.bind("recording an event")?;
        self.stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| self.fault(e, "recording an event"))
    }

    fn elapsed_us(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f64, DeviceFault> {
        self.bind("reading event times")?;
        start
            .elapsed_ms(end)
            .map(|ms| ms as f64 * 1000.0)
            .map_err(|e| self.fault(e, "reading event times"))
    }

    fn compares_on_device(&self) -> bool {
        true
    }

    fn same_bytes(
        &self,
        a: &CudaBuffer,
        b: &CudaBuffer,
        bytes: usize,
    ) -> Result<bool, DeviceFault> {
        if bytes > a.len() || bytes > b.len() {
            return Ok(false);
        }
        let (pa, pb) = (addr(a, &self.stream), addr(b, &self.stream));
        Ok(self.count_differences(pa, pb, bytes)? == 0)
    }

    fn input_cache(&self) -> Option<&Mutex<InputCache<CudaBuffer>>> {
        (self.allocation == Allocation::Guarded).then_some(&*self.inputs)
    }

    fn synchronize(&self, during: &str) -> Result<(), DeviceFault> {
        self.bind(during)?;
        let done = self
            .stream
            .record_event(None)
            .map_err(|e| self.fault(e, during))?;
        let deadline = Instant::now() + self.watchdog;
        let mut pause = Duration::from_micros(10);
        loop {
            // SAFETY: `done` is a live event of this context.
            match unsafe { cudarc::driver::result::event::query(done.cu_event()) } {
                Ok(()) => break,
                Err(DriverError(CUresult::CUDA_ERROR_NOT_READY)) => {}
                Err(e) => return Err(self.fault(e, during)),
            }
            if Instant::now() >= deadline {
                self.mark_lost(format!(
                    "{during} hung past the {:.1} s watchdog",
                    self.watchdog.as_secs_f64()
                ));
                return Err(DeviceFault::Timeout {
                    during: during.to_string(),
                    after: self.watchdog,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        // errors recorded by drops (frees) since the last check
        self.ctx.check_err().map_err(|e| self.fault(e, during))
    }
}
