//! The benchmark without a GPU: bytes, rates and targets of the issue-3 shape, and a whole
//! suite on a simulated device whose rates are known, so the report must give them back.

use std::sync::Mutex;

use w4a16_kernels::Target;

use super::*;
use w4a16_device::launch::DeviceInputs;
use w4a16_device::{
    BenchPlan, DequantOutput, Device, DeviceBench, DeviceFault, DeviceInfo, DeviceKind, GemmOutput,
    Health, ReferenceOffload, Timing,
};
use w4a16_kernels::{KernelDecl, KernelId};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn t(us: f64) -> Timing {
    // the median is `us`; min and max straddle it
    Timing::from_samples(vec![us * 1.5, us, us * 0.9]).unwrap()
}

#[test]
fn bytes_rates_and_flops_of_the_issue_3_shape() {
    let shape = LayerShape::new(14336, 4096, 128);
    let sym = Traffic::gemm(shape, 1, Symmetry::Sym);
    assert_eq!(
        sym,
        Traffic {
            weights: 29_360_128,
            scales: 917_504,
            zero_points: 0,
            x: 8_192,
            y: 28_672,
        }
    );
    assert_eq!(sym.total(), 30_314_496);
    let asym5 = Traffic::gemm(shape, 5, Symmetry::Asym);
    assert_eq!(asym5.zero_points, 1792 * 32 * 4);
    assert_eq!(asym5.x + asym5.y, 5 * (8_192 + 28_672));
    assert!(close(gb_per_s(30_314_496, 10.0), 3031.4496));
    assert!(close(
        copy_gb_per_s(1 << 30, 600.0),
        2.0 * 1073741824.0 / 600e3
    ));
    assert!(close(tflop_per_s(2048, 14336, 4096, 1000.0), 240.518168576));
}

#[test]
fn the_report_computes_ratios_and_judges_the_targets() {
    let shape = LayerShape::new(14336, 4096, 128);
    let info = RunInfo {
        device: "fake".into(),
        target: "sm_90".into(),
        plan: BenchPlan {
            warmup: 1,
            iters: 3,
        },
        weight_copies: 4,
    };
    let sk = |m, symmetry, us| SkinnyTiming {
        case: SkinnyCase {
            m,
            dtype: ActDtype::F16,
            symmetry,
        },
        entry: "w4a16_skinny_f16".into(),
        timing: t(us),
    };
    // copy: 2 GiB moved in 600 us; M=1 at 10 us
    let skinny = [
        sk(1, Symmetry::Sym, 10.0),
        sk(5, Symmetry::Sym, 13.5),
        sk(1, Symmetry::Asym, 12.0),
    ];
    let fused = [FusedTiming {
        case: FusedCase {
            m: 2048,
            dtype: ActDtype::F16,
        },
        entry: "w4a16_fused_f16_x".into(),
        fused: t(2000.0),
        dense: t(700.0),
        dequant: t(50.0),
    }];
    let r = build_report(&info, shape, 1 << 30, &t(600.0), &skinny, &fused).unwrap();
    let copy = 2.0 * 1073741824.0 / 600e3;
    assert!(close(r.copy.gb_per_s, copy));
    assert_eq!(r.copy.time_us.min, 540.0);
    let m1 = &r.skinny[0];
    assert_eq!(m1.bytes, 30_314_496);
    assert!(close(m1.of_copy, 3031.4496 / copy));
    assert_eq!(m1.over_m1, Some(1.0));
    assert!(close(r.skinny[1].over_m1.unwrap(), 1.35));
    assert_eq!(r.skinny[2].bytes, 30_314_496 + 229_376);
    assert_eq!(r.skinny[2].over_m1, Some(1.0), "asym compares to asym M=1");
    let f = &r.fused[0];
    assert!(close(f.fused_tflop_per_s, 240.518168576 / 2.0));
    assert!(close(f.fused_over_dense, 0.35));
    assert_eq!(f.dequant_us.median, 50.0);

    let met: Vec<(&str, bool)> = r.targets.iter().map(|t| (t.what.as_str(), t.met)).collect();
    assert_eq!(
        met,
        vec![
            ("skinny M=1 f16 sym: of copy bandwidth", true),
            ("skinny M=1 f16 asym: of copy bandwidth", false),
            ("skinny f16 sym: time M=5 / M=1", false),
            ("fused M=2048 f16: TFLOP/s over cuBLAS dense", false),
        ]
    );
    // 3031 / 3579 = 0.847
    assert!(r.targets[0].met);

    let table = render_table(&r);
    assert!(table.contains("| 4096x14336 g128 | 1 | f16 | sym | 10.00 | 9.00 | 30314496 |"));
    assert!(table.contains("- [MISSED] fused M=2048 f16: TFLOP/s over cuBLAS dense: 0.350"));
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["skinny"][2]["traffic"]["zero_points"], 229_376);
    assert_eq!(json["fused"][0]["dtype"], "f16");
}

#[test]
fn a_copy_ceiling_without_a_positive_time_is_an_error() {
    let info = RunInfo {
        device: "fake".into(),
        target: "sm_90".into(),
        plan: BenchPlan::default(),
        weight_copies: 1,
    };
    let e = build_report(
        &info,
        LayerShape::new(64, 256, 128),
        1024,
        &t(0.0),
        &[],
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("copy ceiling"), "{e}");
}

/// A device whose "hardware" runs at fixed rates: the copy and `skinny` at set GB/s (from
/// the bytes actually uploaded), `fused` and the BLAS at set TFLOP/s.
struct Fake {
    copy_gbps: f64,
    skinny_gbps: f64,
    fused_tflops: f64,
    dense_tflops: f64,
    /// (kernel, M, copies) of every kernel benchmark.
    benched: Mutex<Vec<(KernelId, usize, usize)>>,
}

