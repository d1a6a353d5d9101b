//! The emulator's own sanitizers, the counterparts on gfx code of NVIDIA's compute-sanitizer
//! racecheck and initcheck: shadow state kept beside the LDS and global memory while a launch
//! runs ([`crate::dispatch::launch_sanitized`]), each conflict a [`Finding`] naming the
//! instructions, lanes and address. A finding does not stop the launch (as compute-sanitizer's
//! do not): the output checks judge the results as usual, and the harness turns the findings
//! into the case's `sanitize:<tool>:<kernel>` verdicts. Without a sanitizer the execution
//! context's [`crate::exec::Ctx::sanitizer`] is `None` and no shadow exists.
//!
//! # racecheck: the ordering rules
//!
//! Every LDS byte keeps its last writer (wave, instruction, lane, barrier epoch) and its readers
//! of the latest epoch (a mask of waves, one of them named). An access by one wave that another
//! wave's access to the same byte does not happen before, one of them a write, is a race
//! (write/write, read-after-write or write-after-read). The rules that order two accesses come
//! from the ISA documents:
//!
//! - **Waves of a workgroup are ordered only by the workgroup barrier.** *AMD "RDNA3" Instruction
//!   Set Architecture Reference Guide* (2023), chapter "Program Flow Control", its section on
//!   workgroup barriers (`S_BARRIER`: a wave waits there until every wave of the workgroup has
//!   issued it); *AMD "RDNA4" Instruction Set Architecture Reference Guide* (2025), the same
//!   chapter (the split `S_BARRIER_SIGNAL` / `S_BARRIER_WAIT`). An access made before a wave
//!   signals barrier *n* happens before every access another wave makes after its wait on
//!   barrier *n* returns: with `signals` the barriers the first wave had signalled at its access
//!   and `waits` the barriers the second had passed at its own, the pair is ordered when
//!   `signals < waits`. Waves that ended hold no barrier up (they are not counted, as on
//!   hardware), and everything they did precedes the barrier that completes without them.
//! - **A wave's own LDS accesses are ordered for itself.** Both guides, chapter "Data Share
//!   Operations" (one wave's LDS instructions execute in issue order and the LDS counter —
//!   `LGKM_CNT` on RDNA3, `DS_CNT` on RDNA4 — decrements in order). Accesses of one wave never
//!   race.
//! - **LDS results are usable after `s_waitcnt lgkmcnt`** (RDNA3 guide, "Program Flow Control",
//!   the data-dependency section on `S_WAITCNT`; RDNA4 guide, `S_WAIT_DSCNT`). The barrier does
//!   not wait for memory: a wave that signals a barrier with LDS instructions still counted
//!   (issued, not waited for) has not finished them when the barrier lets the others go, so
//!   racecheck reports the barrier and the LDS instruction in flight
//!   ([`What::InFlightAtBarrier`]). The compiler's `__syncthreads` (a workgroup release fence,
//!   LLVM AMDGPUUsage "Memory Model GFX11") waits `lgkmcnt(0)` before the barrier.
//!
//! The readers of older epochs are forgotten when a later epoch reads: a write racing only with
//! such a forgotten read is missed (never a false report).
//!
//! # initcheck
//!
//! One "initialised" bit per LDS byte, cleared when a workgroup starts (LDS contents are
//! undefined when a workgroup is launched), and one per byte of every global allocation: bytes the host
//! uploads as inputs are initialised, an allocation starts uninitialised, and an output the
//! harness fills with its NaN poison stays uninitialised ([`GlobalMemory::write_uninitialised`]).
//! Stores (LDS, global, flat) set the bits of the bytes they write; a load of a byte whose bit
//! is clear is a [`What::Uninitialised`] finding. Scalar loads (the kernarg segment, written by
//! the host) are not watched.
//!
//! [`GlobalMemory::write_uninitialised`]: crate::memory::GlobalMemory::write_uninitialised

mod init;
mod race;
#[cfg(test)]
mod tests;

use crate::fault::Space;
use crate::memory::GlobalMemory;
use crate::program::Kernel;
use crate::wave::{Counter, LANES, Wave};
use std::collections::HashSet;
use std::fmt;

