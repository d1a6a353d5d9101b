use super::*;

#[test]
fn arch_names_map_to_targets() {
    assert_eq!(
        target_for_arch("gfx1151:sramecc-:xnack-"),
        Ok(Target::Gfx1151)
    );
    assert_eq!(target_for_arch("gfx1100"), Ok(Target::Gfx1100));
    assert_eq!(target_for_arch("gfx1201"), Ok(Target::Gfx1201));
    assert_eq!(
        target_for_arch("gfx942:sramecc+:xnack-"),
        Ok(Target::Gfx942)
    );
    let err = target_for_arch("gfx1030").unwrap_err().to_string();
    assert!(err.contains("gfx1030") && err.contains("gfx1151"), "{err}");
    assert!(target_for_arch("sm_90").is_err());
}

#[test]
fn faults_are_classified_like_cuda() {
    for (code, class) in [
        (700, FaultClass::Sticky),
        (719, FaultClass::Sticky),
        (710, FaultClass::Sticky),
        (100, FaultClass::Fatal),
        (1, FaultClass::Launch),
        (701, FaultClass::Launch),
        (500, FaultClass::Launch),
        (2, FaultClass::OutOfMemory),
    ] {
        assert_eq!(classify(code), class, "{}", code_name(code));
    }
    assert!(DeviceFault::from_status(classify(700), "sync", &code_name(700)).context_unusable());
    assert_eq!(code_name(700), "hipErrorIllegalAddress");
    assert_eq!(code_name(12345), "hipError(12345)");
}

#[test]
fn launch_parameter_markers_match_hip() {
    // hip_runtime_api.h: HIP_LAUNCH_PARAM_BUFFER_POINTER ((void*)0x01), _SIZE 0x02, _END 0x03
    assert_eq!(
        (
            ffi::LAUNCH_PARAM_BUFFER_POINTER,
            ffi::LAUNCH_PARAM_BUFFER_SIZE,
            ffi::LAUNCH_PARAM_END
        ),
        (1, 2, 3)
    );
}

/// The layout the emulated HIP runtime writes (`hip-emu/src/props.rs` pins the same numbers):
/// `hipDeviceProp_t` of hip-sys, 792 bytes, `name` at 0, `gcnArchName` at 396. If hip-sys's
/// bindings move, both sides must move together.
#[test]
fn device_properties_layout_matches_the_emulated_runtime() {
    assert_eq!(std::mem::size_of::<hipDeviceProp_t>(), 792);
    assert_eq!(std::mem::offset_of!(hipDeviceProp_t, name), 0);
    assert_eq!(std::mem::offset_of!(hipDeviceProp_t, gcnArchName), 396);
}

/// Opened on the emulated HIP runtime (`.ci/run` puts it on `LD_LIBRARY_PATH`), the device is
/// the target `W4A16_HIP_EMU_TARGET` names and its name says it is emulated; on a real AMD GPU
/// the name does not; with neither, the usual loud skip.
#[test]
fn an_emulated_runtime_names_itself_in_the_device_name() {
    match RocmDevice::open(0) {
        Ok(dev) if on_emulated_runtime() => {
            let name = DeviceInfo::name(&dev);
            assert!(name.contains("emulated HIP runtime"), "{name}");
            // Its hipBLAS, where one is found, is the stand-in, and the name says so.
            if HipBlas::get().is_ok_and(|l| l.stand_in().is_some()) {
                assert!(
                    name.contains("hipBLAS stand-in on the emulated HIP runtime"),
                    "{name}"
                );
            }
            let want = std::env::var("W4A16_HIP_EMU_TARGET").unwrap_or_else(|_| "gfx1151".into());
            assert_eq!(DeviceInfo::target(&dev).name(), want);
            assert_eq!(dev.arch_name(), want);
        }
        Ok(dev) => assert!(!DeviceInfo::name(&dev).contains("emulated HIP runtime")),
        Err(skip) => assert!(skip.reason.starts_with("no AMD device"), "{}", skip.reason),
    }
}
