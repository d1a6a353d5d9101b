//! The ISA emulator as a device: the target's clang-built gfx11/gfx12 code objects, the machine
//! code that runs on the users' GPUs, executed on the host by `w4a16-emu`. Buffers live in the
//! emulator's bounded memory, each at exactly its size ([`Allocation::Exact`]), so any access
//! outside a tensor, a read included, stops the launch with the kernel, instruction, lane and
//! address. The dense path's vendor GEMM is a host stand-in (`blas::host_gemm_ex`) and named as
//! such in the device's name; there is no timing: benchmarks skip, saying so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use w4a16_emu::blocks::Executed;
use w4a16_emu::counters::{Counters, TargetLimits};
use w4a16_emu::dispatch::{self, Dims, Limits, Schedule};
use w4a16_emu::lines::LineTable;
use w4a16_emu::memory::GlobalMemory;
use w4a16_emu::program::{KernelMeta, Program};
use w4a16_emu::sanitize::Sanitizer;
use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{KernelDecl, KernelId, Target};

use crate::amd_code::code_object_for;
use crate::block_coverage::{BlockCoverage, from_program};
use crate::launch::PackedArgs;
use crate::sanitize::EmuSanitizer;
use crate::{
    Allocation, BlasGemm, Capability, DeviceFault, DeviceInfo, DeviceKind, EmulatorWork, Health,
    LaunchCounters, ReferenceOffload, Runtime, SanitizerReport,
};
use w4a16_codeobject::{self as codeobject, abi};
use w4a16_require::{Requirement, Skip};

/// A stopped launch as a device fault: an instruction the emulator lacks is a missing
/// capability (the case skips naming it); anything else is the machine code's fault.
fn machine_fault(fault: w4a16_emu::fault::Fault) -> DeviceFault {
    use w4a16_emu::fault::FaultKind;
    match &fault.kind {
        FaultKind::UnknownInstruction { mnemonic } => DeviceFault::MissingCapability {
            capability: Capability::EmulatorInstruction,
            device: "the ISA emulator".into(),
            why: format!("`{mnemonic}` at {:#x} in {}", fault.at, fault.kernel),
        },
        kind => DeviceFault::MachineCode {
            kernel: fault.kernel.clone(),
            at: fault.at,
            inst: fault.inst.clone(),
            detail: format!(
                "{kind} (workgroup {:?}, wave {})",
                fault.workgroup, fault.wave
            ),
        },
    }
}

