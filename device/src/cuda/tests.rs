use super::*;

#[test]
fn sticky_faults_are_classified_sticky() {
    for c in [
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
        CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUresult::CUDA_ERROR_LAUNCH_FAILED,
        CUresult::CUDA_ERROR_ASSERT,
    ] {
        assert_eq!(classify(c), FaultClass::Sticky, "{c:?}");
        assert!(DeviceFault::from_status(classify(c), "sync", &code_name(c)).context_unusable());
    }
}

#[test]
fn refused_launches_keep_the_context() {
    for c in [
        CUresult::CUDA_ERROR_INVALID_VALUE,
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        CUresult::CUDA_ERROR_NOT_FOUND,
        CUresult::CUDA_ERROR_INVALID_PTX,
    ] {
        assert_eq!(classify(c), FaultClass::Launch, "{c:?}");
        assert!(!DeviceFault::from_status(classify(c), "launch", &code_name(c)).context_unusable());
    }
    assert_eq!(
        classify(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        FaultClass::OutOfMemory
    );
    let oom = DeviceFault::from_status(
        classify(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        "allocating 4096 bytes",
        &code_name(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
    );
    assert!(!oom.context_unusable());
    assert_eq!(oom.kind(), "out-of-memory");
    assert!(oom.to_string().contains("--jobs"), "{oom}");
    assert_eq!(
        classify(CUresult::CUDA_ERROR_ECC_UNCORRECTABLE),
        FaultClass::Fatal
    );
}

#[test]
fn status_names_need_no_driver() {
    assert_eq!(
        code_name(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        "CUDA_ERROR_ILLEGAL_ADDRESS"
    );
}

#[test]
fn only_sm90_maps_to_a_target() {
    assert_eq!(target_for_compute_capability(9, 0), Ok(Target::Sm90));
    let err = target_for_compute_capability(8, 6).unwrap_err().to_string();
    assert!(err.contains("sm_86") && err.contains("sm_90"), "{err}");
}
