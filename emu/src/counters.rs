//! Deterministic per-launch counters, named as AMD's profiler (rocprof / rocprofv3) names its
//! hardware counters where such a counter exists, so that a hardware runner can collect the same
//! names and compare; the counters the profiler has no name for carry a `W4A16_` prefix (ours).
//!
//! Counting happens in the dispatch loop through an optional sink ([`crate::dispatch::launch_counted`]):
//! with no sink the loop pays one untaken branch per instruction. Every figure depends only on the
//! code object, the launch and the data (never on the host or on the schedule), so two runs of a
//! launch count the same; docs/perf-counters.md says what each counter counts and where the
//! target figures (cache line, LDS banks, occupancy limits) come from.

use crate::exec::Class;
use crate::exec::{lds, vmem};
use crate::inst::{Inst, Op};
use crate::wave::{LANES, Wave};
use std::sync::LazyLock;

/// Bytes of a cache line on every target here (gfx1100, gfx1151, gfx1201): 128 B, the line of
/// RDNA's L0/L1/L2 caches (AMD, "RDNA Architecture" white paper, 2019, "the cache line size is
/// 128 bytes"; RDNA3 and RDNA4 keep it: an assumption for RDNA4, see docs/perf-counters.md).
pub const CACHE_LINE_BYTES: u64 = 128;

/// LDS banks a wave32 access is spread over per cycle, each [`LDS_BANK_BYTES`] wide (the
/// model of docs/perf-counters.md: 32 dword banks per CU-mode half of the WGP's LDS, an
/// assumption taken from the RDNA ISA documents' LDS chapter, not verified against hardware).
pub const LDS_BANKS: u64 = 32;
/// Width of one LDS bank.
pub const LDS_BANK_BYTES: u64 = 4;

/// One launch's counters. Names (see [`Counters::entries`]) follow rocprof where it has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `SQ_WAVES`: waves launched.
    pub waves: u64,
    /// `SQ_INSTS_VALU`: vector ALU instructions issued (a VOPD pair is one issue; WMMA and dot
    /// included).
    pub valu: u64,
    /// `SQ_INSTS_SALU`: scalar ALU instructions (not branches, waits, barriers or hints).
    pub salu: u64,
    /// `SQ_INSTS_SMEM`: scalar memory loads (`s_load_*`).
    pub smem: u64,
    /// `SQ_INSTS_VMEM_RD`: vector memory reads (`global_load_*`, `flat_load_*`).
    pub vmem_rd: u64,
    /// `SQ_INSTS_VMEM_WR`: vector memory writes (`global_store_*`).
    pub vmem_wr: u64,
    /// `SQ_INSTS_LDS`: LDS instructions (`ds_*`, `ds_bpermute_b32` included).
    pub lds: u64,
    /// `SQ_INSTS_BRANCH`: branches, taken or not (`s_branch`, `s_cbranch_*`).
    pub branch: u64,
    /// `W4A16_INSTS_WMMA` (ours): `v_wmma_*` instructions.
    pub wmma: u64,
    /// `W4A16_INSTS_DOT` (ours): `v_dot2*` operations (each VOPD half counted).
    pub dot: u64,
    /// `W4A16_INSTS_WAITCNT` (ours): `s_waitcnt*` / `s_wait_*cnt` instructions executed.
    pub waitcnt: u64,
    /// `W4A16_GLOBAL_READ_BYTES` (ours): bytes the active lanes of vector reads asked for.
    pub global_read_bytes: u64,
    /// `W4A16_GLOBAL_WRITE_BYTES` (ours): bytes the active lanes of vector writes stored.
    pub global_write_bytes: u64,
    /// `W4A16_GLOBAL_READ_LINES` (ours): distinct [`CACHE_LINE_BYTES`] lines per vector read,
    /// summed over the reads (the requests a wave's access splits into).
    pub global_read_lines: u64,
    /// `W4A16_GLOBAL_WRITE_LINES` (ours): the same for vector writes.
    pub global_write_lines: u64,
    /// `W4A16_LDS_BYTES` (ours): bytes moved by LDS reads and writes of the active lanes.
    pub lds_bytes: u64,
    /// `SQ_LDS_BANK_CONFLICT` (the profiler's name, our bank model): extra cycles LDS accesses
    /// take because two lanes of one pass hit one bank at different dwords.
    pub lds_bank_conflict: u64,
    /// `W4A16_OCCUPANCY_WAVES_PER_SIMD` (ours): waves per SIMD the launch's resource use allows
    /// (see [`occupancy`]); set by the caller, which knows the target.
    pub occupancy: u64,
}

