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
        (2, FaultClass::Call),
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
