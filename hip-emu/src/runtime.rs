//! The emulated device and everything the HIP calls act on: its bounded memory (the ISA
//! emulator's), streams, events, modules and functions, the model clock, and the sticky error
//! a faulted kernel leaves.
//!
//! **Ordering.** Work enqueued on a stream (an async copy, a launch, an event record) runs to its
//! end before the call returns. That is one valid schedule of HIP's stream semantics (work on a
//! stream completes in order, at some time after it is enqueued), so a correct caller sees the
//! same results; what it cannot show is a caller that forgets to synchronise. A kernel's fault is
//! nevertheless reported the way a GPU reports it: the launch returns `hipSuccess`, and the
//! fault is returned by the next call that waits on or touches the device (hipEventQuery,
//! hipMemcpy, …) and by every call after it (a sticky error).
//!
//! **The clock.** Events read the emulator's own model clock, not the host's and not a GPU's: a
//! launch advances it by its wave instructions at the declared machine's issue rate (wave32
//! VALU issues per CU per clock × CUs × clock, `w4a16_emu::machine`), a copy by its bytes at the
//! declared memory bandwidth. Elapsed times are therefore deterministic model figures.

use std::collections::{HashMap, HashSet};

use w4a16_emu::dispatch::{self, Dims, Limits, Schedule};
use w4a16_emu::fault::FaultKind;
use w4a16_emu::machine::Machine;
use w4a16_emu::memory::GlobalMemory;

use crate::error::{HipError, HipResult, from_fault};
use crate::module::Module;

/// Environment variable choosing the emulated target (`gfx1100`, `gfx1151`, `gfx1201`).
pub const TARGET_ENV: &str = "W4A16_HIP_EMU_TARGET";
/// Environment variable bounding the device memory, in MiB.
pub const MEMORY_ENV: &str = "W4A16_HIP_EMU_MEMORY_MIB";
/// The target without `W4A16_HIP_EMU_TARGET`.
pub const DEFAULT_TARGET: &str = "gfx1151";
/// The memory bound without `W4A16_HIP_EMU_MEMORY_MIB`: 4 GiB, far above any case the emulator's
/// MAC budget lets through, far below what the host can back.
pub const DEFAULT_MEMORY_MIB: usize = 4096;

/// `hipMemcpyKind`.
pub const HOST_TO_HOST: i32 = 0;
pub const HOST_TO_DEVICE: i32 = 1;
pub const DEVICE_TO_HOST: i32 = 2;
pub const DEVICE_TO_DEVICE: i32 = 3;
pub const DEFAULT: i32 = 4;

/// The emulated device (there is one: ordinal 0).
pub struct Runtime {
    pub machine: &'static Machine,
    pub memory_bytes: usize,
    memory: GlobalMemory,
    /// Bytes of every live allocation, by base.
    allocated: HashMap<u64, usize>,
    streams: HashSet<usize>,
    /// Each event's time on the model clock once recorded (ns).
    events: HashMap<usize, Option<f64>>,
    modules: HashMap<usize, Module>,
    /// Function handle → (module handle, kernel name).
    functions: HashMap<usize, (usize, String)>,
    next_handle: usize,
    clock_ns: f64,
    sticky: Option<HipError>,
    /// Launches per kernel: they alternate between two schedules, as on the emulator device, so
    /// a launch repeated at once runs under the other order.
    launches: HashMap<String, u64>,
}

/// The target and memory bound from the environment; a bad value is `NoDevice`, naming it.
pub fn configured() -> HipResult<(&'static Machine, usize)> {
    let target = std::env::var(TARGET_ENV).ok();
    let memory = std::env::var(MEMORY_ENV).ok();
    configured_from(target.as_deref(), memory.as_deref())
}

/// [`configured`] from the two variables' values (`None`: unset).
pub fn configured_from(
    target: Option<&str>,
    memory_mib: Option<&str>,
) -> HipResult<(&'static Machine, usize)> {
    let gfx = target.unwrap_or(DEFAULT_TARGET).trim();
    let machine = Machine::of(gfx).ok_or_else(|| {
        HipError::NoDevice(format!(
            "{TARGET_ENV}={gfx}: the emulated runtime runs gfx1100, gfx1151 or gfx1201"
        ))
    })?;
    let mib = match memory_mib {
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|m| *m > 0)
            .ok_or_else(|| {
                HipError::NoDevice(format!("{MEMORY_ENV}={v}: not a positive number of MiB"))
            })?,
        None => DEFAULT_MEMORY_MIB,
    };
    Ok((machine, mib << 20))
}

