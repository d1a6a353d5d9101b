//! Tiny hand-written kernels with known results, run through [`launch`]. They use only memory,
//! wait, barrier and branch instructions, so they check the machine (initial state, scheduling,
//! barriers, the hang guard) independently of the ALU semantics.

use super::*;
use crate::kernarg;
use crate::parse::parse_asm;
use crate::program::{KernelDescriptor, KernelMeta};
use crate::wave::POISON;
use std::collections::HashMap;

const ENTRY: u64 = 0x1000;

/// kernarg pointer + wave32, the code properties of every kernel of the set.
const KCP: u16 = KCP_KERNARG_SEGMENT_PTR | KCP_WAVEFRONT_SIZE32;

/// rsrc2 with `user` user SGPRs, workgroup ids x and y, and `tid_dims` work-item id dims.
fn rsrc2(user: u32, tid_dims: u32) -> u32 {
    user << 1 | RSRC2_WORKGROUP_ID_X | RSRC2_WORKGROUP_ID_X << 1 | (tid_dims - 1) << 11
}

/// A kernel of `lines` at ENTRY, one word each (branch offsets count instructions).
fn kernel(generation: Gen, lines: &[&str], rsrc2: u32, lds: u32) -> Kernel {
    let code = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut inst = parse_asm(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            inst.addr = ENTRY + 4 * i as u64;
            inst.words = vec![0];
            inst
        })
        .collect();
    Kernel::new(
        "test_kernel".into(),
        generation,
        KernelDescriptor {
            group_segment_fixed_size: lds,
            kernarg_size: 16,
            entry: ENTRY,
            compute_pgm_rsrc2: rsrc2,
            kernel_code_properties: KCP,
            ..KernelDescriptor::default()
        },
        KernelMeta {
            vgpr_count: 8,
            wavefront_size: 32,
            kernarg_segment_size: 16,
            ..KernelMeta::default()
        },
        code,
        HashMap::new(),
    )
}

/// Launches `k` with one pointer argument to a fresh `len`-byte allocation `out`.
fn run(k: &Kernel, dims: Dims, len: usize) -> (Result<LaunchStats, Fault>, GlobalMemory, u64) {
    run_under(k, dims, len, Schedule::IN_ORDER)
}

/// As [`run`], under `schedule`.
fn run_under(
    k: &Kernel,
    dims: Dims,
    len: usize,
    schedule: Schedule,
) -> (Result<LaunchStats, Fault>, GlobalMemory, u64) {
    let mut g = GlobalMemory::default();
    let out = g.alloc(len, "out");
    let mut args = out.to_le_bytes().to_vec();
    args.resize(16, 0);
    let ka = kernarg::place(&mut g, k, &args, &dims).unwrap();
    let limits = Limits {
        max_instructions_per_wave: 1000,
        schedule,
    };
    (launch(k, &dims, ka, &mut g, &limits), g, out)
}

fn word(g: &GlobalMemory, at: u64) -> u32 {
    let mut b = [0u8; 4];
    g.read(at, &mut b, 0).unwrap();
    u32::from_le_bytes(b)
}

fn dims(grid: [u32; 3], block: [u32; 3]) -> Dims {
    Dims {
        grid,
        block,
        dynamic_lds: 0,
    }
}

#[test]
fn each_work_item_stores_its_packed_id_through_the_kernarg_pointer() {
    for (generation, wait) in [
        (Gen::Gfx11, "s_waitcnt lgkmcnt(0)"),
        (Gen::Gfx12, "s_wait_kmcnt 0x0"),
    ] {
        // y and z ids only: v0 = y << 10 | z << 20 is a distinct, non-overlapping byte offset.
        let k = kernel(
            generation,
            &[
                "s_load_b64 s[4:5], s[0:1], 0x0",
                wait,
                "global_store_b32 v0, v0, s[4:5]",
                "s_endpgm",
            ],
            rsrc2(2, 3),
            0,
        );
        let (stats, g, out) = run(&k, dims([3, 1, 1], [1, 16, 4]), 4 << 20);
        let stats = stats.unwrap();
        assert_eq!(
            stats,
            LaunchStats {
                workgroups: 3,
                waves: 6,
                wave_instructions: 6 * 4
            }
        );
        for z in 0..4u32 {
            for y in 0..16u32 {
                let id = y << 10 | z << 20;
                assert_eq!(word(&g, out + id as u64), id, "{generation:?} y {y} z {z}");
            }
        }
    }
}

