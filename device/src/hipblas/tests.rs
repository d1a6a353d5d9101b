use super::*;
use crate::BlasGemm;
use std::mem::size_of;

/// Size of a C parameter type of the prototypes (enums are C `int`s on every ROCm ABI).
fn c_size(ty: &str) -> Option<usize> {
    let ptr = size_of::<*const c_void>();
    Some(match ty {
        "hipblasHandle_t" | "hipblasHandle_t*" | "hipStream_t" | "const void*" | "void*" => ptr,
        "int"
        | "hipblasOperation_t"
        | "hipDataType"
        | "hipblasDatatype_t"
        | "hipblasComputeType_t"
        | "hipblasGemmAlgo_t"
        | "hipblasPointerMode_t"
        | "hipblasAtomicsMode_t" => size_of::<c_int>(),
        _ => return None,
    })
}

/// `hipblasStatus_t NAME(TYPE name, …)` → (NAME, [TYPE]).
fn parse(prototype: &str) -> (String, Vec<String>) {
    let (head, rest) = prototype.split_once('(').expect("a parameter list");
    let name = head
        .strip_prefix("hipblasStatus_t ")
        .expect("returns hipblasStatus_t");
    let params = rest.strip_suffix(')').expect("closing parenthesis");
    let types = params
        .split(',')
        .map(|p| {
            let words: Vec<&str> = p.split_whitespace().collect();
            assert!(words.len() >= 2, "parameter `{p}` of {name}");
            words[..words.len() - 1].join(" ")
        })
        .collect();
    (name.trim().to_string(), types)
}

#[test]
fn the_symbol_table_matches_the_header_prototypes() {
    let mut names = Vec::new();
    for s in SYMBOLS {
        let (name, types) = parse(s.prototype);
        assert_eq!(name, s.name, "prototype of {}", s.name);
        assert!(
            s.name.starts_with("hipblas")
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{}",
            s.name
        );
        assert_eq!(
            types.len(),
            s.param_sizes.len(),
            "{}: the header has {} parameters, the Rust type {}",
            s.name,
            types.len(),
            s.param_sizes.len()
        );
        for (i, (ty, size)) in types.iter().zip(s.param_sizes).enumerate() {
            let want = c_size(ty).unwrap_or_else(|| panic!("{}: unknown C type `{ty}`", s.name));
            assert_eq!(*size, want, "{} parameter {i} (`{ty}`)", s.name);
        }
        assert!(!names.contains(&s.name), "{} twice", s.name);
        names.push(s.name);
    }
    // Everything the binding needs, and nothing else: the setup calls are required, the
    // GEMM is one of two alternatives chosen by `choose_gemm`.
    let required: Vec<&str> = SYMBOLS
        .iter()
        .filter(|s| s.required)
        .map(|s| s.name)
        .collect();
    assert_eq!(
        required,
        [
            "hipblasCreate",
            "hipblasDestroy",
            "hipblasSetStream",
            "hipblasSetPointerMode",
            "hipblasSetAtomicsMode"
        ]
    );
    for (v2, major) in [(true, None), (false, Some(3)), (false, Some(1))] {
        let (s, _) = choose_gemm(v2, major).unwrap();
        assert!(
            SYMBOLS.iter().any(|t| t.name == s.name && !t.required),
            "{}",
            s.name
        );
    }
    assert_eq!(GEMM_EX.param_sizes.len(), 19);
}

