//! Global and flat memory (`global_*`, `flat_*`) and the cache-control instructions.
//!
//! Every active lane's access is bounds-checked on its own, so a fault names the lane. Loads read
//! memory at issue and land in their VGPRs at the wait on [`Counter::Load`] (gfx11 `vmcnt`,
//! gfx12 `loadcnt`); stores write memory at issue and are counted in [`Counter::Store`] until
//! waited for. A flat load also counts in the LDS counter (`lgkmcnt` / `dscnt`), as on hardware,
//! where its address may turn out to be LDS; its data land with the load counter.

use super::operand::{row, row_at, row64, scalar64};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Inst, Op, Operand};
use crate::memory::{GlobalMemory, SHARED_APERTURE};
use crate::wave::{Counter, LANES, Landing, PendingOp, VRow, Wave};

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    match inst.op {
        Op::GlobalLoadB32 => load(wave, inst, ctx, Access::Global, 4),
        Op::GlobalLoadB128 => load(wave, inst, ctx, Access::Global, 16),
        Op::GlobalLoadU16 => load(wave, inst, ctx, Access::Global, 2),
        Op::FlatLoadB32 => load(wave, inst, ctx, Access::Flat, 4),
        Op::FlatLoadU16 => load(wave, inst, ctx, Access::Flat, 2),
        Op::GlobalStoreB16 => store(wave, inst, ctx, 2),
        Op::GlobalStoreB32 => store(wave, inst, ctx, 4),
        Op::GlobalStoreB128 => store(wave, inst, ctx, 16),
        // Cache invalidation / write-back: memory here is coherent, nothing to do.
        Op::BufferGl0Inv | Op::GlobalInv | Op::GlobalWb => Ok(Flow::Next),
        _ => Err(unknown(inst)),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Global,
    Flat,
}

/// Per-lane byte addresses: a 64-bit VGPR address with `off` (or no saddr, flat), or a 32-bit
/// VGPR offset added to an SGPR-pair base; plus the instruction's signed `offset:`.
pub(crate) fn addresses(
    wave: &Wave,
    inst: &Inst,
    vaddr: usize,
    saddr: usize,
) -> Result<[u64; LANES], FaultKind> {
    let offset = inst.mods.offset as i64 as u64;
    let v = arg(inst, vaddr)?;
    match inst.operands.get(saddr) {
        None | Some(Operand::Off) => {
            let a = row64(wave, v)?;
            Ok(a.map(|a| a.wrapping_add(offset)))
        }
        Some(s @ Operand::Sgpr { .. }) => {
            let base = scalar64(wave, s)?;
            let off = row(wave, v, super::operand::Width::B32)?;
            Ok(off.map(|o| base.wrapping_add(o as u64).wrapping_add(offset)))
        }
        Some(other) => Err(FaultKind::Unsupported {
            what: format!("`{}` address base {other:?}", inst.mnemonic()),
        }),
    }
}

/// The LDS offset of a flat address in the shared aperture, if it is one.
pub(crate) fn lds_offset(address: u64) -> Option<u32> {
    address
        .checked_sub(SHARED_APERTURE)
        .and_then(|o| u32::try_from(o).ok())
}