#[test]
fn initial_sgprs_follow_the_descriptor_per_generation() {
    let d = dims([4, 3, 1], [40, 1, 1]);
    let state = |generation, rsrc2| {
        let k = kernel(generation, &["s_endpgm"], rsrc2, 0);
        let l = layout(&k, &d, None, 0x1234_5678_9ABC).unwrap();
        waves_of(&k, &l, &d, [2, 1, 0])
    };
    // gfx1151: kernarg pointer in s[0:1], workgroup ids right after.
    let w = state(Gen::Gfx11, rsrc2(2, 1));
    assert_eq!(w.len(), 2);
    assert_eq!((w[0].sgpr[0], w[0].sgpr[1]), (0x5678_9ABC, 0x1234));
    assert_eq!((w[1].sgpr[2], w[1].sgpr[3]), (2, 1));
    assert_eq!(w[1].sgpr[4], POISON);
    // EXEC covers the lanes that exist; v0 holds x ids (wave 1: threads 32..40).
    assert_eq!((w[0].exec(), w[1].exec()), (u32::MAX, 0xFF));
    assert_eq!(w[1].vgpr[0][7], 39);
    assert_eq!(w[1].vgpr[0][8], POISON);
    // gfx1100: user SGPRs padded so that user + system = 16; the ids land in s14, s15.
    let w = state(Gen::Gfx11, rsrc2(14, 1));
    assert_eq!((w[0].sgpr[14], w[0].sgpr[15]), (2, 1));
    assert_eq!(w[0].sgpr[2], POISON);
    // gfx12: architected ids in ttmp9 (x) and ttmp7 (y | z << 16), none in SGPRs.
    let w = state(Gen::Gfx12, rsrc2(2, 1));
    assert_eq!(w[0].sgpr[sreg::TTMP0 + 9], 2);
    assert_eq!(w[0].sgpr[sreg::TTMP0 + 7], 1);
    assert_eq!(w[0].sgpr[2], POISON);
}

#[test]
fn a_user_sgpr_count_that_disagrees_with_the_enabled_sgprs_is_a_typed_fault() {
    for (generation, user) in [(Gen::Gfx12, 14), (Gen::Gfx11, 3), (Gen::Gfx11, 1)] {
        let k = kernel(generation, &["s_endpgm"], rsrc2(user, 1), 0);
        let (r, _, _) = run(&k, dims([1, 1, 1], [32, 1, 1]), 4);
        let f = r.unwrap_err();
        assert!(
            matches!(f.kind, FaultKind::Abi { .. }),
            "{generation:?} {user}: {f}"
        );
        assert!(f.to_string().contains("USER_SGPR_COUNT"), "{f}");
    }
    let mut k = kernel(Gen::Gfx11, &["s_endpgm"], rsrc2(2, 1), 0);
    k.descriptor.kernel_code_properties |= KCP_QUEUE_PTR;
    let (r, _, _) = run(&k, dims([1, 1, 1], [32, 1, 1]), 4);
    assert!(r.unwrap_err().to_string().contains("queue pointer"));
}

