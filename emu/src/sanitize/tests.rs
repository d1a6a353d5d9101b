//! The shadow rules on hand-made access sequences (the launches that exercise them through
//! real instructions are in `dispatch/tests.rs`).

use super::*;

fn clock(wave: usize, signals: u32, waits: u32) -> Clock {
    Clock {
        wave,
        signals,
        waits,
    }
}

fn race_sanitizer() -> Sanitizer {
    let mut s = Sanitizer::new(Tool::Racecheck);
    s.begin_workgroup([0; 3], 1024);
    s
}

#[test]
fn a_read_of_another_waves_write_in_the_same_epoch_is_a_race_naming_both() {
    let mut s = race_sanitizer();
    s.set_clock(clock(1, 0, 0));
    s.lds(Kind::Write, 0x100, 3, 64, 4);
    s.set_clock(clock(0, 0, 0));
    s.lds(Kind::Read, 0x140, 7, 66, 4);
    let f = &s.findings[0];
    match &f.what {
        What::Race {
            earlier,
            later,
            address,
        } => {
            assert_eq!(*address, 66);
            assert_eq!(
                (earlier.0, earlier.1.at, earlier.1.wave, earlier.1.lane),
                (Kind::Write, 0x100, 1, 3)
            );
            assert_eq!(
                (later.0, later.1.at, later.1.wave, later.1.lane),
                (Kind::Read, 0x140, 0, 7)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_barrier_between_orders_the_accesses_and_one_wave_never_races_with_itself() {
    let mut s = race_sanitizer();
    s.set_clock(clock(1, 0, 0));
    s.lds(Kind::Write, 0x100, 0, 0, 16);
    s.lds(Kind::Read, 0x104, 0, 0, 16);
    s.lds(Kind::Write, 0x108, 1, 8, 4);
    // Wave 0 after the barrier both waves signalled.
    s.set_clock(clock(0, 1, 1));
    s.lds(Kind::Read, 0x140, 0, 0, 16);
    assert!(s.findings.is_empty(), "{:?}", s.findings);
}

#[test]
fn a_write_after_another_waves_read_in_the_same_epoch_is_a_race() {
    let mut s = race_sanitizer();
    s.set_clock(clock(2, 3, 3));
    s.lds(Kind::Read, 0x200, 5, 128, 4);
    s.set_clock(clock(0, 3, 3));
    s.lds(Kind::Read, 0x200, 5, 128, 4);
    s.lds(Kind::Write, 0x210, 9, 128, 4);
    match &s.findings[0].what {
        What::Race { earlier, later, .. } => {
            assert_eq!((earlier.0, earlier.1.wave), (Kind::Read, 2));
            assert_eq!((later.0, later.1.wave), (Kind::Write, 0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_access_after_a_split_signal_is_not_ordered_before_the_others_wait() {
    let mut s = race_sanitizer();
    // Wave 1 signalled barrier 1 (signals 1) but has not waited: its write is after the signal.
    s.set_clock(clock(1, 1, 0));
    s.lds(Kind::Write, 0x300, 0, 0, 4);
    s.set_clock(clock(0, 1, 1));
    s.lds(Kind::Read, 0x340, 0, 0, 4);
    assert_eq!(s.findings.len(), 1);
}

#[test]
fn a_new_workgroup_starts_with_a_clean_shadow_and_findings_are_kept_once_per_pair() {
    let mut s = race_sanitizer();
    s.set_clock(clock(1, 0, 0));
    s.lds(Kind::Write, 0x100, 0, 0, 4);
    s.set_clock(clock(0, 0, 0));
    s.lds(Kind::Read, 0x140, 0, 0, 4);
    s.lds(Kind::Read, 0x140, 1, 0, 4);
    assert_eq!(s.findings.len(), 1);
    s.begin_workgroup([1, 0, 0], 1024);
    s.set_clock(clock(0, 0, 0));
    s.lds(Kind::Read, 0x180, 0, 0, 4);
    assert_eq!(s.findings.len(), 1);
}

#[test]
fn initcheck_reports_the_first_unwritten_lds_byte_and_a_new_workgroup_forgets_writes() {
    let mut s = Sanitizer::new(Tool::Initcheck);
    s.begin_workgroup([0; 3], 256);
    s.lds(Kind::Write, 0x10, 0, 0, 4);
    s.lds(Kind::Read, 0x20, 0, 0, 4);
    assert!(s.findings.is_empty());
    s.lds(Kind::Read, 0x24, 2, 2, 4);
    match &s.findings[0].what {
        What::Uninitialised {
            space: Space::Lds,
            address: 4,
            site,
            ..
        } => assert_eq!((site.at, site.lane), (0x24, 2)),
        other => panic!("{other:?}"),
    }
    s.begin_workgroup([1, 0, 0], 256);
    s.lds(Kind::Read, 0x28, 0, 0, 4);
    assert_eq!(s.findings.len(), 2);
}

#[test]
fn initcheck_on_global_memory_uploads_initialise_poison_and_allocations_do_not() {
    let mut g = GlobalMemory::default();
    g.track_initialisation();
    let x = g.alloc(16, "x");
    let y = g.alloc(16, "y");
    g.write(x, &[1; 16], 0).unwrap();
    g.write_uninitialised(y, &[0xFF; 16]).unwrap();
    let mut s = Sanitizer::new(Tool::Initcheck);
    s.begin_workgroup([0; 3], 0);
    let mut addrs = [x; LANES];
    addrs[1] = x + 12;
    s.vmem_load(&g, 0x40, &addrs, 0b11, 4);
    assert!(s.findings.is_empty());
    addrs[1] = y + 4;
    s.vmem_load(&g, 0x44, &addrs, 0b11, 4);
    assert!(matches!(
        &s.findings[0].what,
        What::Uninitialised { space: Space::Global, address, allocation: Some(l), .. }
            if *address == y + 4 && l == "y"
    ));
    s.global_store(&mut g, &addrs, 0b10, 4);
    s.vmem_load(&g, 0x48, &addrs, 0b10, 4);
    assert_eq!(s.findings.len(), 1);
}