impl Runtime {
    pub fn new(machine: &'static Machine, memory_bytes: usize) -> Runtime {
        Runtime {
            machine,
            memory_bytes,
            memory: GlobalMemory::default(),
            allocated: HashMap::new(),
            streams: HashSet::new(),
            events: HashMap::new(),
            modules: HashMap::new(),
            functions: HashMap::new(),
            next_handle: 0x1000,
            clock_ns: 0.0,
            sticky: None,
            launches: HashMap::new(),
        }
    }

    fn handle(&mut self) -> usize {
        self.next_handle += 0x10;
        self.next_handle
    }

    /// The sticky error, if a kernel faulted: every call touching the device returns it.
    pub fn healthy(&self) -> HipResult<()> {
        self.sticky.clone().map_or(Ok(()), Err)
    }

    /// `stream` is the null stream or one created here.
    pub(crate) fn stream(&self, stream: usize) -> HipResult<()> {
        if stream == 0 || self.streams.contains(&stream) {
            Ok(())
        } else {
            Err(HipError::InvalidHandle(format!(
                "stream {stream:#x} was not created by hipStreamCreate (or was destroyed)"
            )))
        }
    }

    pub fn malloc(&mut self, bytes: usize) -> HipResult<u64> {
        self.healthy()?;
        if bytes == 0 {
            return Ok(0);
        }
        let used: usize = self.allocated.values().sum();
        if used.saturating_add(bytes) > self.memory_bytes {
            return Err(HipError::OutOfMemory(format!(
                "{bytes} B asked, {used} of the emulated device's {} B in use",
                self.memory_bytes
            )));
        }
        let base = self.memory.alloc(bytes, format!("hipMalloc({bytes})"));
        self.allocated.insert(base, bytes);
        Ok(base)
    }

    pub fn free(&mut self, base: u64) -> HipResult<()> {
        if base == 0 {
            return Ok(());
        }
        self.healthy()?;
        if self.allocated.remove(&base).is_none() {
            return Err(HipError::InvalidDevicePointer(format!(
                "{base:#x} is not an address hipMalloc returned (or it was freed)"
            )));
        }
        self.memory.free(base);
        Ok(())
    }

    /// Whether every byte of `[address, address + len)` lies in one live allocation.
    fn on_device(&self, address: u64, len: usize) -> bool {
        self.memory.holding(address, len.max(1)).is_some()
    }

    fn device_range(&self, what: &str, address: u64, len: usize) -> HipResult<()> {
        if self.on_device(address, len) {
            Ok(())
        } else {
            Err(HipError::InvalidValue(format!(
                "{what} [{address:#x}, +{len} B) is not inside one device allocation"
            )))
        }
    }

    /// Advances the model clock by moving `bytes` at the declared bandwidth (a copy; the hipBLAS
    /// stand-in's GEMM, by its operands' bytes).
    pub(crate) fn advance_copy(&mut self, bytes: usize) {
        self.clock_ns += bytes as f64 / (self.machine.memory_gbps.value * 1e9) * 1e9;
    }

    /// The `len` bytes at `address` when they lie in one live allocation (the hipBLAS stand-in
    /// reads its operands so), else the emulator's out-of-bounds text naming the nearest one.
    pub(crate) fn device_bytes(&self, address: u64, len: usize) -> Result<Vec<u8>, FaultKind> {
        let mut out = vec![0u8; len];
        if len > 0 {
            self.memory.read(address, &mut out, 0)?;
        }
        Ok(out)
    }

