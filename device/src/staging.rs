//! The steps of the checked launch flow on a [`Runtime`]: readiness, staging the inputs and
//! the poisoned, guarded output, argument packing, the kernel launch, and the vendor-BLAS
//! call of the dense path. [`crate::Device`] and [`crate::DeviceBench`] are built from them.

use w4a16_kernels::decl::{LaunchGeometry, LaunchShape};
use w4a16_kernels::{KernelDecl, ScalarArg, TensorRole};

use crate::fault::{DeviceFault, Health};
use crate::guard::{OutputLayout, OutputReport};
use crate::info::Allocation;
use crate::input_cache::{HashedSlices, InputCache, InputKey};
use crate::launch::{DeviceInputs, PackedArgs, pack_args};
use crate::outputs::BlasGemm;
use crate::runtime::Runtime;
use std::borrow::Cow;
use std::sync::{MutexGuard, PoisonError};

/// Uploaded inputs of one launch and the guarded output buffer.
pub(crate) struct Staged<R: Runtime> {
    pub(crate) inputs: Vec<(TensorRole, R::Buffer)>,
    pub(crate) output: R::Buffer,
    pub(crate) layout: OutputLayout,
}

impl<R: Runtime> Staged<R> {
    fn buffer(&self, role: TensorRole) -> Option<&R::Buffer> {
        self.inputs.iter().find(|(r, _)| *r == role).map(|(_, b)| b)
    }
}

pub(crate) fn check_ready<R: Runtime + ?Sized>(
    b: &R,
    kernel: &KernelDecl,
    inputs: &DeviceInputs<'_>,
) -> Result<(), DeviceFault> {
    if let Health::Lost { cause } = b.health() {
        return Err(DeviceFault::ContextLost { cause });
    }
    if inputs.kernel() != kernel.id {
        return Err(DeviceFault::WrongKernel {
            kernel: kernel.id,
            validated: inputs.kernel(),
        });
    }
    Ok(())
}

/// Uploads every input and builds the poisoned, guarded output. `prefill` puts values into
/// logical output elements instead of the poison (bias for `beta = 1`).
pub(crate) fn stage<R: Runtime>(
    b: &R,
    inputs: &DeviceInputs<'_>,
    prefill: Option<&dyn Fn(usize, usize) -> Option<u16>>,
) -> Result<Staged<R>, DeviceFault> {
    stage_hashed(b, inputs, prefill, &mut HashedSlices::default())
}

/// As [`stage`], the inputs' keys looked up in `hashed` (one rotating benchmark's copies,
/// borrowing the same host bytes, are hashed once).
pub(crate) fn stage_hashed<R: Runtime>(
    b: &R,
    inputs: &DeviceInputs<'_>,
    prefill: Option<&dyn Fn(usize, usize) -> Option<u16>>,
    hashed: &mut HashedSlices,
) -> Result<Staged<R>, DeviceFault> {
    let allocation = b.allocation();
    let mut staged = Vec::new();
    for role in inputs.launch().present_roles() {
        if role == inputs.output_role() {
            continue;
        }
        let Some(host) = inputs.host(role) else {
            continue;
        };
        let bytes = host.le_bytes();
        // Exact: the view's extent only (validation proved the host buffer holds it).
        let len = match allocation {
            Allocation::Guarded => bytes.len(),
            Allocation::Exact => inputs
                .launch()
                .view(role)
                .and_then(|v| v.required_bytes())
                .map_or(bytes.len(), |r| r.min(bytes.len())),
        };
        let mut buf = b.alloc(len.max(1))?;
        // Only borrowed bytes have an address that lasts the call (a big-endian host's
        // converted copy is made anew each time).
        let hashed = matches!(bytes, Cow::Borrowed(_)).then_some(&mut *hashed);
        fill_input(b, &mut buf, &bytes[..len], hashed)?;
        staged.push((role, buf));
    }
    let view =
        inputs
            .launch()
            .view(inputs.output_role())
            .ok_or_else(|| DeviceFault::Unsupported {
                what: "a launch without an output tensor".into(),
                device: b.name(),
            })?;
    let poison = inputs.launch().dtype.poison_bits();
    let layout = match allocation {
        Allocation::Guarded => OutputLayout::for_view(view, poison),
        Allocation::Exact => OutputLayout::exact_for_view(view, poison),
    };
    let mut output = b.alloc(layout.total_bytes().max(1))?;
    // Values put in by `prefill` (bias for beta = 1) are data; poison and guards are not.
    match prefill {
        Some(f) => fill_input(b, &mut output, &layout.initial_bytes_with(f), None)?,
        None => fill_poison(b, &mut output, &layout)?,
    }
    Ok(Staged {
        inputs: staged,
        output,
        layout,
    })
}