/// What a scalar instruction is, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    Alu,
    Branch,
    Wait,
    /// Barriers, `s_nop`, `s_delay_alu`, `s_clause`, `s_endpgm`, messages and prefetch hints.
    Control,
}

fn scalar_kind(op: Op) -> Scalar {
    static KINDS: LazyLock<Vec<Scalar>> = LazyLock::new(|| {
        Op::ALL
            .iter()
            .map(|op| {
                let n = op.name();
                if n.starts_with("s_branch") || n.starts_with("s_cbranch") {
                    Scalar::Branch
                } else if n.starts_with("s_waitcnt") && n != "s_waitcnt_depctr"
                    || n.starts_with("s_wait_")
                {
                    Scalar::Wait
                } else if n.starts_with("s_barrier")
                    || matches!(
                        n,
                        "s_nop"
                            | "s_delay_alu"
                            | "s_clause"
                            | "s_endpgm"
                            | "s_code_end"
                            | "s_sendmsg"
                            | "s_set_inst_prefetch_distance"
                            | "s_waitcnt_depctr"
                    )
                {
                    Scalar::Control
                } else {
                    Scalar::Alu
                }
            })
            .collect()
    });
    KINDS[op as usize]
}

fn is_dot(op: Op) -> bool {
    static DOT: LazyLock<Vec<bool>> = LazyLock::new(|| {
        Op::ALL
            .iter()
            .map(|o| o.name().starts_with("v_dot"))
            .collect()
    });
    DOT[op as usize]
}

/// Bytes per lane of a vector memory op, and whether it writes; `None` for cache control.
fn vmem_width(op: Op) -> Option<(u64, bool)> {
    Some(match op {
        Op::GlobalLoadU16 | Op::FlatLoadU16 => (2, false),
        Op::GlobalLoadB32 | Op::FlatLoadB32 => (4, false),
        Op::GlobalLoadB128 => (16, false),
        Op::GlobalStoreB16 => (2, true),
        Op::GlobalStoreB32 => (4, true),
        Op::GlobalStoreB128 => (16, true),
        _ => return None,
    })
}

/// Bytes per lane of an LDS op, the byte offsets of its parts, and whether it writes; `None`
/// for `ds_bpermute_b32` (the LDS crossbar, no memory).
fn lds_access(inst: &Inst) -> Option<(u64, [u32; 2], usize, bool)> {
    Some(match inst.op {
        Op::DsLoadB32 => (4, [0, 0], 1, false),
        Op::DsLoadB128 => (16, [0, 0], 1, false),
        Op::DsLoad2addrB32 => (
            4,
            [inst.mods.offset0 as u32 * 4, inst.mods.offset1 as u32 * 4],
            2,
            false,
        ),
        Op::DsStoreB16 => (2, [0, 0], 1, true),
        Op::DsStoreB32 => (4, [0, 0], 1, true),
        Op::DsStoreB64 => (8, [0, 0], 1, true),
        Op::DsStoreB96 => (12, [0, 0], 1, true),
        Op::DsStoreB128 => (16, [0, 0], 1, true),
        _ => return None,
    })
}