/// Which sanitizer watches a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    /// LDS data races between the waves of a workgroup.
    Racecheck,
    /// Loads of LDS or global bytes nothing has written.
    Initcheck,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Racecheck => "racecheck",
            Tool::Initcheck => "initcheck",
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Findings kept per launch (the first of each pair of instructions); the rest are counted.
pub const MAX_FINDINGS: usize = 16;

/// One instruction's part in a finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Byte address of the instruction in the code object.
    pub at: u64,
    /// Its mnemonic (filled in when the launch ends).
    pub mnemonic: String,
    /// Wave index in the workgroup and lane.
    pub wave: usize,
    pub lane: u8,
}

/// Whether an access read or wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

/// What a finding says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// Two waves' accesses to one LDS byte in one barrier epoch, one a write: `earlier` ran
    /// first here (hardware may order them either way).
    Race {
        earlier: (Kind, Site),
        later: (Kind, Site),
        /// LDS byte address of the first conflicting byte.
        address: u32,
    },
    /// A barrier signalled while an LDS instruction of the wave was still counted.
    InFlightAtBarrier { barrier: Site, in_flight: Site },
    /// A load of `bytes` bytes at `address`, the first of them never written.
    Uninitialised {
        space: Space,
        address: u64,
        bytes: u32,
        site: Site,
        /// The allocation read (global), for the message.
        allocation: Option<String>,
    },
}

/// A sanitizer's report: where (kernel, workgroup) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub tool: Tool,
    pub kernel: String,
    /// Address of the kernel's first instruction (offsets in reports are from it).
    pub entry: u64,
    pub workgroup: [u32; 3],
    pub what: What,
}

/// The barrier counts of the wave running now (see the module docs' ordering rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    pub wave: usize,
    pub signals: u32,
    pub waits: u32,
}

/// A launch's sanitizer: the shadow state, the running wave's clock and the findings so far.
#[derive(Debug)]
pub struct Sanitizer {
    pub tool: Tool,
    clock: Clock,
    workgroup: [u32; 3],
    /// Workgroups started: tags the LDS shadow, so a new workgroup starts with it clean.
    generation: u32,
    race: race::RaceShadow,
    init: init::LdsInit,
    findings: Vec<Finding>,
    /// Pairs of instruction addresses already reported.
    seen: HashSet<(u64, u64)>,
    /// Findings past [`MAX_FINDINGS`].
    pub dropped: u64,
}

impl Sanitizer {
    pub fn new(tool: Tool) -> Sanitizer {
        Sanitizer {
            tool,
            clock: Clock::default(),
            workgroup: [0; 3],
            generation: 0,
            race: race::RaceShadow::default(),
            init: init::LdsInit::default(),
            findings: Vec::new(),
            seen: HashSet::new(),
            dropped: 0,
        }
    }

    /// Whether global memory needs its initialised bits (initcheck).
    pub fn tracks_global(&self) -> bool {
        self.tool == Tool::Initcheck
    }

    /// A workgroup with `lds_bytes` of LDS starts: its LDS shadow is fresh.
    pub fn begin_workgroup(&mut self, workgroup: [u32; 3], lds_bytes: usize) {
        self.workgroup = workgroup;
        self.generation = self.generation.wrapping_add(1).max(1);
        match self.tool {
            Tool::Racecheck => self.race.begin(lds_bytes, self.generation),
            Tool::Initcheck => self.init.begin(lds_bytes, self.generation),
        }
    }

    /// The wave about to run, with its barrier counts.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// `wave` signals the workgroup barrier at `at`: racecheck reports an LDS instruction still
    /// counted (module docs, third rule).
    pub fn barrier_signal(&mut self, wave: &Wave, at: u64) {
        if self.tool != Tool::Racecheck {
            return;
        }
        // LDS instructions queue in order on the LDS counter; scalar loads (gfx11 lgkmcnt) and
        // flat loads' LDS share are marked out of order.
        let in_flight = wave
            .pending
            .ops()
            .iter()
            .find(|op| op.counter == Counter::Lds && !op.out_of_order);
        if let Some(op) = in_flight {
            let site = |at| Site {
                at,
                mnemonic: String::new(),
                wave: wave.id,
                lane: 0,
            };
            self.report(
                (at, op.issued_at),
                What::InFlightAtBarrier {
                    barrier: site(at),
                    in_flight: site(op.issued_at),
                },
            );
        }
    }

