//! A host-memory backend for testing the shared launch flow without a GPU: allocations are
//! host vectors at fake device addresses, and the "kernel" writes `Y[m, n] = m·N + n` through
//! the pointer and strides it finds in the packed argument buffer, optionally misbehaving.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::{ArgKind, KernelDecl, ScalarArg, Target, TensorRole};
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::formats::{ResidentLayer, RowPadding};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations, LayerShape};

use super::*;
use crate::launch::{DeviceInputs, PackedArgs, RawArg};
use crate::tensor::YSpec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Misbehave {
    None,
    PastEnd,
    SkipLast,
    IntoPadding,
    Sticky,
    Hang,
}

struct SimBuf {
    base: u64,
    data: Arc<Mutex<Vec<u8>>>,
}

struct Sim {
    mode: Misbehave,
    next: Mutex<u64>,
    live: Mutex<HashMap<u64, Arc<Mutex<Vec<u8>>>>>,
    lost: Mutex<Option<String>>,
    launches: Mutex<usize>,
    /// The weights pointer of every launch, in order.
    weights_read: Mutex<Vec<u64>>,
}

impl Sim {
    fn new(mode: Misbehave) -> Self {
        Sim {
            mode,
            next: Mutex::new(0x10_0000),
            live: Mutex::new(HashMap::new()),
            lost: Mutex::new(None),
            launches: Mutex::new(0),
            weights_read: Mutex::new(Vec::new()),
        }
    }

    /// The buffer holding `addr` and the offset into it.
    fn resolve(&self, addr: u64) -> Option<(Arc<Mutex<Vec<u8>>>, usize)> {
        let live = self.live.lock().unwrap();
        live.iter().find_map(|(base, d)| {
            let len = d.lock().unwrap().len() as u64;
            (addr >= *base && addr < base + len).then(|| (d.clone(), (addr - base) as usize))
        })
    }
}

impl Backend for Sim {
    type Buffer = SimBuf;
    type Event = u64;

    fn target(&self) -> Target {
        Target::Sm90
    }
    fn name(&self) -> String {
        "simulated".into()
    }
    fn health(&self) -> Health {
        match self.lost.lock().unwrap().clone() {
            None => Health::Ok,
            Some(cause) => Health::Lost { cause },
        }
    }
    fn alloc(&self, bytes: usize) -> Result<SimBuf, DeviceFault> {
        let mut next = self.next.lock().unwrap();
        let base = *next;
        *next += (bytes as u64).next_multiple_of(256) + 256;
        let data = Arc::new(Mutex::new(vec![0xEE; bytes]));
        self.live.lock().unwrap().insert(base, data.clone());
        Ok(SimBuf { base, data })
    }
    fn address(&self, buf: &SimBuf) -> u64 {
        buf.base
    }
    fn upload(&self, dst: &mut SimBuf, src: &[u8]) -> Result<(), DeviceFault> {
        dst.data.lock().unwrap()[..src.len()].copy_from_slice(src);
        Ok(())
    }
    fn download(&self, src: &SimBuf) -> Result<Vec<u8>, DeviceFault> {
        Ok(src.data.lock().unwrap().clone())
    }
    fn copy(&self, dst: &mut SimBuf, src: &SimBuf, bytes: usize) -> Result<(), DeviceFault> {
        let s = src.data.lock().unwrap()[..bytes].to_vec();
        dst.data.lock().unwrap()[..bytes].copy_from_slice(&s);
        Ok(())
    }
    fn launch(
        &self,
        kernel: &KernelDecl,
        _entry: &str,
        _g: &LaunchGeometry,
        args: &PackedArgs,
    ) -> Result<(), DeviceFault> {
        *self.launches.lock().unwrap() += 1;
        if self.mode == Misbehave::Sticky {
            *self.lost.lock().unwrap() = Some("CUDA_ERROR_ILLEGAL_ADDRESS".into());
            return Err(DeviceFault::from_status(
                FaultClass::Sticky,
                "sync",
                "CUDA_ERROR_ILLEGAL_ADDRESS",
            ));
        }
        let values = args.values(kernel).expect("packed for this declaration");
        let mut y = 0u64;
        let mut scalar = HashMap::new();
        for (a, v) in kernel.args.iter().zip(values) {
            match (a.kind, v) {
                (
                    ArgKind::Pointer {
                        role: TensorRole::Y,
                        ..
                    },
                    RawArg::Pointer(p),
                ) => y = p,
                (
                    ArgKind::Pointer {
                        role: TensorRole::Weights,
                        ..
                    },
                    RawArg::Pointer(p),
                ) => self.weights_read.lock().unwrap().push(p),
                (ArgKind::I32(s), RawArg::I32(i)) => {
                    scalar.insert(s, i as usize);
                }
                _ => {}
            }
        }
        let (m, n, stride) = (
            scalar[&ScalarArg::M],
            scalar[&ScalarArg::N],
            scalar[&ScalarArg::YRowStride],
        );
        let (buf, off) = self.resolve(y).expect("y points into a live buffer");
        let mut d = buf.lock().unwrap();
        let mut put =
            |e: usize, v: u16| d[off + 2 * e..off + 2 * e + 2].copy_from_slice(&v.to_le_bytes());
        for mi in 0..m {
            for ni in 0..n {
                if self.mode == Misbehave::SkipLast && mi == m - 1 && ni == n - 1 {
                    continue;
                }
                put(mi * stride + ni, (mi * n + ni) as u16);
            }
        }
        match self.mode {
            Misbehave::PastEnd => put((m - 1) * stride + n, 1),
            Misbehave::IntoPadding => put(n, 1),
            _ => {}
        }
        Ok(())
    }
    fn blas_gemm(
        &self,
        _: &BlasGemm,
        _: &SimBuf,
        _: &SimBuf,
        _: &mut SimBuf,
    ) -> Result<(), DeviceFault> {
        Err(DeviceFault::Unsupported {
            what: "BLAS".into(),
            device: Backend::name(self),
        })
    }
    fn record(&self) -> Result<u64, DeviceFault> {
        Ok(*self.launches.lock().unwrap() as u64)
    }
    fn elapsed_us(&self, start: &u64, end: &u64) -> Result<f64, DeviceFault> {
        Ok((end - start) as f64 * 10.0)
    }
    fn synchronize(&self, during: &str) -> Result<(), DeviceFault> {
        if let Health::Lost { cause } = Backend::health(self) {
            return Err(DeviceFault::ContextLost { cause });
        }
        if self.mode == Misbehave::Hang {
            *self.lost.lock().unwrap() = Some("hung".into());
            return Err(DeviceFault::Timeout {
                during: during.into(),
                after: Duration::from_secs(1),
            });
        }
        Ok(())
    }
}