#[test]
fn the_dispatch_pointer_points_at_a_dispatch_packet() {
    let mut g = GlobalMemory::default();
    let k = kernel(Gen::Gfx11, &["s_endpgm"], rsrc2(4, 1), 0);
    let d = Dims {
        grid: [3, 2, 1],
        block: [64, 2, 1],
        dynamic_lds: 256,
    };
    let p = dispatch_packet(&mut g, &k, &d, 0xABCD).unwrap();
    let mut b = [0u8; 64];
    g.read(p, &mut b, 0).unwrap();
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!((u16_at(0), u16_at(2)), (2, 3));
    assert_eq!((u16_at(4), u16_at(6), u16_at(8)), (64, 2, 1));
    assert_eq!((u32_at(12), u32_at(16), u32_at(20)), (192, 4, 1));
    assert_eq!((u32_at(28), u32_at(40)), (256, 0xABCD));
    // A kernel that asks for it reads it through s[0:1], its kernarg pointer following.
    let mut k = kernel(
        Gen::Gfx11,
        &[
            "s_load_b32 s8, s[0:1], 0xc",
            "s_load_b64 s[6:7], s[2:3], 0x0",
            "s_waitcnt lgkmcnt(0)",
            "s_endpgm",
        ],
        rsrc2(4, 1),
        0,
    );
    k.descriptor.kernel_code_properties |= KCP_DISPATCH_PTR;
    let (r, _, _) = run(&k, dims([2, 1, 1], [64, 1, 1]), 4);
    assert_eq!(r.unwrap().wave_instructions, 4 * 4);
}

fn exchange(generation: Gen, barrier: &[&str]) -> (GlobalMemory, u64) {
    exchange_under(generation, barrier, Schedule::IN_ORDER)
}

fn exchange_under(generation: Gen, barrier: &[&str], schedule: Schedule) -> (GlobalMemory, u64) {
    let (kwait, dswait) = match generation {
        Gen::Gfx11 => ("s_waitcnt lgkmcnt(0)", "s_waitcnt lgkmcnt(0)"),
        Gen::Gfx12 => ("s_wait_kmcnt 0x0", "s_wait_dscnt 0x0"),
    };
    let mut lines = vec![
        "s_load_b64 s[4:5], s[0:1], 0x0",
        kwait,
        "ds_store_b32 v0, v0",
        dswait,
    ];
    lines.extend(barrier);
    lines.extend([
        // Work-item y reads what y + 32 (the other wave) stored; 96 KiB of LDS, so y >= 32 read
        // never-written (poisoned) LDS.
        "ds_load_b32 v1, v0 offset:32768",
        dswait,
        "global_store_b32 v0, v1, s[4:5]",
        "s_endpgm",
    ]);
    let k = kernel(generation, &lines, rsrc2(2, 2), 96 << 10);
    let (r, g, out) = run_under(&k, dims([1, 1, 1], [1, 64, 1]), 64 << 10, schedule);
    r.unwrap();
    (g, out)
}

/// The two schedules agree on a kernel whose waves meet at a barrier, and disagree on the same
/// kernel without it: the second schedule runs the storing wave first. The harness reruns each
/// kernel under the other schedule (its determinism check), so a missing barrier fails there.
#[test]
fn a_missing_barrier_shows_as_a_difference_between_schedules() {
    let words = |g: &GlobalMemory, out: u64| -> Vec<u32> {
        (0..64u32)
            .map(|y| word(g, out + (y << 10) as u64))
            .collect()
    };
    for (generation, barrier) in [
        (Gen::Gfx11, &["s_barrier"][..]),
        (
            Gen::Gfx12,
            &["s_barrier_signal -1", "s_barrier_wait 0xffff"][..],
        ),
    ] {
        let (a, at) = exchange_under(generation, barrier, Schedule::IN_ORDER);
        let (b, bt) = exchange_under(generation, barrier, Schedule::INTERLEAVED);
        assert_eq!(words(&a, at), words(&b, bt), "{generation:?}");
        let (a, at) = exchange_under(generation, &[], Schedule::IN_ORDER);
        let (b, bt) = exchange_under(generation, &[], Schedule::INTERLEAVED);
        assert_eq!(word(&a, at), POISON, "{generation:?}");
        assert_eq!(
            word(&b, bt),
            32 << 10,
            "{generation:?}: wave 1 stored first"
        );
    }
}

