//! The ISA emulator's sanitizer findings as [`SanitizerReport`]s: compute-sanitizer's report
//! layout, so the harness's one parser classifies them (`Race reported between` → a race,
//! `Uninitialized __shared__ memory read` → initcheck), finds the kernel (`w4a16_…`), the thread
//! (`by thread (t,0,0)`: the work-item's flat index in its workgroup, wave × 32 + lane), the block
//! and the address.

use w4a16_emu::fault::Space;
use w4a16_emu::sanitize::{Finding, Kind, Site, What};

use crate::sanitize::{EmuSanitizer, SanitizerReport};

impl From<EmuSanitizer> for w4a16_emu::sanitize::Tool {
    fn from(t: EmuSanitizer) -> Self {
        match t {
            EmuSanitizer::Racecheck => w4a16_emu::sanitize::Tool::Racecheck,
            EmuSanitizer::Initcheck => w4a16_emu::sanitize::Tool::Initcheck,
        }
    }
}

fn access(kind: Kind) -> &'static str {
    match kind {
        Kind::Read => "Read",
        Kind::Write => "Write",
    }
}

/// `w4a16_x+0x1a0 (ds_load_b128, wave 1, lane 3)`.
fn place(f: &Finding, s: &Site) -> String {
    format!(
        "{}+{:#x} ({}, wave {}, lane {})",
        f.kernel,
        s.at.saturating_sub(f.entry),
        s.mnemonic,
        s.wave,
        s.lane
    )
}

fn thread_and_block(f: &Finding, s: &Site) -> String {
    let [x, y, z] = f.workgroup;
    format!(
        "    by thread ({},0,0) in block ({x},{y},{z})",
        s.wave * 32 + s.lane as usize
    )
}

/// A finding in compute-sanitizer's report layout.
pub fn report(f: &Finding) -> SanitizerReport {
    let lines = match &f.what {
        What::Race {
            earlier,
            later,
            address,
        } => {
            let hazard = match (earlier.0, later.0) {
                (Kind::Write, Kind::Write) => "WAW",
                (Kind::Write, Kind::Read) => "RAW",
                _ => "WAR",
            };
            vec![
                format!(
                    "Error: Race reported between {} access at {} and {} access at {} ({hazard} hazard, same barrier epoch)",
                    access(earlier.0),
                    place(f, &earlier.1),
                    access(later.0),
                    place(f, &later.1),
                ),
                thread_and_block(f, &later.1),
                format!("    Address {address:#x} of __shared__ memory (LDS byte offset)"),
            ]
        }
        What::InFlightAtBarrier { barrier, in_flight } => vec![
            format!(
                "Error: Race reported between an LDS access in flight at {} and the barrier at {}: the wave signalled the barrier before waiting for it (s_waitcnt lgkmcnt / s_wait_dscnt)",
                place(f, in_flight),
                place(f, barrier),
            ),
            thread_and_block(f, barrier),
        ],
        What::Uninitialised {
            space,
            address,
            bytes,
            site,
            allocation,
        } => {
            let (space_name, whose) = match space {
                Space::Lds => (
                    "__shared__",
                    "of __shared__ memory (LDS byte offset), never written by the workgroup"
                        .to_string(),
                ),
                _ => (
                    "__global__",
                    format!(
                        "in `{}`, never written (not uploaded as an input, not stored)",
                        allocation.as_deref().unwrap_or("?")
                    ),
                ),
            };
            vec![
                format!("Uninitialized {space_name} memory read of size {bytes} bytes"),
                format!("    at {}", place(f, site)),
                thread_and_block(f, site),
                format!("    Address {address:#x} {whose}"),
            ]
        }
    };
    SanitizerReport {
        kernel: f.kernel.clone(),
        lines,
    }
}