#[test]
fn every_status_value_has_a_typed_meaning() {
    let want = [
        (0, "HIPBLAS_STATUS_SUCCESS", StatusMeaning::Success),
        (
            1,
            "HIPBLAS_STATUS_NOT_INITIALIZED",
            StatusMeaning::Fault(FaultClass::Call),
        ),
        (
            2,
            "HIPBLAS_STATUS_ALLOC_FAILED",
            StatusMeaning::Fault(FaultClass::OutOfMemory),
        ),
        (
            3,
            "HIPBLAS_STATUS_INVALID_VALUE",
            StatusMeaning::Fault(FaultClass::Launch),
        ),
        (
            4,
            "HIPBLAS_STATUS_MAPPING_ERROR",
            StatusMeaning::Fault(FaultClass::Call),
        ),
        (
            5,
            "HIPBLAS_STATUS_EXECUTION_FAILED",
            StatusMeaning::Fault(FaultClass::Call),
        ),
        (
            6,
            "HIPBLAS_STATUS_INTERNAL_ERROR",
            StatusMeaning::Fault(FaultClass::Call),
        ),
        (
            7,
            "HIPBLAS_STATUS_NOT_SUPPORTED",
            StatusMeaning::Unsupported,
        ),
        (
            8,
            "HIPBLAS_STATUS_ARCH_MISMATCH",
            StatusMeaning::Unsupported,
        ),
        (
            9,
            "HIPBLAS_STATUS_HANDLE_IS_NULLPTR",
            StatusMeaning::Fault(FaultClass::Launch),
        ),
        (
            10,
            "HIPBLAS_STATUS_INVALID_ENUM",
            StatusMeaning::Fault(FaultClass::Launch),
        ),
        (
            11,
            "HIPBLAS_STATUS_UNKNOWN",
            StatusMeaning::Fault(FaultClass::Call),
        ),
    ];
    assert_eq!(want.len(), Status::KNOWN.len());
    for (raw, name, meaning) in want {
        let s = Status::from_raw(raw);
        assert_eq!(s.raw(), raw, "{name}");
        assert_eq!(s.name(), name);
        assert_eq!(s.meaning(), meaning, "{name}");
    }
    for raw in [-1, 12, 99, 1000, c_int::MIN, c_int::MAX] {
        let s = Status::from_raw(raw);
        assert_eq!(s, Status::Unrecognised(raw));
        assert_eq!(s.raw(), raw);
        assert_eq!(s.name(), format!("hipblasStatus({raw})"));
        assert_eq!(s.meaning(), StatusMeaning::Fault(FaultClass::Call));
    }
}

#[test]
fn statuses_become_typed_faults() {
    let during = "hipBLAS GEMM M=3 N=8 K=16";
    assert_eq!(Status::Success.check(during, "gfx1151"), Ok(()));
    match Status::ArchMismatch.check(during, "gfx1151") {
        Err(DeviceFault::MissingCapability {
            capability: Capability::VendorBlas,
            why: what,
            device,
        }) => {
            assert!(
                what.contains(during) && what.contains("ARCH_MISMATCH"),
                "{what}"
            );
            assert_eq!(device, "gfx1151");
        }
        other => panic!("{other:?}"),
    }
    let refused = Status::InvalidValue.check(during, "d").unwrap_err();
    assert!(
        matches!(refused, DeviceFault::Launch { ref code, .. } if code == "HIPBLAS_STATUS_INVALID_VALUE")
    );
    assert!(!refused.context_unusable());
    let failed = Status::Unrecognised(4242).check(during, "d").unwrap_err();
    assert!(matches!(failed, DeviceFault::Call { ref code, .. } if code == "hipblasStatus(4242)"));
    // hipBLAS never takes the context down by itself; the synchronisation after it does.
    for s in Status::KNOWN {
        if let Err(f) = s.check(during, "d") {
            assert!(!f.context_unusable(), "{}", s.name());
        }
    }
}

#[test]
fn the_gemm_abi_is_chosen_by_symbol_and_version() {
    assert_eq!(
        choose_gemm(true, Some(2)).map(|(s, a)| (s.name, a)),
        Some(("hipblasGemmEx_v2", GemmAbi::HipDataType))
    );
    // A hipBLAS 2 reached through an unversioned name still has `_v2`.
    assert_eq!(
        choose_gemm(true, None).map(|(_, a)| a),
        Some(GemmAbi::HipDataType)
    );
    for major in [3, 4] {
        assert_eq!(
            choose_gemm(false, Some(major)).map(|(s, a)| (s.name, a)),
            Some(("hipblasGemmEx", GemmAbi::HipDataType))
        );
    }
    for major in [0, 1] {
        assert_eq!(
            choose_gemm(false, Some(major)).map(|(s, a)| (s.name, a)),
            Some(("hipblasGemmEx", GemmAbi::Legacy))
        );
    }
    assert_eq!(choose_gemm(false, Some(2)), None);
    assert_eq!(choose_gemm(false, None), None);

    for (file, major) in [
        ("/opt/rocm-6.2.0/lib/libhipblas.so.2.2.60200", Some(2)),
        ("/opt/rocm/lib/libhipblas.so.3", Some(3)),
        ("/usr/lib/x86_64-linux-gnu/libhipblas.so.0.1", Some(0)),
        ("/opt/rocm/lib/libhipblas.so", None),
        ("/opt/rocm/lib/libhipblaslt.so.0", None),
        ("/opt/rocm/lib/libhipblas.so.x", None),
    ] {
        assert_eq!(soname_major(Path::new(file)), major, "{file}");
    }
}