/// Workgroups that all store to one word leave the last one's id under each schedule: the
/// order is reversed, and every workgroup still runs once.
#[test]
fn the_interleaved_schedule_runs_the_workgroups_last_to_first() {
    let k = kernel(
        Gen::Gfx11,
        &[
            "s_load_b64 s[4:5], s[0:1], 0x0",
            "s_waitcnt lgkmcnt(0)",
            "v_mov_b32_e32 v1, s2",
            "v_mov_b32_e32 v2, 0",
            "global_store_b32 v2, v1, s[4:5]",
            "s_endpgm",
        ],
        rsrc2(2, 1),
        0,
    );
    let grid = dims([5, 1, 1], [32, 1, 1]);
    let (a, g, out) = run_under(&k, grid, 4, Schedule::IN_ORDER);
    assert_eq!(a.unwrap().workgroups, 5);
    assert_eq!(word(&g, out), 4);
    let (b, g, out) = run_under(&k, grid, 4, Schedule::INTERLEAVED);
    assert_eq!(b.unwrap().workgroups, 5);
    assert_eq!(word(&g, out), 0);
}

#[test]
fn lds_exchange_across_two_waves_needs_the_barrier() {
    for (generation, barrier) in [
        (Gen::Gfx11, &["s_barrier"][..]),
        (
            Gen::Gfx12,
            &["s_barrier_signal -1", "s_barrier_wait 0xffff"][..],
        ),
    ] {
        let (g, out) = exchange(generation, barrier);
        for y in 0..64u32 {
            let want = if y < 32 { (y + 32) << 10 } else { POISON };
            assert_eq!(
                word(&g, out + (y << 10) as u64),
                want,
                "{generation:?} y {y}"
            );
        }
        // Without it, wave 0 reads before wave 1 has stored: poison.
        let (g, out) = exchange(generation, &[]);
        assert_eq!(word(&g, out), POISON, "{generation:?} without a barrier");
    }
}

#[test]
fn gfx12_barrier_misuse_is_a_fault() {
    let k = kernel(
        Gen::Gfx12,
        &["s_barrier_wait 0xffff", "s_endpgm"],
        rsrc2(2, 1),
        0,
    );
    let (r, _, _) = run(&k, dims([1, 1, 1], [64, 1, 1]), 4);
    assert!(matches!(r.unwrap_err().kind, FaultKind::Barrier { .. }));
}

#[test]
fn a_loop_over_a_scalar_linked_list_runs_until_vcc_is_zero() {
    // Node i at out + 16 i: {next pointer, more = i < 4}.
    let k = kernel(
        Gen::Gfx11,
        &[
            "s_load_b64 s[4:5], s[0:1], 0x0",
            "s_waitcnt lgkmcnt(0)",
            "s_load_b32 vcc_lo, s[4:5], 0x8",
            "s_load_b64 s[4:5], s[4:5], 0x0",
            "s_waitcnt lgkmcnt(0)",
            "s_cbranch_vccnz 65532",
            "s_branch 1",
            "s_code_end",
            "s_endpgm",
        ],
        rsrc2(2, 1),
        0,
    );
    let mut g = GlobalMemory::default();
    let out = g.alloc(80, "list");
    for i in 0..5u64 {
        g.write(out + 16 * i, &(out + 16 * (i + 1)).to_le_bytes(), 0)
            .unwrap();
        g.write(out + 16 * i + 8, &u32::from(i < 4).to_le_bytes(), 0)
            .unwrap();
    }
    let d = dims([1, 1, 1], [32, 1, 1]);
    let mut args = out.to_le_bytes().to_vec();
    args.resize(16, 0);
    let ka = kernarg::place(&mut g, &k, &args, &d).unwrap();
    let stats = launch(&k, &d, ka, &mut g, &Limits::default()).unwrap();
    // 2 before the loop, 5 iterations of 4, the branch over s_code_end and s_endpgm.
    assert_eq!(stats.wave_instructions, 2 + 5 * 4 + 2);
}