impl Counters {
    /// Every counter with its name, in a fixed order (the golden files' keys).
    pub fn entries(&self) -> [(&'static str, u64); 18] {
        [
            ("SQ_WAVES", self.waves),
            ("SQ_INSTS_VALU", self.valu),
            ("SQ_INSTS_SALU", self.salu),
            ("SQ_INSTS_SMEM", self.smem),
            ("SQ_INSTS_VMEM_RD", self.vmem_rd),
            ("SQ_INSTS_VMEM_WR", self.vmem_wr),
            ("SQ_INSTS_LDS", self.lds),
            ("SQ_INSTS_BRANCH", self.branch),
            ("SQ_LDS_BANK_CONFLICT", self.lds_bank_conflict),
            ("W4A16_INSTS_WMMA", self.wmma),
            ("W4A16_INSTS_DOT", self.dot),
            ("W4A16_INSTS_WAITCNT", self.waitcnt),
            ("W4A16_GLOBAL_READ_BYTES", self.global_read_bytes),
            ("W4A16_GLOBAL_WRITE_BYTES", self.global_write_bytes),
            ("W4A16_GLOBAL_READ_LINES", self.global_read_lines),
            ("W4A16_GLOBAL_WRITE_LINES", self.global_write_lines),
            ("W4A16_LDS_BYTES", self.lds_bytes),
            ("W4A16_OCCUPANCY_WAVES_PER_SIMD", self.occupancy),
        ]
    }

    /// Adds `other` (occupancy: the lower of the two, the launch that limits).
    pub fn add(&mut self, other: &Counters) {
        let occupancy = match (self.waves, other.waves) {
            (0, _) => other.occupancy,
            (_, 0) => self.occupancy,
            _ => self.occupancy.min(other.occupancy),
        };
        self.waves += other.waves;
        self.valu += other.valu;
        self.salu += other.salu;
        self.smem += other.smem;
        self.vmem_rd += other.vmem_rd;
        self.vmem_wr += other.vmem_wr;
        self.lds += other.lds;
        self.branch += other.branch;
        self.wmma += other.wmma;
        self.dot += other.dot;
        self.waitcnt += other.waitcnt;
        self.global_read_bytes += other.global_read_bytes;
        self.global_write_bytes += other.global_write_bytes;
        self.global_read_lines += other.global_read_lines;
        self.global_write_lines += other.global_write_lines;
        self.lds_bytes += other.lds_bytes;
        self.lds_bank_conflict += other.lds_bank_conflict;
        self.occupancy = occupancy;
    }

    /// Counts `inst`, about to run on `wave` (addresses are read before it runs; an address
    /// the instruction cannot read is its fault to report, and counts no bytes here).
    #[inline]
    pub(crate) fn record(&mut self, wave: &Wave, inst: &Inst) {
        match inst.op.class() {
            Class::Valu => {
                self.valu += 1;
                self.dot += u64::from(is_dot(inst.op))
                    + inst.dual.as_deref().map_or(0, |d| u64::from(is_dot(d.op)));
            }
            Class::Wmma => {
                self.valu += 1;
                self.wmma += 1;
            }
            Class::Salu => match scalar_kind(inst.op) {
                Scalar::Alu => self.salu += 1,
                Scalar::Branch => self.branch += 1,
                Scalar::Wait => self.waitcnt += 1,
                Scalar::Control => {}
            },
            Class::Smem => self.smem += 1,
            Class::Vmem => self.record_vmem(wave, inst),
            Class::Lds => self.record_lds(wave, inst),
        }
    }

    fn record_vmem(&mut self, wave: &Wave, inst: &Inst) {
        let Some((bytes, write)) = vmem_width(inst.op) else {
            return;
        };
        let (vaddr, saddr) = if write { (0, 2) } else { (1, 2) };
        if write {
            self.vmem_wr += 1;
        } else {
            self.vmem_rd += 1;
        }
        let Ok(addrs) = vmem::addresses(wave, inst, vaddr, saddr) else {
            return;
        };
        let exec = wave.exec();
        let mut lines = [0u64; 2 * LANES];
        let mut n = 0;
        let (mut global, mut shared) = (0u64, 0u64);
        for (lane, &a) in addrs.iter().enumerate() {
            if exec >> lane & 1 == 0 {
                continue;
            }
            if vmem::lds_offset(a).is_some() {
                shared += bytes;
                continue;
            }
            global += bytes;
            let (first, last) = (a / CACHE_LINE_BYTES, (a + bytes - 1) / CACHE_LINE_BYTES);
            lines[n] = first;
            n += 1;
            if last != first {
                lines[n] = last;
                n += 1;
            }
        }
        let lines = &mut lines[..n];
        if !lines.is_sorted() {
            lines.sort_unstable();
        }
        let distinct = lines.windows(2).filter(|w| w[0] != w[1]).count() as u64 + u64::from(n > 0);
        self.lds_bytes += shared;
        if write {
            self.global_write_bytes += global;
            self.global_write_lines += distinct;
        } else {
            self.global_read_bytes += global;
            self.global_read_lines += distinct;
        }
    }

    fn record_lds(&mut self, wave: &Wave, inst: &Inst) {
        self.lds += 1;
        let Some((bytes, parts, nparts, write)) = lds_access(inst) else {
            return;
        };
        let Ok(addrs) = lds::addresses(wave, inst, if write { 0 } else { 1 }) else {
            return;
        };
        let exec = wave.exec();
        self.lds_bytes += u64::from(exec.count_ones()) * bytes * nparts as u64;
        for &part in &parts[..nparts] {
            self.lds_bank_conflict += bank_conflict_cycles(&addrs, exec, part, bytes);
        }
    }
}

/// Extra cycles of one LDS access part under the bank model: the wave's lanes go in passes of
/// `BANKS × BANK_BYTES / bytes` lanes (all 32 for accesses of a dword or less); a pass takes as
/// many cycles as the most distinct dwords any one bank holds (one dword read by several lanes
/// is a broadcast, not a conflict); every cycle past the first of a pass is a conflict cycle.
pub fn bank_conflict_cycles(addrs: &[u32; LANES], exec: u32, part: u32, bytes: u64) -> u64 {
    let dwords = bytes.div_ceil(LDS_BANK_BYTES).next_power_of_two();
    let per_pass = ((LDS_BANKS / dwords).max(1) as usize).min(LANES);
    let mut extra = 0;
    for pass in (0..LANES).step_by(per_pass) {
        let lanes = &addrs[pass..pass + per_pass];
        let active = (exec >> pass) & (u32::MAX >> (32 - per_pass));
        if active == 0 || conflict_free(lanes, bytes) {
            continue;
        }
        // Distinct dword addresses of this pass (at most 32 here), then the most any bank holds.
        let mut seen = [0u32; LANES * 4];
        let mut count = 0;
        for (i, &address) in lanes.iter().enumerate() {
            if active >> i & 1 == 0 {
                continue;
            }
            let base = address.wrapping_add(part) / LDS_BANK_BYTES as u32;
            for k in 0..bytes.div_ceil(LDS_BANK_BYTES) as u32 {
                seen[count] = base.wrapping_add(k);
                count += 1;
            }
        }
        let seen = &mut seen[..count];
        seen.sort_unstable();
        let mut per_bank = [0u64; LDS_BANKS as usize];
        let mut last = None;
        for &d in seen.iter() {
            if last != Some(d) {
                per_bank[(d as u64 % LDS_BANKS) as usize] += 1;
                last = Some(d);
            }
        }
        extra += per_bank
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .saturating_sub(1);
    }
    extra
}

/// The usual passes, decided without sorting: every lane at the next `bytes` after the one before
/// (or all at one address) within one 128-byte row of the banks: no bank holds two dwords. (The
/// part offset moves every lane alike, so it cannot change the answer.)
fn conflict_free(lanes: &[u32], bytes: u64) -> bool {
    let first = lanes[0];
    let span = (first % LDS_BANK_BYTES as u32) as u64 + lanes.len() as u64 * bytes;
    let row = LDS_BANKS * LDS_BANK_BYTES;
    let consecutive = span <= row
        && lanes
            .iter()
            .enumerate()
            .all(|(i, &a)| a == first.wrapping_add((i as u64 * bytes) as u32));
    consecutive || (bytes <= row && lanes.iter().all(|&a| a == first))
}

/// A target's limits on waves per SIMD (LLVM's AMDGPU backend, `AMDGPUBaseInfo.cpp`:
/// `getMaxWavesPerEU`, `getTotalNumVGPRs`, `getVGPRAllocGranule`; LDS per WGP from the RDNA3 /
/// RDNA4 ISA documents). SGPRs do not limit occupancy on gfx10 and later (every wave has its
/// full set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetLimits {
    pub max_waves_per_simd: u64,
    /// VGPRs per SIMD lane in wave32.
    pub vgprs_per_simd: u64,
    /// VGPRs are allocated per wave in blocks of this many.
    pub vgpr_granule: u64,
    /// LDS of one WGP, shared by its workgroups (WGP mode, the HIP default on gfx10+).
    pub lds_per_wgp: u64,
    /// SIMDs of one WGP (two CUs of two SIMD32 each).
    pub simds_per_wgp: u64,
}

