//! The `rocm` backend (cargo feature `rocm`). On a machine with an AMD GPU it opens the device,
//! maps its gfx target and loads every entry of the kernel set with its ABI check; without one
//! it reports "no AMD device" as a loud skip (a failure under `W4A16_REQUIRE=gpu`).
#![cfg(feature = "rocm")]

use w4a16_harness::codeobject;
use w4a16_harness::device::rocm;
use w4a16_harness::device::{Device, DeviceFault};
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_kernels::target::Vendor;
use w4a16_kernels::{Target, set};
use w4a16_reference::ActDtype;

#[test]
fn an_amd_device_loads_every_entry_or_the_skip_says_no_amd_device() {
    match rocm::open() {
        Ok(dev) => {
            let t = Device::target(&dev);
            assert_eq!(t.vendor(), Vendor::Amd, "{}", Device::name(&dev));
            assert!(
                dev.arch_name().starts_with(t.name()),
                "{} vs {t}",
                dev.arch_name()
            );
            for decl in set::all().into_iter().filter(|d| d.source_file.is_some()) {
                for dtype in ActDtype::ALL {
                    for entry in decl.entries(dtype) {
                        dev.load(decl, &entry)
                            .unwrap_or_else(|e| panic!("{entry} on {t}: {e}"));
                    }
                }
            }
        }
        Err(skip) => {
            assert_eq!(skip.requirement, Requirement::Gpu);
            assert!(skip.reason.starts_with("no AMD device"), "{}", skip.reason);
            skip_or_fail(&skip);
        }
    }
}

/// Code-object selection by target: the object the backend would load for each target is the
/// one built for that target, and holds every declared entry.
#[test]
fn code_objects_are_selected_by_target() {
    for target in Target::AMD_CODE_OBJECT_TARGETS {
        for decl in set::all().into_iter().filter(|d| d.source_file.is_some()) {
            let path = match rocm::code_object_for(decl, target, &Default::default()) {
                Ok(p) => p,
                Err(DeviceFault::Compile { log, .. }) if log.contains("AMD toolchain missing") => {
                    skip_or_fail(&Skip {
                        requirement: Requirement::AmdToolchain,
                        reason: log,
                    });
                    return;
                }
                Err(e) => panic!("{e}"),
            };
            let info =
                codeobject::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(info.gfx(), target.name(), "{}", path.display());
            for dtype in ActDtype::ALL {
                for entry in decl.entries(dtype) {
                    assert!(
                        info.kernel(&entry).is_some(),
                        "{} lacks {entry}",
                        path.display()
                    );
                }
            }
        }
    }
}