#[test]
fn a_hang_is_caught_by_the_guard_with_its_place() {
    let k = kernel(Gen::Gfx11, &["s_nop 0", "s_branch 65535"], rsrc2(2, 1), 0);
    let (r, _, _) = run(&k, dims([2, 1, 1], [64, 1, 1]), 4);
    let f = r.unwrap_err();
    assert_eq!(f.kind, FaultKind::Hang { executed: 1000 });
    assert_eq!((f.at, f.workgroup, f.wave), (ENTRY + 4, [0, 0, 0], 0));
    assert!(f.inst.starts_with("s_branch"), "{}", f.inst);
    assert!(f.to_string().contains("test_kernel"), "{f}");
}

#[test]
fn falling_off_the_code_and_unknown_instructions_stop_with_their_address() {
    let k = kernel(Gen::Gfx11, &["s_nop 0", "s_code_end"], rsrc2(2, 1), 0);
    let (r, _, _) = run(&k, dims([1, 1, 1], [32, 1, 1]), 4);
    let f = r.unwrap_err();
    assert_eq!((f.kind.clone(), f.at), (FaultKind::CodeEnd, ENTRY + 4));
    let mut k = kernel(Gen::Gfx11, &["s_nop 0"], rsrc2(2, 1), 0);
    let unknown = HashMap::from([(
        ENTRY + 4,
        ParseError::UnknownInstruction {
            mnemonic: "v_frobnicate".into(),
            addr: ENTRY + 4,
        },
    )]);
    k = Kernel::new(
        k.name.clone(),
        k.generation,
        k.descriptor,
        k.meta.clone(),
        k.code.clone(),
        unknown,
    );
    let (r, _, _) = run(&k, dims([1, 1, 1], [32, 1, 1]), 4);
    let f = r.unwrap_err();
    assert_eq!(
        f.kind,
        FaultKind::UnknownInstruction {
            mnemonic: "v_frobnicate".into()
        }
    );
    assert_eq!(f.at, ENTRY + 4);
    // A branch to an address that is no instruction faults at the branch.
    let k = kernel(Gen::Gfx11, &["s_branch 7", "s_endpgm"], rsrc2(2, 1), 0);
    let (r, _, _) = run(&k, dims([1, 1, 1], [32, 1, 1]), 4);
    let f = r.unwrap_err();
    assert_eq!(
        (f.kind.clone(), f.at),
        (FaultKind::BadBranch { target: ENTRY + 32 }, ENTRY)
    );
}

#[test]
fn an_out_of_bounds_store_names_kernel_instruction_lane_workgroup_and_wave() {
    let k = kernel(
        Gen::Gfx11,
        &[
            "s_load_b64 s[4:5], s[0:1], 0x0",
            "s_waitcnt lgkmcnt(0)",
            "global_store_b32 v0, v0, s[4:5] offset:4",
            "s_endpgm",
        ],
        rsrc2(2, 1),
        0,
    );
    // Work-item x stores at out + x + 4; out holds 40 B, so x = 33 (wave 1, lane 1) is first out.
    let (r, _, _) = run(&k, dims([2, 1, 1], [64, 1, 1]), 40);
    let f = r.unwrap_err();
    assert!(
        matches!(f.kind, FaultKind::OutOfBounds { lane: 1, .. }),
        "{f}"
    );
    assert_eq!((f.workgroup, f.wave, f.at), ([0, 0, 0], 1, ENTRY + 8));
    assert_eq!(f.inst, "global_store_b32 v0, v0, s[4:5] offset:4");
    let text = f.to_string();
    assert!(
        text.contains("test_kernel") && text.contains("`out`"),
        "{text}"
    );
}