impl TargetLimits {
    /// The limits of `gfx1100`, `gfx1151` or `gfx1201`; `None` for any other name.
    pub fn of(gfx: &str) -> Option<TargetLimits> {
        match gfx {
            // 1536 VGPRs in blocks of 24 (wave32), 16 waves per SIMD, 128 KiB LDS per WGP of
            // four SIMDs: LLVM 19's own occupancy (`-Rpass-analysis=kernel-resource-usage`)
            // agrees on all three targets (120 VGPRs: 12 waves; 64 KiB LDS, 256 work-items: 4).
            "gfx1100" | "gfx1151" | "gfx1201" => Some(TargetLimits {
                max_waves_per_simd: 16,
                vgprs_per_simd: 1536,
                vgpr_granule: 24,
                lds_per_wgp: 128 << 10,
                simds_per_wgp: 4,
            }),
            _ => None,
        }
    }

    /// Waves per SIMD a launch of `vgprs` VGPRs per wave, `lds` bytes per workgroup and
    /// `waves_per_group` waves per workgroup can keep resident: the least of the wave slots,
    /// the register file and the LDS.
    pub fn occupancy(&self, vgprs: u64, lds: u64, waves_per_group: u64) -> u64 {
        let alloc = vgprs.max(1).div_ceil(self.vgpr_granule) * self.vgpr_granule;
        let by_vgpr = self.vgprs_per_simd / alloc;
        let by_lds = match lds {
            0 => self.max_waves_per_simd,
            l => (self.lds_per_wgp / l) * waves_per_group / self.simds_per_wgp,
        };
        self.max_waves_per_simd.min(by_vgpr).min(by_lds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_dwords_have_no_conflict_and_a_stride_of_the_banks_has_the_most() {
        let linear: [u32; LANES] = std::array::from_fn(|l| 4 * l as u32);
        assert_eq!(bank_conflict_cycles(&linear, u32::MAX, 0, 4), 0);
        let strided: [u32; LANES] = std::array::from_fn(|l| 128 * l as u32);
        assert_eq!(bank_conflict_cycles(&strided, u32::MAX, 0, 4), 31);
        let broadcast = [64u32; LANES];
        assert_eq!(bank_conflict_cycles(&broadcast, u32::MAX, 0, 4), 0);
        let wide: [u32; LANES] = std::array::from_fn(|l| 16 * l as u32);
        assert_eq!(bank_conflict_cycles(&wide, u32::MAX, 0, 16), 0);
        // Not consecutive (the sorted path): a permutation of the banks, then two lanes on one.
        let permuted: [u32; LANES] = std::array::from_fn(|l| 4 * ((l as u32 * 7) % 32));
        assert_eq!(bank_conflict_cycles(&permuted, u32::MAX, 0, 4), 0);
        let mut two = permuted;
        two[5] = two[3] + 128;
        assert_eq!(bank_conflict_cycles(&two, u32::MAX, 0, 4), 1);
        assert_eq!(bank_conflict_cycles(&two, !(1 << 5), 0, 4), 0);
    }

    #[test]
    fn occupancy_is_the_least_of_slots_registers_and_lds() {
        let t = TargetLimits::of("gfx1151").unwrap();
        assert_eq!(t.occupancy(32, 0, 4), 16);
        assert_eq!(t.occupancy(128, 0, 4), 10);
        assert_eq!(t.occupancy(256, 0, 4), 5);
        assert_eq!(t.occupancy(32, 64 << 10, 8), 4);
        assert!(TargetLimits::of("sm_90").is_none());
    }
}