fn data(m: usize) -> (Activations, ResidentLayer) {
    let spec = DataSpec {
        class: DataClass::Exact,
        m,
        shape: LayerShape::new(40, 64, 32),
        dtype: ActDtype::F16,
        symmetry: Symmetry::Asym,
        with_bias: false,
    };
    let g = generate("sim/n40-k64", &spec).unwrap();
    let r = ResidentLayer::from_logical(&g.layer, RowPadding::NONE).unwrap();
    (g.x, r)
}

fn run(mode: Misbehave, y_pad: usize) -> (Sim, Result<GemmOutput, DeviceFault>) {
    let sim = Sim::new(mode);
    let (x, layer) = data(3);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let y = YSpec {
        m: 3,
        n: 40,
        row_stride: 40 + y_pad,
        offset: 0,
        dtype: ActDtype::F16,
    };
    let inputs = DeviceInputs::gemm(d, &layer, &x, y).unwrap();
    let out = sim.run_gemm(d, "w4a16_fallback_f16", &inputs);
    (sim, out)
}

#[test]
fn a_well_behaved_kernel_is_clean_and_compacted() {
    let (_, out) = run(Misbehave::None, 8);
    let out = out.unwrap();
    assert!(out.clean(), "{out:?}");
    assert_eq!(out.y_bits, (0..120).collect::<Vec<u16>>());
}

#[test]
fn writes_past_y_hit_the_guard() {
    let (_, out) = run(Misbehave::PastEnd, 0);
    let out = out.unwrap();
    assert_eq!(out.guard_violations.len(), 1);
    assert_eq!(out.guard_violations[0].side, GuardSide::After);
    assert_eq!((out.guard_violations[0].first, out.stray_writes), (0, 0));
}

#[test]
fn an_unwritten_element_stays_poison() {
    let (_, out) = run(Misbehave::SkipLast, 0);
    let out = out.unwrap();
    assert_eq!(out.unwritten, 1);
    assert_eq!(*out.y_bits.last().unwrap(), ActDtype::F16.poison_bits());
    assert!(!out.clean());
}

#[test]
fn writes_into_row_padding_are_caught() {
    let (_, out) = run(Misbehave::IntoPadding, 8);
    let out = out.unwrap();
    assert!(out.guard_violations.is_empty());
    assert_eq!(out.stray_writes, 1);
}