/// The pristine copy under `key`, uploaded by `upload` into a new buffer the first time.
fn pristine<'c, R: Runtime>(
    b: &R,
    cache: &'c mut InputCache<R::Buffer>,
    key: InputKey,
    upload: impl FnOnce(&mut R::Buffer) -> Result<(), DeviceFault>,
) -> Result<&'c R::Buffer, DeviceFault> {
    if !cache.contains(&key) {
        let mut buf = b.alloc(key.len())?;
        upload(&mut buf)?;
        return Ok(cache.insert(key, buf));
    }
    cache.get(&key).ok_or_else(|| DeviceFault::Unsupported {
        what: "a pristine copy lost between two lookups".into(),
        device: b.name(),
    })
}

/// The runtime's pristine copies, locked, where it keeps them and they would take `len` bytes.
fn cache_for<R: Runtime>(b: &R, len: usize) -> Option<MutexGuard<'_, InputCache<R::Buffer>>> {
    let cache = b
        .input_cache()?
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    cache.takes(len).then_some(cache)
}

/// Fills a launch's own input buffer: from the pristine device copy of the same bytes where
/// the runtime keeps them (the first launch uploads that copy), else from the host.
fn fill_input<R: Runtime>(
    b: &R,
    buf: &mut R::Buffer,
    bytes: &[u8],
    hashed: Option<&mut HashedSlices>,
) -> Result<(), DeviceFault> {
    let Some(mut cache) = cache_for(b, bytes.len()) else {
        return b.upload(buf, bytes);
    };
    let key = match hashed {
        Some(h) => h.key_of(bytes),
        None => InputKey::of(bytes),
    };
    let source = pristine(b, &mut cache, key, |p| b.upload(p, bytes))?;
    b.copy(buf, source, bytes.len())
}

/// Fills an output buffer with its poison and guard bands: from the pristine copy of the same
/// layout's bands where the runtime keeps them (made and uploaded once), else from the host.
fn fill_poison<R: Runtime>(
    b: &R,
    buf: &mut R::Buffer,
    layout: &OutputLayout,
) -> Result<(), DeviceFault> {
    let len = layout.total_bytes();
    let Some(mut cache) = cache_for(b, len) else {
        return b.upload_poison(buf, &layout.initial_bytes());
    };
    let fields = [layout.guard_bytes as u64, layout.payload_bytes as u64];
    let key = InputKey::described(len, &[fields[0], fields[1], u64::from(layout.poison)]);
    let source = pristine(b, &mut cache, key, |p| {
        b.upload_poison(p, &layout.initial_bytes())
    })?;
    b.copy(buf, source, len)
}

pub(crate) fn packed_for<R: Runtime>(
    b: &R,
    kernel: &KernelDecl,
    inputs: &DeviceInputs<'_>,
    s: &Staged<R>,
) -> Result<PackedArgs, DeviceFault> {
    let out_role = inputs.output_role();
    let out_base = b.address(&s.output) + s.layout.base_offset() as u64;
    let address = |role: TensorRole| -> u64 {
        if role == out_role {
            out_base
        } else {
            s.buffer(role).map_or(0, |buf| b.address(buf))
        }
    };
    pack_args(kernel, inputs.validated(), &address).map_err(|_| DeviceFault::WrongKernel {
        kernel: kernel.id,
        validated: inputs.kernel(),
    })
}

pub(crate) fn geometry_for<R: Runtime>(
    b: &R,
    kernel: &KernelDecl,
    shape: &LaunchShape,
) -> LaunchGeometry {
    (kernel.geometry)(shape, b.target())
}