fn load(
    wave: &mut Wave,
    inst: &Inst,
    ctx: &mut Ctx<'_>,
    access: Access,
    bytes: usize,
) -> Result<Flow, FaultKind> {
    let dwords = bytes.div_ceil(4);
    let first = match *arg(inst, 0)? {
        Operand::Vgpr { first, count, .. } if count as usize == dwords => first,
        ref other => {
            return Err(FaultKind::Unsupported {
                what: format!("`{}` destination {other:?}", inst.mnemonic()),
            });
        }
    };
    let addrs = addresses(wave, inst, 1, 2)?;
    let exec = wave.exec();
    let mut values: Vec<VRow> = vec![[0; LANES]; dwords];
    let fast = match bytes {
        2 => read_one_allocation::<2>(ctx.global, access, &addrs, exec, &mut values),
        4 => read_one_allocation::<4>(ctx.global, access, &addrs, exec, &mut values),
        16 => read_one_allocation::<16>(ctx.global, access, &addrs, exec, &mut values),
        _ => false,
    };
    if !fast {
        read_per_lane(ctx, access, &addrs, exec, bytes, &mut values)?;
    }
    if let Some(s) = ctx.sanitizer.as_deref_mut() {
        s.vmem_load(ctx.global, inst.addr, &addrs, exec, bytes);
    }
    wave.issue(PendingOp {
        counter: Counter::Load,
        out_of_order: false,
        landing: Landing::Vgpr {
            first,
            values,
            lanes: exec,
        },
        issued_at: inst.addr,
    });
    if access == Access::Flat {
        wave.issue(PendingOp {
            counter: Counter::Lds,
            out_of_order: true,
            landing: Landing::Nothing,
            issued_at: inst.addr,
        });
    }
    Ok(Flow::Next)
}

/// The usual load: every active lane inside the global allocation the first active lane reads
/// (a wave reads one tensor), checked with integer compares and copied straight into the rows.
/// Returns false when some lane is elsewhere (another allocation, LDS, out of bounds): then
/// [`read_per_lane`] reads again from scratch and reports the fault, so faults stay per lane.
fn read_one_allocation<const BYTES: usize>(
    global: &GlobalMemory,
    access: Access,
    addrs: &[u64; LANES],
    exec: u32,
    values: &mut [VRow],
) -> bool {
    let first = exec.trailing_zeros() as usize;
    let Some(allocation) = addrs.get(first).and_then(|&a| global.holding(a, BYTES)) else {
        return exec == 0;
    };
    for (lane, &address) in addrs.iter().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        if access == Access::Flat && lds_offset(address).is_some() {
            return false;
        }
        let Some(off) = allocation.offset_of(address, BYTES) else {
            return false;
        };
        // A fixed-size copy (BYTES is a constant here), zero-extended to whole words.
        let mut buf = [0u8; 16];
        buf[..BYTES].copy_from_slice(&allocation.bytes[off..off + BYTES]);
        for (row, word) in values.iter_mut().zip(buf.chunks_exact(4)) {
            row[lane] = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        }
    }
    true
}

/// A load lane by lane: each active lane's bytes from LDS (a flat address in the shared
/// aperture) or global memory, bounds-checked on their own so a fault names the lane.
fn read_per_lane(
    ctx: &mut Ctx<'_>,
    access: Access,
    addrs: &[u64; LANES],
    exec: u32,
    bytes: usize,
    values: &mut [VRow],
) -> Result<(), FaultKind> {
    for (lane, &address) in addrs.iter().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        // Narrow loads zero-extend into the full register.
        let mut buf = [0u8; 16];
        let data = &mut buf[..bytes];
        match (access, lds_offset(address)) {
            (Access::Flat, Some(o)) => ctx.lds.read(o, data, lane as u8)?,
            _ => ctx.global.read(address, data, lane as u8)?,
        }
        for (k, row) in values.iter_mut().enumerate() {
            row[lane] =
                u32::from_le_bytes([buf[4 * k], buf[4 * k + 1], buf[4 * k + 2], buf[4 * k + 3]]);
        }
    }
    Ok(())
}

fn store(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>, bytes: usize) -> Result<Flow, FaultKind> {
    let dwords = bytes.div_ceil(4);
    let data_op = arg(inst, 1)?;
    let mut rows = [[0u32; LANES]; 4];
    let data = match *data_op {
        Operand::Vgpr { count, .. } if count as usize == dwords => &mut rows[..dwords],
        ref other => {
            return Err(FaultKind::Unsupported {
                what: format!("`{}` data {other:?}", inst.mnemonic()),
            });
        }
    };
    for (k, row) in data.iter_mut().enumerate() {
        *row = row_at(wave, data_op, k)?;
    }
    let addrs = addresses(wave, inst, 0, 2)?;
    let exec = wave.exec();
    if !write_one_allocation(ctx.global, &addrs, exec, bytes, data) {
        write_per_lane(ctx.global, &addrs, exec, bytes, data)?;
    }
    if let Some(s) = ctx.sanitizer.as_deref_mut() {
        s.global_store(ctx.global, &addrs, exec, bytes);
    }
    wave.issue(PendingOp {
        counter: Counter::Store,
        out_of_order: false,
        landing: Landing::Nothing,
        issued_at: inst.addr,
    });
    Ok(Flow::Next)
}