#[test]
fn a_sticky_fault_loses_the_device_and_later_calls_refuse() {
    let (sim, out) = run(Misbehave::Sticky, 0);
    let err = out.unwrap_err();
    assert!(err.context_unusable(), "{err}");
    assert!(matches!(Backend::health(&sim), Health::Lost { .. }));
    let err = sim.bench_copy(1024, BenchPlan::default()).unwrap_err();
    assert!(matches!(err, DeviceFault::ContextLost { .. }), "{err}");
}

#[test]
fn a_hang_is_a_timeout_not_a_wait() {
    let (sim, out) = run(Misbehave::Hang, 0);
    assert!(matches!(out.unwrap_err(), DeviceFault::Timeout { .. }));
    let (x, layer) = data(1);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Skinny);
    let inputs = DeviceInputs::gemm(d, &layer, &x, YSpec::dense(1, 40, ActDtype::F16)).unwrap();
    assert!(matches!(
        sim.run_gemm(d, "w4a16_skinny_f16", &inputs),
        Err(DeviceFault::ContextLost { .. })
    ));
}

#[test]
fn inputs_validated_for_another_kernel_are_refused_before_any_allocation() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(2);
    let fb = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let inputs = DeviceInputs::gemm(fb, &layer, &x, YSpec::dense(2, 40, ActDtype::F16)).unwrap();
    let sk = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Skinny);
    let err = sim.run_gemm(sk, "w4a16_skinny_f16", &inputs).unwrap_err();
    assert!(matches!(err, DeviceFault::WrongKernel { .. }));
    assert!(sim.live.lock().unwrap().is_empty(), "nothing was allocated");
}

#[test]
fn benchmarks_time_only_the_timed_launches() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(2);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let inputs = DeviceInputs::gemm(d, &layer, &x, YSpec::dense(2, 40, ActDtype::F16)).unwrap();
    let t = sim
        .bench_kernel(
            d,
            "w4a16_fallback_f16",
            &inputs,
            BenchPlan {
                warmup: 3,
                iters: 4,
            },
        )
        .unwrap();
    assert_eq!(
        t.samples,
        vec![10.0; 4],
        "one launch between each pair of events"
    );
    assert_eq!(*sim.launches.lock().unwrap(), 1 + 3 + 4);
}

#[test]
fn a_rotating_benchmark_reads_each_copy_in_turn() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(2);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let y = YSpec::dense(2, 40, ActDtype::F16);
    let copies: Vec<_> = (0..3)
        .map(|_| DeviceInputs::gemm(d, &layer, &x, y).unwrap())
        .collect();
    let plan = BenchPlan {
        warmup: 2,
        iters: 4,
    };
    let t = sim
        .bench_kernel_rotating(d, "w4a16_fallback_f16", &copies, plan)
        .unwrap();
    assert_eq!(t.samples, vec![10.0; 4]);
    let read = sim.weights_read.lock().unwrap().clone();
    assert_eq!(read.len(), 1 + 2 + 4);
    let distinct: std::collections::BTreeSet<u64> = read.iter().copied().collect();
    assert_eq!(distinct.len(), 3, "three staged weight buffers: {read:x?}");
    for (i, p) in read.iter().enumerate() {
        assert_eq!(*p, read[i % 3], "launch {i} reads copy {}", i % 3);
    }
    assert!(read[0] != read[1] && read[1] != read[2] && read[0] != read[2]);
}

#[test]
fn a_rotating_benchmark_refuses_copies_of_different_shapes() {
    let sim = Sim::new(Misbehave::None);
    let (x2, layer) = data(2);
    let (x3, _) = data(3);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let copies = vec![
        DeviceInputs::gemm(d, &layer, &x2, YSpec::dense(2, 40, ActDtype::F16)).unwrap(),
        DeviceInputs::gemm(d, &layer, &x3, YSpec::dense(3, 40, ActDtype::F16)).unwrap(),
    ];
    let err = sim
        .bench_kernel_rotating(d, "w4a16_fallback_f16", &copies, BenchPlan::default())
        .unwrap_err();
    assert!(matches!(err, DeviceFault::Unsupported { .. }), "{err}");
    assert_eq!(
        *sim.launches.lock().unwrap(),
        0,
        "refused before any launch"
    );
    let err = sim
        .bench_kernel_rotating(d, "w4a16_fallback_f16", &[], BenchPlan::default())
        .unwrap_err();
    assert!(err.to_string().contains("no input copies"), "{err}");
}