pub(crate) fn run_kernel<R: Runtime>(
    b: &R,
    kernel: &KernelDecl,
    entry: &str,
    inputs: &DeviceInputs<'_>,
) -> Result<OutputReport, DeviceFault> {
    let (staged, mut spans) = launch_synchronized(b, kernel, entry, inputs)?;
    let report = download_inspect(b, &staged, &mut spans)?;
    spans.print(entry);
    Ok(report)
}

/// Stages, launches and synchronises: the output is left on the device.
pub(crate) fn launch_synchronized<R: Runtime>(
    b: &R,
    kernel: &KernelDecl,
    entry: &str,
    inputs: &DeviceInputs<'_>,
) -> Result<(Staged<R>, LaunchSpans), DeviceFault> {
    check_ready(b, kernel, inputs)?;
    if kernel.source_file.is_none() {
        return Err(DeviceFault::Unsupported {
            what: format!(
                "{} as a kernel launch (it runs in the vendor BLAS)",
                kernel.id
            ),
            device: b.name(),
        });
    }
    let mut spans = LaunchSpans::start();
    let staged = stage(b, inputs, None)?;
    spans.mark("stage");
    let args = packed_for(b, kernel, inputs, &staged)?;
    let geometry = geometry_for(b, kernel, &inputs.validated().shape);
    b.launch(kernel, entry, &geometry, &args)?;
    spans.mark("enqueue");
    b.synchronize(&format!("{entry} ({})", kernel.id))?;
    spans.mark("sync");
    Ok((staged, spans))
}

/// The output brought back and read through its layout.
pub(crate) fn download_inspect<R: Runtime>(
    b: &R,
    staged: &Staged<R>,
    spans: &mut LaunchSpans,
) -> Result<OutputReport, DeviceFault> {
    let bytes = b.download(&staged.output)?;
    spans.mark("download");
    let report = staged.layout.inspect(&bytes);
    spans.mark("inspect");
    Ok(report)
}

/// Whether the staged output is byte for byte the buffer a kernel that wrote exactly
/// `payload` leaves, compared on the device; `None` where the runtime cannot compare there.
/// The expected buffer is kept as a pristine copy where the runtime keeps them (a layer's
/// batch sizes expect the same one).
pub(crate) fn output_is<R: Runtime>(
    b: &R,
    staged: &Staged<R>,
    payload: &[u16],
) -> Result<Option<bool>, DeviceFault> {
    if !b.compares_on_device() {
        return Ok(None);
    }
    let layout = &staged.layout;
    let len = layout.total_bytes();
    if payload.len() != layout.payload_bytes / 2 {
        return Ok(Some(false));
    }
    let upload = |p: &mut R::Buffer| b.upload(p, &layout.bytes_with_payload(payload));
    let Some(mut cache) = cache_for(b, len) else {
        let mut expected = b.alloc(len)?;
        upload(&mut expected)?;
        return b.same_bytes(&staged.output, &expected, len).map(Some);
    };
    let content = InputKey::hash_u16(payload);
    let fields = [
        layout.guard_bytes as u64,
        layout.payload_bytes as u64,
        u64::from(layout.poison),
        content as u64,
        (content >> 64) as u64,
    ];
    let key = InputKey::described(len, &fields);
    let expected = pristine(b, &mut cache, key, upload)?;
    b.same_bytes(&staged.output, expected, len).map(Some)
}

/// `W4A16_LAUNCH_SPANS` set: one line per checked launch on stderr saying where its time went
/// (staging the inputs, the enqueue with a first use's compile and load, the kernel, the
/// download, the guard inspection), to find what a suite's device time is made of.
pub(crate) struct LaunchSpans {
    last: Option<std::time::Instant>,
    parts: Vec<(&'static str, f64)>,
}

impl LaunchSpans {
    fn start() -> Self {
        let on = std::env::var_os("W4A16_LAUNCH_SPANS").is_some();
        LaunchSpans {
            last: on.then(std::time::Instant::now),
            parts: Vec::new(),
        }
    }

    pub(crate) fn mark(&mut self, part: &'static str) {
        if let Some(last) = self.last {
            let now = std::time::Instant::now();
            self.parts.push((part, (now - last).as_secs_f64() * 1e3));
            self.last = Some(now);
        }
    }