/// The usual store: every active lane inside the allocation the first active lane writes,
/// checked before any byte is written. Returns false, having written nothing, when some lane is
/// elsewhere; [`write_per_lane`] then stores lane by lane and reports the fault.
fn write_one_allocation(
    global: &mut GlobalMemory,
    addrs: &[u64; LANES],
    exec: u32,
    bytes: usize,
    data: &[VRow],
) -> bool {
    let first = exec.trailing_zeros() as usize;
    let Some(allocation) = addrs.get(first).and_then(|&a| global.holding_mut(a, bytes)) else {
        return exec == 0;
    };
    let mut offsets = [0usize; LANES];
    for (lane, &address) in addrs.iter().enumerate() {
        if exec >> lane & 1 == 1 {
            match allocation.offset_of(address, bytes) {
                Some(off) => offsets[lane] = off,
                None => return false,
            }
        }
    }
    // Lane order, as the per-lane path: of two lanes writing one byte, the higher wins.
    for (lane, &off) in offsets.iter().enumerate() {
        if exec >> lane & 1 == 1 {
            let out = &mut allocation.bytes[off..off + bytes];
            for (row, chunk) in data.iter().zip(out.chunks_mut(4)) {
                chunk.copy_from_slice(&row[lane].to_le_bytes()[..chunk.len()]);
            }
        }
    }
    true
}

