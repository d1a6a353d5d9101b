//! The `rocm` backend (cargo feature `rocm`). On a machine with an AMD GPU it opens the device,
//! maps its gfx target and loads every entry of the kernel set with its ABI check; without one
//! it reports "no AMD device" as a loud skip (a failure under `W4A16_REQUIRE=rocm`, and under
//! `W4A16_REQUIRE=gpu` where no other GPU backend opened: tests/common). The dense
//! path runs in hipBLAS, loaded at run time: missing, it is a loud skip naming the library.
#![cfg(feature = "rocm")]

mod common;

use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{DenseSpec, YSpec};
use w4a16_device::{Device, DeviceFault, DeviceInfo, DeviceKind};
use w4a16_device::{hipblas, rocm};
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_kernels::target::Vendor;
use w4a16_kernels::{KernelId, Target, set};
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};

#[test]
fn an_amd_device_loads_every_entry_or_the_skip_says_no_amd_device_rocm() {
    match rocm::RocmDevice::open(0) {
        Ok(dev) => {
            let t = DeviceInfo::target(&dev);
            assert_eq!(t.vendor(), Vendor::Amd, "{}", DeviceInfo::name(&dev));
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
            common::skip_or_fail(DeviceKind::Rocm, &skip);
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
                w4a16_codeobject::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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

/// hipBLAS is searched first beside the HIP runtime the harness is linked to (its hipBLAS runs
/// on that same runtime), and is either usable or a loud skip naming the library and every path
/// tried (a failure under `W4A16_REQUIRE=gpu` where no other vendor's GPU opened, so on an AMD
/// GPU runner, which must have the dense path; and under `W4A16_REQUIRE=rocm`).
#[test]
fn hipblas_is_searched_beside_the_linked_runtime_and_loads_or_skips_naming_it_rocm() {
    let runtime = hipblas::loaded_hip_runtime().expect("the rocm feature links libamdhip64");
    let file = runtime.file_name().unwrap().to_string_lossy().into_owned();
    assert!(file.starts_with("libamdhip64.so"), "{}", runtime.display());
    let candidates = hipblas::default_candidates();
    match &candidates[0] {
        hipblas::Candidate::File(p) => assert_eq!(p.parent(), runtime.parent()),
        other => panic!("{other:?}"),
    }
    match hipblas::HipBlas::get() {
        // The emulated runtime's hipBLAS stand-in is the runtime's own file (found through a
        // `libhipblas.so.2` symlink beside it): the very object, so it shares the device memory.
        Ok(lib) if lib.stand_in().is_some() => {
            assert!(rocm::on_emulated_runtime(), "a stand-in on AMD's runtime");
            assert_eq!(
                lib.path(),
                runtime.as_path(),
                "the stand-in is not the runtime's own object"
            );
            assert_eq!(lib.gemm_symbol(), "hipblasGemmEx_v2");
            let what = lib.stand_in().unwrap_or_default();
            assert!(
                what.contains("stand-in") && what.contains("not rocBLAS"),
                "{what}"
            );
            eprintln!("hipBLAS: {what} ({})", lib.path().display());
        }
        Ok(lib) => {
            let name = lib
                .path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            assert!(
                name.starts_with("libhipblas.so"),
                "{}",
                lib.path().display()
            );
            eprintln!(
                "hipBLAS: {} ({}, {:?})",
                lib.path().display(),
                lib.gemm_symbol(),
                lib.gemm_abi()
            );
        }
        Err(e) => {
            let skip = e.skip();
            assert!(skip.reason.contains("hipBLAS"), "{}", skip.reason);
            if let hipblas::LoadError::NotFound { tried } = &e {
                assert_eq!(tried.len(), candidates.len(), "{e}");
                for c in &candidates {
                    assert!(
                        skip.reason.contains(&c.to_string()),
                        "{} lacks {c}",
                        skip.reason
                    );
                }
            }
            common::skip_or_fail(DeviceKind::Rocm, &skip);
        }
    }
}

/// The dense path on the AMD device: hipBLAS with fp32 compute on X and Y with row padding (Y
/// also offset), the dense copy with padded rows (NaN in the padding: reading it would show),
/// and the bias added by `beta = 1` onto the prefilled output. Exact-class data, so every
/// output is one of the recipe's roundings bit for bit, and the launch is run twice and must be
/// bitwise repeatable (atomics are not allowed on the handle).
#[test]
fn the_dense_path_runs_in_hipblas_with_padded_strides_and_bias_rocm() {
    let dev = match rocm::RocmDevice::open(0) {
        Ok(d) => d,
        Err(skip) => {
            common::skip_or_fail(DeviceKind::Rocm, &skip);
            return;
        }
    };
    if let Err(e) = hipblas::HipBlas::get() {
        common::skip_or_fail(DeviceKind::Rocm, &e.skip());
        return;
    }
    let (m, n, k) = (5usize, 72usize, 512usize);
    for dtype in ActDtype::ALL {
        let id = format!("rocm/dense/n{n}-k{k}/M={m}/{dtype}/bias/exact");
        let spec = DataSpec {
            class: DataClass::Exact,
            m,
            shape: LayerShape::new(n, k, 128),
            dtype,
            symmetry: Symmetry::Asym,
            with_bias: true,
        };
        let g = generate(&id, &spec).expect("exact data fit K = 512");
        let x = g.x.with_row_stride(k + 8);
        let k_pad = k + 64;
        let mut dense = vec![dtype.from_f64(f64::NAN); n * k_pad];
        for r in 0..n {
            for c in 0..k {
                dense[r * k_pad + c] = dtype.from_f64(g.layer.weight(r, c));
            }
        }
        let dspec = DenseSpec {
            n,
            k,
            row_stride: k_pad,
            dtype,
        };
        let y = YSpec {
            m,
            n,
            row_stride: n + 5,
            offset: 3,
            dtype,
        };
        let d = set::decl(KernelId::Dense);
        let inputs = DeviceInputs::dense(d, &x, dspec, &dense, g.layer.bias.as_deref(), y)
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        let first = Device::dense_gemm(&dev, d, &inputs).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(
            first.guard_violations.is_empty() && first.stray_writes == 0 && first.unwritten == 0,
            "{id}: {:?} guard violations, {} stray, {} unwritten",
            first.guard_violations,
            first.stray_writes,
            first.unwritten
        );
        for mi in 0..m {
            for ni in 0..n {
                let dot: f64 = (0..k).map(|c| g.x.get(mi, c) * g.layer.weight(ni, c)).sum();
                let bias = g.layer.bias_value(ni);
                let once = dtype.from_f64(dot + bias);
                let twice = dtype.from_f64(dtype.to_f64(dtype.from_f64(dot)) + bias);
                let got = first.y_bits[mi * n + ni];
                assert!(
                    got == once || got == twice,
                    "{id}: Y[{mi}, {ni}] = {got:#06x}, expected {once:#06x} or {twice:#06x}"
                );
            }
        }
        let second = Device::dense_gemm(&dev, d, &inputs).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(first.y_bits, second.y_bits, "{id}: two runs differ");
    }
}