/// Waves per SIMD the launch's VGPRs, LDS and workgroup size allow on `target` (0 for a
/// target without declared limits).
fn occupancy(target: Target, k: &w4a16_emu::program::Kernel, dims: &Dims) -> u64 {
    let threads: u64 = dims.block.iter().map(|&b| u64::from(b)).product();
    let lds = u64::from(k.descriptor.group_segment_fixed_size) + u64::from(dims.dynamic_lds);
    TargetLimits::of(target.name()).map_or(0, |t| {
        t.occupancy(u64::from(k.meta.vgpr_count), lds, threads.div_ceil(32))
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A buffer in the emulator's memory; freed on drop.
pub struct EmuBuffer {
    base: u64,
    memory: Arc<Mutex<GlobalMemory>>,
}

impl Drop for EmuBuffer {
    fn drop(&mut self) {
        lock(&self.memory).free(self.base);
    }
}

/// The ISA emulator as the device of one gfx target.
pub struct EmuDevice {
    target: Target,
    sources: KernelSources,
    memory: Arc<Mutex<GlobalMemory>>,
    /// Loaded code objects by kernel, not by source file: `fused` and `fused_carrier` are one
    /// source built twice (with and without its switch), two code objects.
    programs: Mutex<HashMap<KernelId, Loaded>>,
    /// Entries whose launch ABI has been checked against the code object's metadata.
    abi_checked: Mutex<std::collections::HashSet<String>>,
    work: Mutex<EmulatorWork>,
    limits: Limits,
    /// With `DeviceRequest::recording_blocks`: the instructions each (code object, entry) ran
    /// since the last [`DeviceInfo::block_coverage`].
    recording: Option<Mutex<HashMap<(KernelId, String), Executed>>>,
    /// While counting: the counters of every launch since it started.
    counted: Mutex<Option<Vec<LaunchCounters>>>,
    /// The sanitizer watching every launch (its shadow kept between launches), if any.
    sanitizer: Option<(EmuSanitizer, Mutex<Sanitizer>)>,
    /// Its reports not yet taken ([`DeviceInfo::take_sanitizer_reports`]).
    reports: Mutex<Vec<SanitizerReport>>,
}

/// Opens the emulator for `target` (gfx11/gfx12 only); a target it cannot run is a skip.
/// With `sanitizer`, every launch runs under it (initcheck: global memory tracks which bytes
/// were written from the start).
pub(crate) fn open_with(
    target: Target,
    sources: KernelSources,
    record_blocks: bool,
    sanitizer: Option<EmuSanitizer>,
) -> Result<EmuDevice, Skip> {
    if w4a16_emu::inst::Gen::of_target(target.name()).is_none() {
        return Err(crate::skip(
            Requirement::AmdToolchain,
            format!("the ISA emulator runs gfx11/gfx12 code objects, not {target}"),
        ));
    }
    // What it needs from the toolchain is a skip up front, not a fault at every launch: the
    // disassembler always, and clang unless prebuilt code objects were carried here.
    if let Err(e) = w4a16_emu::program::objdump_tool() {
        return Err(crate::skip(
            Requirement::AmdToolchain,
            format!("the ISA emulator reads code objects through LLVM's disassembler: {e}"),
        ));
    }
    if let Err(e @ w4a16_kernels::amd::AmdBuildError::ToolchainMissing { .. }) =
        w4a16_kernels::amd::Builder::from_env()
    {
        let prebuilt = crate::amd_code::prebuilt_dir(target);
        if sources != KernelSources::Embedded || !prebuilt.is_dir() {
            return Err(crate::skip(
                Requirement::AmdToolchain,
                format!(
                    "no code objects for {target}: {e}, and no prebuilt ones in {}",
                    prebuilt.display()
                ),
            ));
        }
    }
    let mut memory = GlobalMemory::default();
    if sanitizer == Some(EmuSanitizer::Initcheck) {
        memory.track_initialisation();
    }
    Ok(EmuDevice {
        target,
        sources,
        memory: Arc::new(Mutex::new(memory)),
        programs: Mutex::new(HashMap::new()),
        abi_checked: Mutex::new(std::collections::HashSet::new()),
        work: Mutex::new(EmulatorWork::default()),
        limits: Limits::default(),
        recording: record_blocks.then(|| Mutex::new(HashMap::new())),
        counted: Mutex::new(None),
        sanitizer: sanitizer.map(|t| (t, Mutex::new(Sanitizer::new(t.into())))),
        reports: Mutex::new(Vec::new()),
    })
}

impl EmuDevice {
    /// The program holding `entry`, loaded once per code object; `entry`'s launch ABI is checked
    /// against the metadata once per entry (as the ROCm backend does before a launch).
    fn program(&self, kernel: &KernelDecl, entry: &str) -> Result<Arc<Program>, DeviceFault> {
        let loaded = self.load(kernel)?;
        if !lock(&self.abi_checked).contains(entry) {
            let refused = |code: &str, detail: String| DeviceFault::Launch {
                kernel: entry.to_string(),
                code: code.to_string(),
                detail,
            };
            let k = loaded.info.kernel(entry).ok_or_else(|| {
                refused(
                    "entry point not found",
                    format!("no kernel {entry} in its code object"),
                )
            })?;
            abi::check(entry, self.target.name(), kernel.args, k)
                .map_err(|e| refused("launch ABI mismatch", e.to_string()))?;
            lock(&self.abi_checked).insert(entry.to_string());
        }
        Ok(loaded.program)
    }

    fn load(&self, kernel: &KernelDecl) -> Result<Loaded, DeviceFault> {
        let file = kernel.source_file.ok_or_else(|| DeviceFault::Unsupported {
            what: format!("a kernel launch of {} (it has no source file)", kernel.id),
            device: self.name(),
        })?;
        if let Some(l) = lock(&self.programs).get(&kernel.id) {
            return Ok(l.clone());
        }
        let path = code_object_for(kernel, self.target, &self.sources)?;
        let compile_fault = |log: String| DeviceFault::Compile {
            source_file: file.to_string(),
            arch: self.target.name().to_string(),
            log,
        };
        let info = codeobject::read(&path)
            .map_err(|e| compile_fault(format!("{}: {e}", path.display())))?;
        let meta = |name: &str| KernelMeta::of(&info, name);
        let program = Program::load(&path, self.target.name(), meta)
            .map_err(|e| compile_fault(e.to_string()))?;
        let loaded = Loaded {
            program: Arc::new(program),
            info: Arc::new(info),
        };
        lock(&self.programs).insert(kernel.id, loaded.clone());
        Ok(loaded)
    }
}

impl EmuDevice {
    /// Every code object of the target (loaded now if no launch needed it), its entries'
    /// blocks marked as `recording` ran them; the recording starts again empty.
    fn blocks(
        &self,
        recording: &Mutex<HashMap<(KernelId, String), Executed>>,
    ) -> Result<BlockCoverage, DeviceFault> {
        let mut ran = std::mem::take(&mut *lock(recording));
        let mut coverage = BlockCoverage {
            target: self.target.name().to_string(),
            code_objects: Vec::new(),
        };
        for decl in w4a16_kernels::set::all() {
            if decl.source_file.is_none() {
                continue;
            }
            let loaded = self.load(decl)?;
            let path = &loaded.program.path;
            let lines = std::fs::read(path)
                .map_err(|e| e.to_string())
                .and_then(|elf| LineTable::read(&elf).map_err(|e| e.to_string()))
                .map_err(|e| DeviceFault::Call {
                    during: format!("reading the line table of {}", path.display()),
                    code: e,
                })?;
            coverage.code_objects.push(from_program::code_object(
                decl.id.name(),
                &loaded.program,
                &lines,
                |entry| ran.remove(&(decl.id, entry.to_string())),
            ));
        }
        Ok(coverage)
    }
}

/// A code object as the emulator runs it, with the metadata its launches are checked against.
#[derive(Clone)]
struct Loaded {
    program: Arc<Program>,
    info: Arc<codeobject::CodeObjectInfo>,
}

impl DeviceInfo for EmuDevice {
    fn emulator_work(&self) -> Option<EmulatorWork> {
        Some(lock(&self.work).clone())
    }

    fn block_coverage(&self) -> Option<Result<BlockCoverage, DeviceFault>> {
        let recording = self.recording.as_ref()?;
        Some(self.blocks(recording))
    }

    fn count_launches(&self, on: bool) -> bool {
        *lock(&self.counted) = on.then(Vec::new);
        true
    }

    fn take_launch_counters(&self) -> Vec<LaunchCounters> {
        lock(&self.counted)
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn target(&self) -> Target {
        self.target
    }

    fn name(&self) -> String {
        format!(
            "the ISA emulator ({}; dense GEMM by a host stand-in for the vendor BLAS)",
            self.target
        )
    }

    fn health(&self) -> Health {
        Health::Ok
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Emulator
    }

    fn allocation(&self) -> Allocation {
        Allocation::Exact
    }

    fn emu_sanitizer(&self) -> Option<EmuSanitizer> {
        self.sanitizer.as_ref().map(|(t, _)| *t)
    }

    fn take_sanitizer_reports(&self) -> Vec<SanitizerReport> {
        std::mem::take(&mut *lock(&self.reports))
    }
}

impl ReferenceOffload for EmuDevice {}

impl Runtime for EmuDevice {
    type Buffer = EmuBuffer;

    type Event = Instant;

    fn alloc(&self, bytes: usize) -> Result<EmuBuffer, DeviceFault> {
        let base = lock(&self.memory).alloc(bytes, format!("{bytes} B buffer"));
        Ok(EmuBuffer {
            base,
            memory: self.memory.clone(),
        })
    }

    fn address(&self, buf: &EmuBuffer) -> u64 {
        buf.base
    }

    fn upload_poison(&self, dst: &mut EmuBuffer, src: &[u8]) -> Result<(), DeviceFault> {
        lock(&self.memory)
            .write_uninitialised(dst.base, src)
            .map_err(|e| DeviceFault::Call {
                during: "upload".into(),
                code: e.to_string(),
            })
    }

    fn upload(&self, dst: &mut EmuBuffer, src: &[u8]) -> Result<(), DeviceFault> {
        lock(&self.memory)
            .write(dst.base, src, 0)
            .map_err(|e| DeviceFault::Call {
                during: "upload".into(),
                code: e.to_string(),
            })
    }

    fn download(&self, src: &EmuBuffer) -> Result<Vec<u8>, DeviceFault> {
        let m = lock(&self.memory);
        m.allocation(src.base)
            .map(|a| a.bytes.clone())
            .ok_or_else(|| DeviceFault::Call {
                during: "download".into(),
                code: format!("no allocation at {:#x}", src.base),
            })
    }

    fn copy(&self, dst: &mut EmuBuffer, src: &EmuBuffer, bytes: usize) -> Result<(), DeviceFault> {
        let mut m = lock(&self.memory);
        m.copy(dst.base, src.base, bytes)
            .map_err(|e| DeviceFault::Call {
                during: "device copy".into(),
                code: e.to_string(),
            })
    }

    fn launch(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        args: &PackedArgs,
    ) -> Result<(), DeviceFault> {
        let program = self.program(kernel, entry)?;
        let refused = |code: &str, detail: String| DeviceFault::Launch {
            kernel: entry.to_string(),
            code: code.to_string(),
            detail,
        };
        let k = program
            .kernel(entry)
            .ok_or_else(|| refused("entry point not found", format!("no kernel {entry}")))?;
        let dims = Dims {
            grid: geometry.grid,
            block: geometry.block,
            dynamic_lds: geometry.shared_mem_bytes,
        };
        // Each entry's launches alternate between two schedules, so a launch repeated at once
        // (the harness's determinism check) runs under the other one: a result that depends on
        // the order of workgroups or waves shows as a difference, as it would on hardware.
        let launched = lock(&self.work)
            .per_kernel
            .get(entry)
            .map_or(0, |w| w.launches);
        let limits = Limits {
            schedule: match launched % 2 {
                0 => Schedule::IN_ORDER,
                _ => Schedule::INTERLEAVED,
            },
            ..self.limits
        };
        let started = Instant::now();
        let mut memory = lock(&self.memory);
        let at = w4a16_emu::kernarg::place(&mut memory, k, &args.bytes, &dims)
            .map_err(|e| refused("kernel arguments", e.to_string()))?;
        let mut counters = lock(&self.counted).is_some().then(Counters::default);
        let key = (kernel.id, entry.to_string());
        let mut executed = self
            .recording
            .as_ref()
            .map(|r| lock(r).remove(&key).unwrap_or_else(|| Executed::new(k)));
        let mut sanitizer = self.sanitizer.as_ref().map(|(_, s)| lock(s));
        let watch = dispatch::Watch {
            executed: executed.as_mut(),
            counters: counters.as_mut(),
            sanitizer: sanitizer.as_deref_mut(),
        };
        let run = dispatch::launch_with(k, &dims, at, &mut memory, &limits, watch);
        if let Some(s) = sanitizer.as_deref_mut() {
            // As compute-sanitizer: the findings of a launch that ran to its end.
            let findings = s.finish(k);
            if run.is_ok() {
                let mut reports = lock(&self.reports);
                reports.extend(findings.iter().map(crate::emu_check::report));
            }
        }
        drop(sanitizer);
        if let (Some(recording), Some(executed)) = (&self.recording, executed) {
            lock(recording).insert(key, executed);
        }
        memory.free(at);
        drop(memory);
        let stats = run.map_err(machine_fault)?;
        if let Some(mut counters) = counters {
            counters.occupancy = occupancy(self.target, k, &dims);
            if let Some(list) = lock(&self.counted).as_mut() {
                list.push(LaunchCounters {
                    entry: entry.to_string(),
                    counters,
                });
            }
        }
        lock(&self.work).add_launch(
            entry,
            stats.wave_instructions,
            started.elapsed().as_secs_f64(),
        );
        Ok(())
    }

    /// The dense path's GEMM by the host stand-in for the vendor BLAS (`blas::host_gemm_ex`):
    /// the dequant kernel before it is the target's machine code; the library call is read as
    /// hipBLAS would read it (the same column-major call the ROCm backend makes), so the
    /// harness's operand order, strides, offsets and β are exercised, not the vendor's code.
    fn blas_gemm(
        &self,
        g: &BlasGemm,
        x: &EmuBuffer,
        dense: &EmuBuffer,
        y: &mut EmuBuffer,
    ) -> Result<(), DeviceFault> {
        let during = format!("host BLAS stand-in M={} N={} K={}", g.m, g.n, g.k);
        let call_fault = |code: String| DeviceFault::Call {
            during: during.clone(),
            code,
        };
        let call = g.column_major().map_err(|e| call_fault(e.to_string()))?;
        let mut memory = lock(&self.memory);
        let elements = |buf: &EmuBuffer, offset: usize, memory: &GlobalMemory| {
            let bytes = &memory
                .allocation(buf.base)
                .ok_or_else(|| call_fault(format!("no allocation at {:#x}", buf.base)))?
                .bytes;
            let tail = bytes.get(offset..).ok_or_else(|| {
                call_fault(format!("offset {offset} past a {} B buffer", bytes.len()))
            })?;
            Ok::<Vec<u16>, DeviceFault>(
                tail.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            )
        };
        let a = elements(dense, g.dense_offset, &memory)?;
        let b = elements(x, g.x_offset, &memory)?;
        let mut c = elements(y, g.y_offset, &memory)?;
        crate::blas::host_gemm_ex(&call, g.dtype, 1.0, g.beta, &a, &b, &mut c)
            .map_err(|e| call_fault(e.to_string()))?;
        let out = memory
            .allocation_mut(y.base)
            .ok_or_else(|| call_fault(format!("no allocation at {:#x}", y.base)))?;
        for (i, v) in c.iter().enumerate() {
            let at = g.y_offset + 2 * i;
            out.bytes[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
        // The stand-in's writes are stores like a kernel's: initialised for initcheck.
        memory.mark_initialised(y.base + g.y_offset as u64, 2 * c.len());
        Ok(())
    }

    /// The emulator's time says nothing about a GPU's: benchmarks and perf mode skip, saying so.
    fn record(&self) -> Result<Instant, DeviceFault> {
        Err(DeviceFault::MissingCapability {
            capability: Capability::Timing,
            device: self.name(),
            why: "the ISA emulator has no device clock; benchmark on the target's GPU".into(),
        })
    }

    fn elapsed_us(&self, start: &Instant, end: &Instant) -> Result<f64, DeviceFault> {
        Ok(end.duration_since(*start).as_secs_f64() * 1e6)
    }

    fn synchronize(&self, _during: &str) -> Result<(), DeviceFault> {
        Ok(())
    }
}