/// A store lane by lane, each bounds-checked on its own so a fault names the lane (the lanes
/// before it have written, as on hardware).
fn write_per_lane(
    global: &mut GlobalMemory,
    addrs: &[u64; LANES],
    exec: u32,
    bytes: usize,
    data: &[VRow],
) -> Result<(), FaultKind> {
    for (lane, &address) in addrs.iter().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        for (k, row) in data.iter().enumerate() {
            buf[4 * k..4 * k + 4].copy_from_slice(&row[lane].to_le_bytes());
        }
        global.write(address, &buf[..bytes], lane as u8)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::Bench;
    use super::*;
    use crate::inst::Gen;

    /// A bench with a 128-byte allocation `buf` holding bytes 0, 1, 2, …, its address in
    /// v[10:11] per lane (lane l at +4l) and in s[2:3].
    fn bench(generation: Gen) -> (Bench, u64) {
        let mut b = Bench::new(generation);
        let a = b.global.alloc(128, "buf");
        let bytes: Vec<u8> = (0..128u8).collect();
        b.global.write(a, &bytes, 0).unwrap();
        let lo: VRow = std::array::from_fn(|l| (a + 4 * l as u64) as u32);
        let hi: VRow = std::array::from_fn(|l| ((a + 4 * l as u64) >> 32) as u32);
        b.wave.set_v(10, &lo, u32::MAX).unwrap();
        b.wave.set_v(11, &hi, u32::MAX).unwrap();
        b.wave.sgpr[2] = a as u32;
        b.wave.sgpr[3] = (a >> 32) as u32;
        (b, a)
    }

    fn word(i: usize) -> u32 {
        u32::from_le_bytes([i as u8, i as u8 + 1, i as u8 + 2, i as u8 + 3])
    }

    #[test]
    fn global_loads_land_at_vmcnt_in_active_lanes_only() {
        let (mut b, _) = bench(Gen::Gfx11);
        b.wave.sgpr[crate::wave::sreg::EXEC_LO] = 0x0000_FFFF;
        b.run_asm("global_load_b32 v1, v[10:11], off offset:4")
            .unwrap();
        assert!(matches!(b.wave.v(1), Err(FaultKind::ReadBeforeWait { .. })));
        assert!(b.run_asm("s_waitcnt lgkmcnt(0)").is_ok());
        assert!(b.wave.v(1).is_err());
        b.run_asm("s_waitcnt vmcnt(0)").unwrap();
        let v1 = *b.wave.v(1).unwrap();
        for (l, v) in v1.iter().enumerate() {
            let want = if l < 16 {
                word(4 * l + 4)
            } else {
                crate::wave::POISON
            };
            assert_eq!(*v, want, "lane {l} (16.. inactive)");
        }
    }

    #[test]
    fn b128_and_u16_loads_and_the_saddr_form() {
        let (mut b, _) = bench(Gen::Gfx12);
        // Lanes 0..8 only: 16 B per lane at a 4 B stride stays inside the 128 B.
        b.wave.sgpr[crate::wave::sreg::EXEC_LO] = 0xFF;
        b.run_asm("global_load_b128 v[4:7], v[10:11], off").unwrap();
        b.run_asm("global_load_u16 v8, v[10:11], off offset:2")
            .unwrap();
        let off: VRow = std::array::from_fn(|l| 2 * l as u32);
        b.wave.set_v(12, &off, u32::MAX).unwrap();
        b.run_asm("global_load_u16 v9, v12, s[2:3] offset:1")
            .unwrap();
        b.run_asm("global_load_b32 v13, v12, s[2:3]").unwrap();
        b.run_asm("s_wait_loadcnt 0x0").unwrap();
        for l in 0..8 {
            for k in 0..4 {
                assert_eq!(b.wave.v(4 + k).unwrap()[l], word(4 * l + 4 * k));
            }
        }
        let u = |i: usize| (i as u32) | (i as u32 + 1) << 8;
        assert_eq!(b.wave.v(8).unwrap()[3], u(14));
        assert_eq!(b.wave.v(9).unwrap()[3], u(7));
        assert_eq!(b.wave.v(13).unwrap()[5], word(10));
    }

    #[test]
    fn reading_a_load_destination_before_the_wait_faults() {
        let (mut b, _) = bench(Gen::Gfx11);
        b.run_asm("global_load_b32 v1, v[10:11], off").unwrap();
        assert!(matches!(b.wave.v(1), Err(FaultKind::ReadBeforeWait { .. })));
        assert!(matches!(
            b.wave.set_v(1, &[0; 32], u32::MAX),
            Err(FaultKind::WriteBeforeWait { .. })
        ));
    }

    /// Two VMEM loads to one register (clang emits this as a `s_clause` of a b128 load and a b32
    /// load of the same address): loads return in issue order, so the younger wins at the wait,
    /// as on the hardware — not a fault. Reading in between still is.
    #[test]
    fn overlapping_loads_of_one_in_order_counter_land_younger_last() {
        let (mut b, _) = bench(Gen::Gfx11);
        b.wave.sgpr[crate::wave::sreg::EXEC_LO] = 0xFF;
        b.run_asm("global_load_b128 v[4:7], v[10:11], off").unwrap();
        b.run_asm("global_load_b32 v4, v[10:11], off offset:8")
            .unwrap();
        assert!(matches!(b.wave.v(4), Err(FaultKind::ReadBeforeWait { .. })));
        b.run_asm("s_waitcnt vmcnt(0)").unwrap();
        for l in 0..8 {
            assert_eq!(
                b.wave.v(4).unwrap()[l],
                word(4 * l + 8),
                "lane {l}: the younger load"
            );
            assert_eq!(
                b.wave.v(5).unwrap()[l],
                word(4 * l + 4),
                "lane {l}: the older load"
            );
        }
    }

    /// A VMEM load and an LDS load to one register count in different counters on gfx11
    /// (`vmcnt`, `lgkmcnt`): their order is undefined, so the overlap is the machine code's fault.
    #[test]
    fn overlapping_loads_of_different_counters_fault() {
        let (mut b, _) = bench(Gen::Gfx11);
        b.wave.set_v(20, &[0; 32], u32::MAX).unwrap();
        b.run_asm("ds_load_b32 v4, v20").unwrap();
        b.run_asm("global_load_b32 v4, v[10:11], off").unwrap();
        assert!(matches!(
            b.run_asm("s_waitcnt lgkmcnt(0)"),
            Err(FaultKind::WriteBeforeWait { .. })
        ));
    }

    #[test]
    fn stores_write_memory_at_issue_in_active_lanes() {
        let (mut b, a) = bench(Gen::Gfx11);
        let data: VRow = std::array::from_fn(|l| 0xAABB_0000 | l as u32);
        b.wave.set_v(1, &data, u32::MAX).unwrap();
        b.wave.set_v(2, &[0x1111_1111; 32], u32::MAX).unwrap();
        b.wave.set_v(3, &[0x2222_2222; 32], u32::MAX).unwrap();
        b.wave.set_v(4, &[0x3333_3333; 32], u32::MAX).unwrap();
        b.wave.sgpr[crate::wave::sreg::EXEC_LO] = 0b101;
        b.run_asm("global_store_b16 v[10:11], v1, off offset:2")
            .unwrap();
        let mut out = [0u8; 12];
        b.global.read(a, &mut out, 0).unwrap();
        assert_eq!(out, [0, 1, 0, 0, 4, 5, 6, 7, 8, 9, 2, 0]);
        b.run_asm("global_store_b32 v[10:11], v1, off").unwrap();
        b.global.read(a + 8, &mut out[..4], 0).unwrap();
        assert_eq!(
            u32::from_le_bytes([out[0], out[1], out[2], out[3]]),
            0xAABB_0002
        );
        b.wave.sgpr[crate::wave::sreg::EXEC_LO] = 1;
        b.run_asm("global_store_b128 v[10:11], v[1:4], off offset:32")
            .unwrap();
        let mut q = [0u8; 16];
        b.global.read(a + 32, &mut q, 0).unwrap();
        assert_eq!(&q[4..8], &[0x11; 4]);
        assert_eq!(&q[12..16], &[0x33; 4]);
        let off: VRow = [8; 32];
        b.wave.set_v(12, &off, u32::MAX).unwrap();
        b.run_asm("global_store_b32 v12, v2, s[2:3] offset:4")
            .unwrap();
        b.global.read(a + 12, &mut out[..4], 0).unwrap();
        assert_eq!(&out[..4], &[0x11; 4]);
        // Counted until the store wait.
        assert_eq!(b.wave.pending.ops().len(), 4);
        b.run_asm("s_waitcnt_vscnt null, 0x0").unwrap();
        assert!(b.wave.pending.ops().is_empty());
    }

    #[test]
    fn out_of_bounds_reads_and_writes_fault_naming_lane_and_allocation() {
        let (mut b, _) = bench(Gen::Gfx11);
        // Lane 31 reads bytes 128..132: one dword past the end.
        let err = b
            .run_asm("global_load_b32 v1, v[10:11], off offset:4")
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, FaultKind::OutOfBounds { lane: 31, .. }),
            "{text}"
        );
        assert!(text.contains("past the end of `buf`"), "{text}");
        let err = b.run_asm("global_store_b128 v[10:11], v[1:4], off offset:-16");
        // v1..v4 are poisoned but readable; lane 0 writes 16 B before the allocation.
        let err = err.unwrap_err();
        assert!(
            matches!(
                err,
                FaultKind::OutOfBounds {
                    lane: 0,
                    access: crate::fault::Access::Write,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("before `buf`"), "{err}");
        // An inactive lane's address is never checked.
        b.wave.sgpr[crate::wave::sreg::EXEC_LO] = 0x7FFF_FFFF;
        b.run_asm("global_load_b32 v1, v[10:11], off offset:4")
            .unwrap();
    }

    /// Lanes in two allocations miss the one-allocation fast path; the per-lane path then reads
    /// and writes each lane's own allocation.
    #[test]
    fn a_wave_spread_over_two_allocations_reads_and_writes_both() {
        let (mut b, a) = bench(Gen::Gfx11);
        let other = b.global.alloc(64, "other");
        let bytes: Vec<u8> = (0..64u8).map(|i| 200u8.wrapping_add(i)).collect();
        b.global.write(other, &bytes, 0).unwrap();
        let at = |l: usize| {
            if l < 16 {
                a + 4 * l as u64
            } else {
                other + 4 * (l as u64 - 16)
            }
        };
        let lo: VRow = std::array::from_fn(|l| at(l) as u32);
        let hi: VRow = std::array::from_fn(|l| (at(l) >> 32) as u32);
        b.wave.set_v(10, &lo, u32::MAX).unwrap();
        b.wave.set_v(11, &hi, u32::MAX).unwrap();
        b.run_asm("global_load_b32 v1, v[10:11], off").unwrap();
        b.run_asm("s_waitcnt vmcnt(0)").unwrap();
        let v1 = *b.wave.v(1).unwrap();
        assert_eq!(v1[3], word(12));
        let w = |i: u8| u32::from_le_bytes([200 + i, 201 + i, 202 + i, 203 + i]);
        assert_eq!(v1[17], w(4));
        let data: VRow = std::array::from_fn(|l| 0x5500_0000 | l as u32);
        b.wave.set_v(2, &data, u32::MAX).unwrap();
        b.run_asm("global_store_b32 v[10:11], v2, off").unwrap();
        let mut out = [0u8; 4];
        b.global.read(a + 8, &mut out, 0).unwrap();
        assert_eq!(u32::from_le_bytes(out), 0x5500_0002);
        b.global.read(other + 8, &mut out, 0).unwrap();
        assert_eq!(u32::from_le_bytes(out), 0x5500_0012);
    }

    #[test]
    fn flat_loads_reach_lds_through_the_shared_aperture_and_global_otherwise() {
        let (mut b, _) = bench(Gen::Gfx11);
        b.lds.write(64, &[1, 2, 3, 4], 0).unwrap();
        let lo = [(SHARED_APERTURE + 64) as u32; 32];
        let hi = [((SHARED_APERTURE + 64) >> 32) as u32; 32];
        b.wave.set_v(20, &lo, u32::MAX).unwrap();
        b.wave.set_v(21, &hi, u32::MAX).unwrap();
        b.run_asm("flat_load_b32 v1, v[20:21]").unwrap();
        b.run_asm("flat_load_u16 v2, v[20:21] offset:2").unwrap();
        b.run_asm("flat_load_b32 v3, v[10:11]").unwrap();
        // Counted in lgkmcnt too, as on hardware.
        assert_eq!(b.wave.pending.ops().len(), 6);
        b.run_asm("s_waitcnt vmcnt(0) lgkmcnt(0)").unwrap();
        assert!(b.wave.pending.ops().is_empty());
        assert_eq!(b.wave.v(1).unwrap()[0], 0x0403_0201);
        assert_eq!(b.wave.v(2).unwrap()[7], 0x0403);
        assert_eq!(b.wave.v(3).unwrap()[2], word(8));
        let past = [(SHARED_APERTURE + 64 * 1024) as u32; 32];
        b.wave.set_v(20, &past, u32::MAX).unwrap();
        assert!(matches!(
            b.run_asm("flat_load_b32 v1, v[20:21]"),
            Err(FaultKind::OutOfBounds {
                space: crate::fault::Space::Lds,
                ..
            })
        ));
    }

    #[test]
    fn cache_controls_do_nothing() {
        let mut b = Bench::new(Gen::Gfx12);
        assert_eq!(b.run_asm("buffer_gl0_inv"), Ok(Flow::Next));
        assert_eq!(b.run_asm("global_inv scope:SCOPE_SE"), Ok(Flow::Next));
        assert_eq!(b.run_asm("global_wb scope:SCOPE_SE"), Ok(Flow::Next));
    }
}