fn mnk(i: &DeviceInputs<'_>) -> (usize, usize, usize) {
    let l = i.launch();
    (l.m, l.n, l.k)
}

impl DeviceInfo for Fake {
    fn target(&self) -> Target {
        Target::Sm90
    }
    fn name(&self) -> String {
        "fake".into()
    }
    fn health(&self) -> Health {
        Health::Ok
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Simulated
    }
}

impl ReferenceOffload for Fake {}

impl Device for Fake {
    fn run_gemm(
        &self,
        _: &KernelDecl,
        _: &str,
        _: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault> {
        unreachable!("the benchmark does not run GEMMs for results")
    }
    fn dequant(
        &self,
        _: &KernelDecl,
        _: &str,
        i: &DeviceInputs<'_>,
    ) -> Result<DequantOutput, DeviceFault> {
        let (_, n, k) = mnk(i);
        let row_stride = i.launch().dense.as_ref().unwrap().strides[0];
        Ok(DequantOutput {
            n,
            k,
            row_stride,
            dense_bits: vec![0; n * k],
            strided_bits: vec![0; (n - 1) * row_stride + k],
            guard_violations: vec![],
            stray_writes: 0,
            unwritten: 0,
        })
    }
    fn dense_gemm(&self, _: &KernelDecl, _: &DeviceInputs<'_>) -> Result<GemmOutput, DeviceFault> {
        unreachable!("the benchmark does not run GEMMs for results")
    }
}

impl DeviceBench for Fake {
    fn bench_kernel(
        &self,
        kernel: &KernelDecl,
        _: &str,
        _: &DeviceInputs<'_>,
        _: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        assert_eq!(kernel.id, KernelId::Dequant);
        Ok(t(42.0))
    }
    fn bench_kernel_rotating(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        copies: &[DeviceInputs<'_>],
        _: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let (m, n, k) = mnk(&copies[0]);
        assert_eq!(
            entry,
            kernel.launch_entry(&copies[0].validated().shape, Target::Sm90)
        );
        self.benched
            .lock()
            .unwrap()
            .push((kernel.id, m, copies.len()));
        let us = match kernel.id {
            KernelId::Skinny => {
                let i = &copies[0];
                let uploaded: usize = i
                    .launch()
                    .present_roles()
                    .into_iter()
                    .filter_map(|r| i.host(r))
                    .map(|h| h.len_bytes())
                    .sum();
                (uploaded + m * n * 2) as f64 / self.skinny_gbps / 1e3
            }
            _ => 2.0 * (m * n * k) as f64 / self.fused_tflops / 1e6,
        };
        Ok(t(us))
    }
    fn bench_sequence(
        &self,
        _: &KernelDecl,
        _: &[Vec<DeviceInputs<'_>>],
        _: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        unreachable!("this suite has no launch sequence")
    }
    fn bench_copy(&self, bytes: usize, _: BenchPlan) -> Result<Timing, DeviceFault> {
        Ok(t(2.0 * bytes as f64 / self.copy_gbps / 1e3))
    }
    fn bench_dense_gemm(
        &self,
        _: &KernelDecl,
        copies: &[DeviceInputs<'_>],
        _: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let i = &copies[0];
        let (m, n, k) = mnk(i);
        assert!(i.host(w4a16_kernels::TensorRole::Dense).is_some());
        Ok(t(2.0 * (m * n * k) as f64 / self.dense_tflops / 1e6))
    }
}

#[test]
fn a_suite_on_a_device_of_known_rates_reports_those_rates() {
    let fake = Fake {
        copy_gbps: 4000.0,
        skinny_gbps: 3200.0,
        fused_tflops: 150.0,
        dense_tflops: 400.0,
        benched: Mutex::new(Vec::new()),
    };
    let mut suite = BenchSuite::standard();
    suite.shape = LayerShape::new(64, 256, 128);
    suite.copy_bytes = 1 << 20;
    suite.weight_copies = 3;
    for f in &mut suite.fused {
        f.m = 32;
    }
    let r = run_suite(&fake, &suite, BenchPlan::default()).unwrap();
    assert!(close(r.copy.gb_per_s, 4000.0));
    assert_eq!(r.skinny.len(), 12);
    for s in &r.skinny {
        // the uploaded buffers are exactly the counted traffic (no padding on sm_90)
        assert!(close(s.gb_per_s, 3200.0), "{s:?}");
        assert!(close(s.of_copy, 0.8));
    }
    let m5 = r
        .skinny
        .iter()
        .find(|s| s.m == 5 && s.dtype == "bf16")
        .unwrap();
    // weights 8192 + scales 256 + x 5·512 + y 5·128 over weights + scales + 512 + 128
    assert!(close(
        m5.over_m1.unwrap(),
        (8192.0 + 256.0 + 3200.0) / 9088.0
    ));
    for f in &r.fused {
        assert!(close(f.fused_tflop_per_s, 150.0));
        assert!(close(f.dense_tflop_per_s, 400.0));
        assert!(close(f.fused_over_dense, 0.375));
        assert_eq!(f.dequant_us.median, 42.0);
    }
    let benched = fake.benched.lock().unwrap().clone();
    assert_eq!(benched.len(), 12 + 2);
    assert!(benched.iter().all(|&(_, _, copies)| copies == 3));
    assert_eq!(benched.iter().filter(|b| b.0 == KernelId::Fused).count(), 2);
    assert!(
        r.targets
            .iter()
            .any(|t| t.what.starts_with("fused") && !t.met)
    );
    assert!(
        r.targets
            .iter()
            .filter(|t| t.what.contains("of copy"))
            .all(|t| t.met)
    );
}