    /// Writes `data` at `address`, which must lie in one live allocation.
    pub(crate) fn write_device_bytes(&mut self, address: u64, data: &[u8]) -> HipResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.memory
            .write(address, data, 0)
            .map_err(|e| HipError::InvalidValue(e.to_string()))
    }

    /// The device faults: `error` is logged as a GPU driver logs a page fault and returned by
    /// every later call that touches the device (sticky).
    pub(crate) fn fault(&mut self, error: HipError) {
        eprintln!("w4a16-hip-emu: device fault, the device is unusable from here: {error}");
        self.sticky = Some(error);
    }

    /// A copy of `len` bytes in direction `kind`, host sides as raw pointers.
    ///
    /// # Safety
    /// A host side must be valid for `len` bytes (read for the source, write for the
    /// destination), as HIP demands.
    pub unsafe fn memcpy(&mut self, dst: u64, src: u64, len: usize, kind: i32) -> HipResult<()> {
        self.healthy()?;
        if !(HOST_TO_HOST..=DEFAULT).contains(&kind) {
            return Err(HipError::InvalidMemcpyDirection(format!(
                "hipMemcpyKind {kind} (0..=4)"
            )));
        }
        if len == 0 {
            return Ok(());
        }
        if dst == 0 || src == 0 {
            return Err(HipError::InvalidValue(format!(
                "a null pointer in a {len}-byte copy"
            )));
        }
        let kind = match kind {
            // hipMemcpyDefault: the direction follows from where each pointer lives.
            DEFAULT => match (self.on_device(dst, len), self.on_device(src, len)) {
                (false, false) => HOST_TO_HOST,
                (true, false) => HOST_TO_DEVICE,
                (false, true) => DEVICE_TO_HOST,
                (true, true) => DEVICE_TO_DEVICE,
            },
            k => k,
        };
        let oob = |e: w4a16_emu::fault::FaultKind| HipError::InvalidValue(e.to_string());
        match kind {
            HOST_TO_HOST => {
                // SAFETY: both host ranges valid for `len` (caller); `copy` allows overlap.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
            }
            HOST_TO_DEVICE => {
                self.device_range("the destination", dst, len)?;
                // SAFETY: the source is a host range of `len` bytes (caller).
                let data = unsafe { std::slice::from_raw_parts(src as *const u8, len) };
                self.memory.write(dst, data, 0).map_err(oob)?;
            }
            DEVICE_TO_HOST => {
                self.device_range("the source", src, len)?;
                // SAFETY: the destination is a host range of `len` bytes (caller).
                let out = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, len) };
                self.memory.read(src, out, 0).map_err(oob)?;
            }
            _ => {
                self.device_range("the source", src, len)?;
                self.device_range("the destination", dst, len)?;
                self.memory.copy(dst, src, len).map_err(oob)?;
            }
        }
        self.advance_copy(len);
        Ok(())
    }

    /// [`Runtime::memcpy`] enqueued on `stream` (run now: see the module docs).
    ///
    /// # Safety
    /// As [`Runtime::memcpy`].
    pub unsafe fn memcpy_async(
        &mut self,
        dst: u64,
        src: u64,
        len: usize,
        kind: i32,
        stream: usize,
    ) -> HipResult<()> {
        self.healthy()?;
        self.stream(stream)?;
        // SAFETY: forwarded from the caller.
        unsafe { self.memcpy(dst, src, len, kind) }
    }

    pub fn stream_create(&mut self) -> HipResult<usize> {
        self.healthy()?;
        let h = self.handle();
        self.streams.insert(h);
        Ok(h)
    }

    pub fn stream_destroy(&mut self, stream: usize) -> HipResult<()> {
        if stream == 0 || !self.streams.remove(&stream) {
            return Err(HipError::InvalidHandle(format!(
                "stream {stream:#x} was not created by hipStreamCreate (or was destroyed)"
            )));
        }
        Ok(())
    }

    pub fn event_create(&mut self) -> HipResult<usize> {
        self.healthy()?;
        let h = self.handle();
        self.events.insert(h, None);
        Ok(h)
    }

    fn event(&self, event: usize) -> HipResult<Option<f64>> {
        self.events.get(&event).copied().ok_or_else(|| {
            HipError::InvalidHandle(format!(
                "event {event:#x} was not created by hipEventCreate (or was destroyed)"
            ))
        })
    }

    pub fn event_record(&mut self, event: usize, stream: usize) -> HipResult<()> {
        self.event(event)?;
        self.stream(stream)?;
        self.healthy()?;
        self.events.insert(event, Some(self.clock_ns));
        Ok(())
    }

    /// Everything before the event has run (see the module docs), unless a kernel faulted.
    pub fn event_query(&self, event: usize) -> HipResult<()> {
        self.event(event)?;
        self.healthy()
    }

    /// Milliseconds between two recorded events on the model clock.
    pub fn event_elapsed(&self, start: usize, end: usize) -> HipResult<f32> {
        let (a, b) = (self.event(start)?, self.event(end)?);
        self.healthy()?;
        match (a, b) {
            (Some(a), Some(b)) => Ok(((b - a) / 1e6) as f32),
            _ => Err(HipError::InvalidHandle(
                "hipEventElapsedTime of an event that was never recorded".into(),
            )),
        }
    }

    pub fn event_destroy(&mut self, event: usize) -> HipResult<()> {
        self.event(event)?;
        self.events.remove(&event);
        Ok(())
    }

    pub fn module_load(&mut self, bytes: &[u8]) -> HipResult<usize> {
        self.healthy()?;
        let module = crate::module::load(bytes, self.machine.gfx)?;
        let h = self.handle();
        self.modules.insert(h, module);
        Ok(h)
    }

    /// Unloads a module; its functions become invalid handles.
    pub fn module_unload(&mut self, module: usize) -> HipResult<()> {
        if self.modules.remove(&module).is_none() {
            return Err(HipError::InvalidHandle(format!(
                "module {module:#x} was not loaded by hipModuleLoadData (or was unloaded)"
            )));
        }
        self.functions.retain(|_, (m, _)| *m != module);
        Ok(())
    }

    pub fn module_function(&mut self, module: usize, name: &str) -> HipResult<usize> {
        self.healthy()?;
        let m = self.modules.get(&module).ok_or_else(|| {
            HipError::InvalidHandle(format!(
                "module {module:#x} was not loaded by hipModuleLoadData (or was unloaded)"
            ))
        })?;
        if m.program.kernel(name).is_none() || m.info.kernel(name).is_none() {
            return Err(HipError::NotFound(format!(
                "no kernel `{name}` in the module"
            )));
        }
        if let Some((h, _)) = self
            .functions
            .iter()
            .find(|(_, (mm, n))| *mm == module && n == name)
        {
            return Ok(*h);
        }
        let h = self.handle();
        self.functions.insert(h, (module, name.to_string()));
        Ok(h)
    }

    /// Validates and runs a launch (see `launch.rs`); the argument bytes come from `args`,
    /// which reads them once the kernel's metadata is known.
    pub fn launch(
        &mut self,
        function: usize,
        dims: &Dims,
        stream: usize,
        args: impl FnOnce(&w4a16_codeobject::KernelInfo) -> HipResult<Vec<u8>>,
    ) -> HipResult<()> {
        self.healthy()?;
        self.stream(stream)?;
        let (module, name) = self.functions.get(&function).cloned().ok_or_else(|| {
            HipError::InvalidHandle(format!(
                "function {function:#x} was not returned by hipModuleGetFunction (or its module was unloaded)"
            ))
        })?;
        let m = &self.modules[&module];
        let (kernel, info) = match (m.program.kernel(&name), m.info.kernel(&name)) {
            (Some(k), Some(i)) => (k, i),
            _ => return Err(HipError::NotFound(format!("no kernel `{name}`"))),
        };
        crate::launch::check_geometry(kernel, info, self.machine.gfx, dims)?;
        let explicit = args(info)?;
        let count = self.launches.entry(name.clone()).or_insert(0);
        let limits = Limits {
            schedule: if (*count).is_multiple_of(2) {
                Schedule::IN_ORDER
            } else {
                Schedule::INTERLEAVED
            },
            ..Limits::default()
        };
        *count += 1;
        let at = w4a16_emu::kernarg::place(&mut self.memory, kernel, &explicit, dims)
            .map_err(|e| HipError::InvalidValue(format!("kernel arguments of {name}: {e}")))?;
        let run = dispatch::launch_with(
            kernel,
            dims,
            at,
            &mut self.memory,
            &limits,
            dispatch::Watch::default(),
        );
        self.memory.free(at);
        match run {
            Ok(stats) => {
                let m = self.machine;
                let issue_per_s = m.valu_wave_insts_per_cu_clk.value
                    * m.compute_units.value
                    * m.clock_mhz.value
                    * 1e6;
                self.clock_ns += stats.wave_instructions as f64 / issue_per_s * 1e9;
                Ok(())
            }
            Err(fault) => {
                // As a GPU driver logs a page fault: the runtime's own line on stderr.
                self.fault(from_fault(&fault));
                Ok(())
            }
        }
    }
}