    /// An LDS access of `len` bytes at `address` by `lane` of the running wave, from the
    /// instruction at `at`.
    #[inline]
    pub fn lds(&mut self, kind: Kind, at: u64, lane: u8, address: u32, len: usize) {
        match self.tool {
            Tool::Racecheck => {
                if let Some((what, pair)) =
                    self.race.access(self.clock, kind, at, lane, address, len)
                {
                    self.report(pair, what);
                }
            }
            Tool::Initcheck => match kind {
                Kind::Write => self.init.mark(address, len),
                Kind::Read => {
                    if let Some(first) = self.init.first_unset(address, len) {
                        let site = self.site(at, lane);
                        self.report(
                            (at, u64::MAX),
                            What::Uninitialised {
                                space: Space::Lds,
                                address: first as u64,
                                bytes: len as u32,
                                site,
                                allocation: None,
                            },
                        );
                    }
                }
            },
        }
    }

    /// A global or flat load by the active lanes of `exec`, `len` bytes each at `addrs`: flat
    /// addresses in the shared aperture are LDS reads (both tools), the others global reads
    /// (initcheck).
    pub fn vmem_load(
        &mut self,
        global: &GlobalMemory,
        at: u64,
        addrs: &[u64; LANES],
        exec: u32,
        len: usize,
    ) {
        for (lane, &address) in addrs.iter().enumerate() {
            if exec >> lane & 1 == 0 {
                continue;
            }
            if let Some(o) = crate::exec::vmem::lds_offset(address) {
                self.lds(Kind::Read, at, lane as u8, o, len);
                continue;
            }
            if self.tool != Tool::Initcheck {
                continue;
            }
            if let Some((first, label)) = global.first_uninitialised(address, len) {
                let site = self.site(at, lane as u8);
                self.report(
                    (at, u64::MAX),
                    What::Uninitialised {
                        space: Space::Global,
                        address: first,
                        bytes: len as u32,
                        site,
                        allocation: Some(label),
                    },
                );
                return;
            }
        }
    }

    /// A global store by the active lanes of `exec` (initcheck marks the bytes written).
    pub fn global_store(
        &mut self,
        global: &mut GlobalMemory,
        addrs: &[u64; LANES],
        exec: u32,
        len: usize,
    ) {
        if self.tool != Tool::Initcheck {
            return;
        }
        for (lane, &address) in addrs.iter().enumerate() {
            if exec >> lane & 1 == 1 {
                global.mark_initialised(address, len);
            }
        }
    }

    fn site(&self, at: u64, lane: u8) -> Site {
        Site {
            at,
            mnemonic: String::new(),
            wave: self.clock.wave,
            lane,
        }
    }

    /// Keeps the first finding of each pair of instructions, up to [`MAX_FINDINGS`].
    fn report(&mut self, pair: (u64, u64), what: What) {
        if !self.seen.insert(pair) {
            return;
        }
        if self.findings.len() >= MAX_FINDINGS {
            self.dropped += 1;
            return;
        }
        self.findings.push(Finding {
            tool: self.tool,
            kernel: String::new(),
            entry: 0,
            workgroup: self.workgroup,
            what,
        });
    }

    /// The launch's findings, each naming `kernel` and its instructions' mnemonics.
    pub fn finish(&mut self, kernel: &Kernel) -> Vec<Finding> {
        let mnemonic = |at: u64| {
            kernel
                .index_of(at)
                .and_then(|i| kernel.code.get(i))
                .map_or_else(|| "?".to_string(), |i| i.mnemonic())
        };
        let mut out = std::mem::take(&mut self.findings);
        self.seen.clear();
        for f in &mut out {
            f.kernel = kernel.name.clone();
            f.entry = kernel.descriptor.entry;
            let sites: Vec<&mut Site> = match &mut f.what {
                What::Race { earlier, later, .. } => vec![&mut earlier.1, &mut later.1],
                What::InFlightAtBarrier { barrier, in_flight } => vec![barrier, in_flight],
                What::Uninitialised { site, .. } => vec![site],
            };
            for s in sites {
                s.mnemonic = mnemonic(s.at);
            }
        }
        out
    }
}