    pub(crate) fn print(&self, entry: &str) {
        if self.last.is_some() {
            let parts: Vec<String> = self
                .parts
                .iter()
                .map(|(p, ms)| format!("{p} {ms:.2}"))
                .collect();
            eprintln!("launch-spans {entry} ms: {}", parts.join(", "));
        }
    }
}

/// The BLAS call for a launch validated against the dense declaration.
pub(crate) fn blas_for(inputs: &DeviceInputs<'_>) -> Result<BlasGemm, DeviceFault> {
    let li = inputs.launch();
    let v = inputs.validated();
    let lead = |role: TensorRole| li.view(role).and_then(|t| t.strides.first().copied());
    let missing = |what: &str| DeviceFault::Unsupported {
        what: format!("a dense GEMM without {what}"),
        device: "any device".into(),
    };
    let offset = |role: TensorRole| li.view(role).map_or(0, |t| t.byte_offset);
    // The validated stride arguments are the leading dimensions; the views only back them up.
    let ld =
        |scalar: ScalarArg, role: TensorRole| v.scalar(scalar).map(|s| s as usize).or(lead(role));
    Ok(BlasGemm {
        m: li.m,
        n: li.n,
        k: li.k,
        dtype: li.dtype,
        x_ld: ld(ScalarArg::XRowStride, TensorRole::X).ok_or_else(|| missing("x"))?,
        dense_ld: ld(ScalarArg::DenseRowStride, TensorRole::Dense)
            .ok_or_else(|| missing("the dense copy"))?,
        y_ld: ld(ScalarArg::YRowStride, TensorRole::Y).ok_or_else(|| missing("y"))?,
        x_offset: offset(TensorRole::X),
        dense_offset: offset(TensorRole::Dense),
        y_offset: offset(TensorRole::Y),
        beta: if li.bias.is_some() { 1.0 } else { 0.0 },
    })
}

/// Y prefilled with the broadcast bias, so that `beta = 1` adds it inside the BLAS epilogue.
/// Where that epilogue rounds is the vendor's choice (before or after adding C), so the dense
/// path declares `BiasStage::Either` (`dense_recipe` in kernels/src/set.rs says why).
pub(crate) fn bias_prefill<'a>(
    inputs: &'a DeviceInputs<'_>,
) -> Option<impl Fn(usize, usize) -> Option<u16> + 'a> {
    let bias = inputs.host(TensorRole::Bias)?;
    let bytes = bias.le_bytes().into_owned();
    Some(move |_r: usize, c: usize| {
        bytes
            .get(2 * c..2 * c + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    })
}

pub(crate) fn run_blas<R: Runtime>(
    b: &R,
    kernel: &KernelDecl,
    inputs: &DeviceInputs<'_>,
    hashed: &mut HashedSlices,
) -> Result<(Staged<R>, BlasGemm), DeviceFault> {
    check_ready(b, kernel, inputs)?;
    let g = blas_for(inputs)?;
    let prefill = bias_prefill(inputs);
    let prefill = prefill
        .as_ref()
        .map(|f| f as &dyn Fn(usize, usize) -> Option<u16>);
    let staged = stage_hashed(b, inputs, prefill, hashed)?;
    Ok((staged, g))
}

pub(crate) fn blas_operands<'s, R: Runtime>(
    inputs: &'s [(TensorRole, R::Buffer)],
    b: &R,
) -> Result<(&'s R::Buffer, &'s R::Buffer), DeviceFault> {
    let find = |role: TensorRole| inputs.iter().find(|(r, _)| *r == role).map(|(_, buf)| buf);
    let missing = |what: &str| DeviceFault::Unsupported {
        what: format!("a dense GEMM without {what}"),
        device: b.name(),
    };
    Ok((
        find(TensorRole::X).ok_or_else(|| missing("x"))?,
        find(TensorRole::Dense).ok_or_else(|| missing("the dense copy"))?,
    ))
}

/// The output offset inside the guarded buffer is added to Y's own view offset.
pub(crate) fn with_guard_offset(g: &BlasGemm, layout: &OutputLayout) -> BlasGemm {
    BlasGemm {
        y_offset: layout.base_offset() + g.y_offset,
        ..*g
    }
}