#[test]
fn data_and_compute_types_are_fp16_bf16_with_fp32_compute() {
    // hip/library_types.h and hipblas-common.h (hipBLAS ≥ 2).
    assert_eq!(
        GemmAbi::HipDataType.types(ActDtype::F16),
        GemmTypes {
            data: 2,
            compute: 2
        }
    );
    assert_eq!(
        GemmAbi::HipDataType.types(ActDtype::Bf16),
        GemmTypes {
            data: 14,
            compute: 2
        }
    );
    // hipblasDatatype_t (hipBLAS < 3 without HIPBLAS_V2): the compute type is HIPBLAS_R_32F.
    assert_eq!(
        GemmAbi::Legacy.types(ActDtype::F16),
        GemmTypes {
            data: 150,
            compute: 151
        }
    );
    assert_eq!(
        GemmAbi::Legacy.types(ActDtype::Bf16),
        GemmTypes {
            data: 168,
            compute: 151
        }
    );
    assert_eq!((op_code(BlasOp::N), op_code(BlasOp::T)), (111, 112));
    assert_eq!(abi::HIPBLAS_GEMM_DEFAULT, 160);
}

#[test]
fn the_search_order_prefers_the_runtime_then_the_environment() {
    let dirs = search_dirs(
        Some(Path::new("/usr/lib/x86_64-linux-gnu")),
        Some(OsStr::new("/opt/rocm-6.2.0")),
        Some(OsStr::new("/usr")),
    );
    assert_eq!(
        dirs,
        [
            "/usr/lib/x86_64-linux-gnu",
            "/opt/rocm-6.2.0/lib",
            "/usr/lib",
            "/opt/rocm/lib"
        ]
        .map(PathBuf::from)
    );
    // Each directory once; empty variables ignored.
    let dirs = search_dirs(
        Some(Path::new("/opt/rocm/lib")),
        Some(OsStr::new("/opt/rocm")),
        Some(OsStr::new("")),
    );
    assert_eq!(dirs, [PathBuf::from("/opt/rocm/lib")]);

    let c = candidates(&[PathBuf::from("/a"), PathBuf::from("/b")]);
    let shown: Vec<String> = c.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "/a/libhipblas.so.3",
            "/a/libhipblas.so.2",
            "/a/libhipblas.so.1",
            "/a/libhipblas.so",
            "/b/libhipblas.so.3",
            "/b/libhipblas.so.2",
            "/b/libhipblas.so.1",
            "/b/libhipblas.so",
            "libhipblas.so.3 (system search)",
            "libhipblas.so.2 (system search)",
            "libhipblas.so.1 (system search)",
            "libhipblas.so (system search)",
        ]
    );
}

fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("w4a16-hipblas-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_directory_without_the_library_is_a_skip_naming_it_and_every_path_tried() {
    let dir = scratch_dir("empty");
    let only_files: Vec<Candidate> = candidates(std::slice::from_ref(&dir))
        .into_iter()
        .filter(|c| matches!(c, Candidate::File(_)))
        .collect();
    let err = HipBlas::load_from(&only_files).unwrap_err();
    let LoadError::NotFound { ref tried } = err else {
        panic!("{err:?}");
    };
    assert_eq!(tried.len(), LIBRARY_NAMES.len());
    assert!(tried.iter().all(|a| a.outcome == "absent"), "{tried:?}");
    let skip = err.skip();
    assert_eq!(skip.requirement, Requirement::Gpu);
    for name in LIBRARY_NAMES {
        let path = dir.join(name).display().to_string();
        assert!(skip.reason.contains(&path), "{} lacks {path}", skip.reason);
    }
    assert!(
        skip.reason.starts_with("hipBLAS (libhipblas"),
        "{}",
        skip.reason
    );
    let fault = err.fault("gfx1151 (AMD device 0)".into());
    assert_eq!(fault.kind(), "missing-capability");
    assert_eq!(fault.missing_capability(), Some(Capability::VendorBlas));
    assert!(fault.to_string().contains("hipBLAS") && fault.to_string().contains("gfx1151"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_does_not_load_is_reported_with_the_loaders_message() {
    let dir = scratch_dir("broken");
    let broken = dir.join("libhipblas.so.2");
    std::fs::write(&broken, b"not an ELF object").unwrap();
    let err = HipBlas::load_from(&[Candidate::File(broken.clone())]).unwrap_err();
    let LoadError::NotFound { tried } = err else {
        panic!("{err:?}");
    };
    assert_eq!(tried.len(), 1);
    assert_eq!(tried[0].candidate, Candidate::File(broken));
    assert_ne!(tried[0].outcome, "absent");
    assert!(!tried[0].outcome.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

// --- End to end through a stand-in library (testdata/hipblas_stub.c) ---------------------

/// Builds the stand-in as `dir/real_name` with `dir/link_name` → it; a loud skip (a failure
/// under `W4A16_REQUIRE=amd-toolchain`) without a C compiler.
fn stub(tag: &str, define: &str, real_name: &str, link_name: Option<&str>) -> Option<PathBuf> {
    let toolchain = match w4a16_kernels::amd::Toolchain::discover() {
        Ok(t) => t,
        Err(e) => {
            w4a16_require::skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: format!("building the hipBLAS stand-in: {e}"),
            });
            return None;
        }
    };
    let dir = scratch_dir(tag);
    let src = dir.join("hipblas_stub.c");
    std::fs::write(&src, include_str!("../../testdata/hipblas_stub.c")).unwrap();
    let out = std::process::Command::new(&toolchain.clang)
        .args([
            "-x",
            "c",
            "-std=c11",
            "-O1",
            "-ffp-contract=off",
            "-shared",
            "-fPIC",
        ])
        .arg(format!("-D{define}"))
        .arg("-o")
        .arg(dir.join(real_name))
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lib = match link_name {
        Some(l) => {
            std::os::unix::fs::symlink(real_name, dir.join(l)).unwrap();
            dir.join(l)
        }
        None => dir.join(real_name),
    };
    Some(lib)
}

type StateFn =
    unsafe extern "C" fn(RawHandle, *mut *mut c_void, *mut c_int, *mut c_int, *mut c_int);

/// (stream, pointer mode, atomics mode, live) of a stand-in handle.
fn state(lib: &Path, h: RawHandle) -> (*mut c_void, c_int, c_int, c_int) {
    // SAFETY: the stand-in is loaded already (this returns the same object); the symbol
    // has `StateFn`'s C type.
    unsafe {
        let l = Library::open(Some(lib.as_os_str()), RTLD_NOW | RTLD_LOCAL).unwrap();
        let f = *l.get::<StateFn>(b"stub_handle_state\0").unwrap();
        let (mut s, mut p, mut a, mut live) = (std::ptr::null_mut(), 0, 0, 0);
        f(h, &mut s, &mut p, &mut a, &mut live);
        std::mem::forget(l);
        (s, p, a, live)
    }
}

/// Row-major Y = X·Denseᵀ (+ the bias prefill, beta = 1) with padded strides through the
/// loaded binding, checked element by element; Y's row padding stays untouched.
fn gemm_through(blas: &'static HipBlas, lib: &Path) {
    let stream = 0x5eed0 as *mut c_void;
    // SAFETY: the stand-in never dereferences the stream.
    let handle = unsafe { blas.create_handle(stream) }.unwrap();
    assert_eq!(
        state(lib, handle.raw),
        (
            stream,
            abi::HIPBLAS_POINTER_MODE_HOST,
            abi::HIPBLAS_ATOMICS_NOT_ALLOWED,
            1
        )
    );
    let (m, n, k) = (3usize, 5usize, 8usize);
    let (x_ld, dense_ld, y_ld) = (k + 2, k + 4, n + 3);
    for dtype in ActDtype::ALL {
        let pad = dtype.from_f64(-99.0);
        let xv = |r: usize, c: usize| ((r * 3 + c) % 7) as f64 - 3.0;
        let wv = |r: usize, c: usize| ((r * 5 + c * 2) % 9) as f64 * 0.5 - 2.0;
        let bias = |c: usize| c as f64 - 1.5;
        let mut x = vec![pad; m * x_ld];
        let mut dense = vec![pad; n * dense_ld];
        let mut y = vec![pad; m * y_ld];
        for r in 0..m {
            for c in 0..k {
                x[r * x_ld + c] = dtype.from_f64(xv(r, c));
            }
            for c in 0..n {
                y[r * y_ld + c] = dtype.from_f64(bias(c));
            }
        }
        for r in 0..n {
            for c in 0..k {
                dense[r * dense_ld + c] = dtype.from_f64(wv(r, c));
            }
        }
        let g = BlasGemm {
            m,
            n,
            k,
            dtype,
            x_ld,
            dense_ld,
            y_ld,
            x_offset: 0,
            dense_offset: 0,
            y_offset: 0,
            beta: 1.0,
        };
        let call = g.column_major().unwrap();
        // SAFETY: host buffers holding the operands `call` describes (the stand-in runs
        // on the host).
        let status = unsafe {
            handle.gemm(
                &call,
                dtype,
                1.0,
                g.beta,
                dense.as_ptr().cast(),
                x.as_ptr().cast(),
                y.as_mut_ptr().cast(),
            )
        };
        assert_eq!(status, Status::Success, "{dtype}");
        for r in 0..m {
            for c in 0..y_ld {
                let got = y[r * y_ld + c];
                let want = if c < n {
                    let dot: f64 = (0..k).map(|p| xv(r, p) * wv(c, p)).sum();
                    dtype.from_f64(dot + bias(c))
                } else {
                    pad
                };
                assert_eq!(
                    got,
                    want,
                    "{dtype} Y[{r}, {c}] through {}",
                    blas.gemm_symbol()
                );
            }
        }
        // A leading dimension the library refuses comes back as a typed refusal.
        let bad = ColumnMajorGemm { lda: 1, ..call };
        // SAFETY: as above; the stand-in refuses before reading.
        let status = unsafe {
            handle.gemm(
                &bad,
                dtype,
                1.0,
                0.0,
                dense.as_ptr().cast(),
                x.as_ptr().cast(),
                y.as_mut_ptr().cast(),
            )
        };
        assert_eq!(status, Status::InvalidValue);
        assert!(matches!(
            status.check("gemm", "stub"),
            Err(DeviceFault::Launch { .. })
        ));
    }
    let raw = handle.raw;
    drop(handle);
    assert_eq!(state(lib, raw).3, 0, "the handle is destroyed on drop");
}

#[test]
fn each_hipblas_abi_is_loaded_and_called_correctly_end_to_end() {
    for (tag, define, real, link, symbol, gemm_abi) in [
        (
            "v2",
            "STUB_V2",
            "libhipblas.so.2.2.60200",
            "libhipblas.so.2",
            "hipblasGemmEx_v2",
            GemmAbi::HipDataType,
        ),
        (
            "v3",
            "STUB_V3",
            "libhipblas.so.3.0.0",
            "libhipblas.so.3",
            "hipblasGemmEx",
            GemmAbi::HipDataType,
        ),
        (
            "legacy",
            "STUB_LEGACY",
            "libhipblas.so.1.1.0",
            "libhipblas.so.1",
            "hipblasGemmEx",
            GemmAbi::Legacy,
        ),
    ] {
        let Some(lib) = stub(tag, define, real, Some(link)) else {
            return;
        };
        let blas = HipBlas::load_from(&[Candidate::File(lib.clone())])
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_eq!(
            blas.path().file_name().unwrap(),
            real,
            "{tag}: the real file, link resolved"
        );
        assert_eq!(
            (blas.gemm_symbol(), blas.gemm_abi()),
            (symbol, gemm_abi),
            "{tag}"
        );
        gemm_through(Box::leak(Box::new(blas)), &lib);
    }
}

#[test]
fn a_library_of_unknown_abi_is_refused_by_name_and_the_search_goes_on() {
    // A 2.x without `_v2`, and an unversioned file: neither can be placed.
    let Some(two) = stub("unknown2", "STUB_LEGACY", "libhipblas.so.2.0.0", None) else {
        return;
    };
    let Some(bare) = stub("unknown", "STUB_V3", "libhipblas.so", None) else {
        return;
    };
    let err = HipBlas::load_from(&[Candidate::File(two.clone())]).unwrap_err();
    assert_eq!(
        err,
        LoadError::UnknownAbi {
            path: two.clone(),
            major: Some(2)
        }
    );
    let err = HipBlas::load_from(&[Candidate::File(bare.clone())]).unwrap_err();
    assert_eq!(
        err,
        LoadError::UnknownAbi {
            path: bare.clone(),
            major: None
        }
    );
    assert!(
        err.to_string().contains(&bare.display().to_string()),
        "{err}"
    );
    // A usable library after a refused one is taken; the refusal is reported only when
    // nothing usable follows.
    let Some(good) = stub("after", "STUB_V3", "libhipblas.so.3.1.0", None) else {
        return;
    };
    let blas = HipBlas::load_from(&[Candidate::File(two.clone()), Candidate::File(good)]).unwrap();
    assert_eq!(blas.gemm_symbol(), "hipblasGemmEx");
    let missing = two.with_file_name("libhipblas.so.9");
    let err =
        HipBlas::load_from(&[Candidate::File(missing), Candidate::File(two.clone())]).unwrap_err();
    assert!(matches!(err, LoadError::UnknownAbi { .. }), "{err}");
}