/// The exchange kernel above (work-item y stores at y KiB, then reads at y + 32 KiB), launched
/// under `tool`: its findings.
fn exchange_sanitized(
    generation: Gen,
    barrier: &[&str],
    tool: crate::sanitize::Tool,
) -> Vec<crate::sanitize::Finding> {
    let dswait = match generation {
        Gen::Gfx11 => "s_waitcnt lgkmcnt(0)",
        Gen::Gfx12 => "s_wait_dscnt 0x0",
    };
    let mut lines = vec!["ds_store_b32 v0, v0", dswait];
    lines.extend(barrier);
    lines.extend(["ds_load_b32 v1, v0 offset:32768", dswait, "s_endpgm"]);
    let k = kernel(generation, &lines, rsrc2(2, 2), 96 << 10);
    let mut g = GlobalMemory::default();
    let d = dims([1, 1, 1], [1, 64, 1]);
    let ka = kernarg::place(&mut g, &k, &[0; 16], &d).unwrap();
    let mut s = crate::sanitize::Sanitizer::new(tool);
    let (_, findings) = launch_sanitized(&k, &d, ka, &mut g, &Limits::default(), &mut s).unwrap();
    findings
}

#[test]
fn racecheck_names_both_instructions_of_a_missing_barrier_and_passes_with_it() {
    use crate::sanitize::{Kind, Tool, What};
    for (generation, barrier) in [
        (Gen::Gfx11, &["s_barrier"][..]),
        (
            Gen::Gfx12,
            &["s_barrier_signal -1", "s_barrier_wait 0xffff"][..],
        ),
    ] {
        assert_eq!(
            exchange_sanitized(generation, barrier, Tool::Racecheck),
            vec![],
            "{generation:?}"
        );
        let found = exchange_sanitized(generation, &[], Tool::Racecheck);
        // Wave 0 reads at 32 KiB + y before wave 1 stores there: a write after a read.
        match &found[0].what {
            What::Race {
                earlier,
                later,
                address,
            } => {
                assert_eq!(
                    (earlier.0, earlier.1.wave),
                    (Kind::Read, 0),
                    "{generation:?}"
                );
                assert_eq!((later.0, later.1.wave), (Kind::Write, 1), "{generation:?}");
                assert_eq!(earlier.1.mnemonic, "ds_load_b32");
                assert_eq!(later.1.mnemonic, "ds_store_b32");
                assert_eq!(*address, 32 << 10);
                assert_eq!(found[0].kernel, "test_kernel");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn racecheck_reports_a_barrier_signalled_with_an_lds_store_in_flight() {
    use crate::sanitize::{Tool, What};
    let k = kernel(
        Gen::Gfx11,
        &["ds_store_b32 v0, v0", "s_barrier", "s_endpgm"],
        rsrc2(2, 2),
        4 << 10,
    );
    let mut g = GlobalMemory::default();
    let d = dims([1, 1, 1], [1, 1, 1]);
    let ka = kernarg::place(&mut g, &k, &[0; 16], &d).unwrap();
    let mut s = crate::sanitize::Sanitizer::new(Tool::Racecheck);
    let (_, found) = launch_sanitized(&k, &d, ka, &mut g, &Limits::default(), &mut s).unwrap();
    assert!(
        matches!(&found[0].what, What::InFlightAtBarrier { barrier, in_flight }
            if barrier.mnemonic == "s_barrier" && in_flight.mnemonic == "ds_store_b32"),
        "{found:?}"
    );
}

#[test]
fn initcheck_names_the_lanes_that_read_lds_no_wave_wrote() {
    use crate::sanitize::{Tool, What};
    let found = exchange_sanitized(Gen::Gfx11, &["s_barrier"], Tool::Initcheck);
    // Work-items 32..63 (wave 1) read at 64 KiB and up, which nothing stored.
    assert_eq!(found.len(), 1, "{found:?}");
    match &found[0].what {
        What::Uninitialised {
            space: crate::fault::Space::Lds,
            address,
            site,
            ..
        } => {
            assert_eq!((site.wave, site.lane), (1, 0));
            assert_eq!(*address, 64 << 10);
            assert_eq!(site.mnemonic, "ds_load_b32");
        }
        other => panic!("{other:?}"),
    }
}
