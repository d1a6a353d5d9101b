//! A host-memory backend for testing the shared launch flow without a GPU: allocations are
//! host vectors at fake device addresses, and the "kernel" writes `Y[m, n] = m·N + n` (or, in
//! the echo modes, `X[m, n mod K]`) through the pointers and strides it finds in the packed
//! argument buffer, optionally misbehaving. The MoE kernels are simulated too: `moe_align`
//! groups the topk ids it reads by expert (as the contract says), and `moe` writes
//! `C[slot, n] = slot·N + n + 1` for the slots of every block it reads back from the align
//! step's buffers (+0 for blocks of expert −1), so the MoE launch path is checked end to end.
//! A write that lands outside every allocation is reported as an illegal address, as
//! compute-sanitizer's memcheck reports it on a GPU (addresses are 256 bytes apart, so with
//! [`Allocation::Exact`] the first element past a buffer is outside all of them).

use crate::input_cache::InputCache;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::{ArgKind, KernelDecl, KernelId, ScalarArg, Target, TensorRole};

use w4a16_reference::ActDtype;
use w4a16_reference::compare::{CompareReport, JudgeRequest};
use w4a16_reference::data::StreamKey;
use w4a16_reference::offload::{ActivationOperand, RawLanes, WeightOperand};

use super::*;
use crate::held::HostLanes;
use crate::launch::{PackedArgs, RawArg};

mod clock;

pub use clock::{SimCosts, SimOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// The misbehaviours are this file's own tests' (other crates get the two behaved devices).
#[cfg_attr(not(test), allow(dead_code))]
enum Misbehave {
    None,
    PastEnd,
    SkipLast,
    IntoPadding,
    /// One element just before Y's base (inside a slice's leading offset, or the guard band).
    BeforeBase,
    /// `Y[m, n] = X[m, n mod K]`, X read through its pointer and row stride.
    EchoX,
    /// As `EchoX`, but X read as if contiguous (`m·K + k`): the bug strided views exist to catch.
    EchoXIgnoringStride,
    Sticky,
    Hang,
    /// `moe_align` also writes the sentinel into the entry at the padded length (within the
    /// capacity): right for every slot, wrong for the contract's tails.
    AlignPastPaddedLength,
}

struct SimBuf {
    base: u64,
    data: Arc<Mutex<Vec<u8>>>,
}

struct Sim {
    mode: Misbehave,
    allocation: Allocation,
    /// The size of every allocation, in order.
    sizes: Mutex<Vec<usize>>,
    next: Mutex<u64>,
    /// Every allocation by base address (ordered: an address resolves by one range lookup,
    /// since each element of a simulated launch goes through the address map).
    live: Mutex<BTreeMap<u64, Arc<Mutex<Vec<u8>>>>>,
    lost: Mutex<Option<String>>,
    launches: Mutex<usize>,
    /// The weights pointer of every launch, in order.
    weights_read: Mutex<Vec<u64>>,
    /// Every vendor-BLAS call.
    blas_calls: Mutex<Vec<BlasGemm>>,
    /// (source, destination) base address of every device-to-device copy, in order.
    copies: Mutex<Vec<(u64, u64)>>,
    /// Whether the vendor BLAS is installed (a device without it lacks a capability, and
    /// misbehaves in nothing).
    blas: bool,
    /// The GPU reference's f64 GEMM, as host code: absent, right, or off in every `y` (a broken
    /// reference GEMM the cross-check must blame).
    f64_gemm: Option<F64Gemm>,
    /// Whether that GEMM's products stay "on the device" (host lanes judged by the host twin of
    /// the on-device judge, `held::HostLanes`), as the CUDA backend's do.
    held: bool,
    /// Whether it draws realistic X "on the device" (the host's draw, `data::realistic_on_host`)
    /// as the CUDA backend does: not at all, right, or one ulp off in every element.
    draws: Option<Draws>,
    /// Which of several pretend devices this is; it shows in [`DeviceInfo::name`] as a real
    /// device's ordinal does, so a verdict that quotes the device's name differs by device.
    ordinal: usize,
    /// Device time: every launch 10 µs, or as `costs` says.
    clock: clock::Clock,
    costs: Option<SimCosts>,
    /// Pristine input copies by content, as the CUDA backend keeps them (`None`: uploads only).
    /// Whether it compares buffers "on the device" (`Runtime::same_bytes`), as CUDA does.
    compares: bool,
    input_cache: Option<Mutex<InputCache<SimBuf>>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Draws {
    Right,
    Wrong,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum F64Gemm {
    Right,
    Wrong,
}

/// A well-behaved simulated device with the vendor BLAS and an f64 GEMM in host code (the GPU
/// reference's, `--reference gpu`); `wrong` makes every product of that GEMM slightly off.
pub fn device_with_f64_gemm(wrong: bool) -> Box<dyn DeviceBench> {
    Box::new(Sim {
        blas: true,
        f64_gemm: Some(if wrong {
            F64Gemm::Wrong
        } else {
            F64Gemm::Right
        }),
        ..Sim::new(Misbehave::None)
    })
}

/// [`device_with_f64_gemm`] whose products stay held on the device and are judged where they are
/// (`ReferenceOffload::held_judge`), as on a CUDA device.
/// It also draws realistic X, as a CUDA device does.
pub fn device_with_held_f64_gemm(wrong: bool) -> Box<dyn DeviceBench> {
    Box::new(Sim {
        blas: true,
        held: true,
        draws: Some(Draws::Right),
        f64_gemm: Some(if wrong {
            F64Gemm::Wrong
        } else {
            F64Gemm::Right
        }),
        ..Sim::new(Misbehave::None)
    })
}

/// [`device_with_held_f64_gemm`] whose drawn X is one ulp off in every element (a broken
/// generator the data module's spot check must refuse).
pub fn device_with_wrong_draws() -> Box<dyn DeviceBench> {
    Box::new(Sim {
        blas: true,
        held: true,
        draws: Some(Draws::Wrong),
        f64_gemm: Some(F64Gemm::Right),
        ..Sim::new(Misbehave::None)
    })
}

// Counted per thread: tests run in parallel in one process, and a count shared by all of them
// moves under a test that reads it before and after its own run.
thread_local! {
    static DRAWN_ACTIVATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    static HELD_JUDGEMENTS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many activation tensors simulated devices have drawn on this thread (a test's proof
/// that the device's draw was used).
pub fn drawn_activations() -> usize {
    DRAWN_ACTIVATIONS.with(std::cell::Cell::get)
}

/// How many outputs simulated devices have judged next to held lanes on this thread (a test's
/// proof that the held path ran).
pub fn held_judgements() -> usize {
    HELD_JUDGEMENTS.with(std::cell::Cell::get)
}

/// A simulated device for the runner's tests: well behaved, or losing its context at the first
/// launch (`sticky`); `blas: false` is a device without the vendor BLAS library.
pub fn device(sticky: bool, blas: bool) -> Box<dyn DeviceBench> {
    let mode = if sticky {
        Misbehave::Sticky
    } else {
        Misbehave::None
    };
    Box::new(Sim {
        blas,
        ..Sim::new(mode)
    })
}

/// As [`device`] (well behaved, with the vendor BLAS) on a runtime that cannot compare buffers
/// on the device: every dequant copy comes back to be compared on the host.
pub fn device_comparing_on_host() -> Box<dyn DeviceBench> {
    Box::new(Sim {
        compares: false,
        ..Sim::new(Misbehave::None)
    })
}

/// `n` well-behaved simulated devices, ordinals `0..n`, with the vendor BLAS and the GPU
/// reference's f64 GEMM: a host with several GPUs, for the runner's tests that a run's
/// verdicts do not depend on how many devices it had (with either reference).
pub fn devices(n: usize) -> Vec<Box<dyn DeviceBench>> {
    (0..n).map(device_at).collect()
}

/// A simulated device whose `moe_align` writes one entry past the padded length (the tails check
/// must fail it).
pub fn device_with_align_past_padded_length() -> Box<dyn DeviceBench> {
    Box::new(Sim::new(Misbehave::AlignPastPaddedLength))
}

/// A well-behaved simulated device with the vendor BLAS whose launches, BLAS calls and copies take
/// the times `costs` gives them (perf's regret tests make one path faster than another).
pub fn device_with_costs(costs: SimCosts) -> Box<dyn DeviceBench> {
    Box::new(Sim {
        costs: Some(costs),
        ..Sim::new(Misbehave::None)
    })
}

/// Device `ordinal` of [`devices`].
pub fn device_at(ordinal: usize) -> Box<dyn DeviceBench> {
    Box::new(Sim {
        ordinal,
        f64_gemm: Some(F64Gemm::Right),
        ..Sim::new(Misbehave::None)
    })
}

impl Sim {
    fn new(mode: Misbehave) -> Self {
        Self::with(mode, Allocation::Guarded)
    }

    fn with(mode: Misbehave, allocation: Allocation) -> Self {
        Sim {
            mode,
            allocation,
            sizes: Mutex::new(Vec::new()),
            next: Mutex::new(0x10_0000),
            live: Mutex::new(BTreeMap::new()),
            lost: Mutex::new(None),
            launches: Mutex::new(0),
            weights_read: Mutex::new(Vec::new()),
            blas_calls: Mutex::new(Vec::new()),
            copies: Mutex::new(Vec::new()),
            blas: true,
            f64_gemm: None,
            held: false,
            draws: None,
            ordinal: 0,
            clock: clock::Clock::default(),
            costs: None,
            input_cache: None,
            compares: true,
        }
    }

    /// The buffer holding `addr` and the offset into it.
    fn resolve(&self, addr: u64) -> Option<(Arc<Mutex<Vec<u8>>>, usize)> {
        let live = self.live.lock().unwrap();
        let (base, d) = live.range(..=addr).next_back()?;
        let len = d.lock().unwrap().len() as u64;
        (addr < base + len).then(|| (d.clone(), (addr - base) as usize))
    }
}

/// The pointer and scalar arguments of one launch, by role and by scalar.
struct Args {
    pointers: HashMap<TensorRole, u64>,
    scalars: HashMap<ScalarArg, i32>,
}

impl Args {
    fn of(kernel: &KernelDecl, values: &[RawArg]) -> Args {
        let mut a = Args {
            pointers: HashMap::new(),
            scalars: HashMap::new(),
        };
        for (d, v) in kernel.args.iter().zip(values) {
            match (d.kind, *v) {
                (ArgKind::Pointer { role, .. }, RawArg::Pointer(p)) => {
                    a.pointers.insert(role, p);
                }
                (ArgKind::I32(s), RawArg::I32(i)) => {
                    a.scalars.insert(s, i);
                }
                _ => {}
            }
        }
        a
    }

    fn ptr(&self, role: TensorRole) -> u64 {
        self.pointers.get(&role).copied().unwrap_or(0)
    }

    fn int(&self, s: ScalarArg) -> usize {
        self.scalars.get(&s).copied().unwrap_or(0) as usize
    }
}

impl Sim {
    /// Bytes through the address map, as a GPU's stores go: outside every allocation is an
    /// illegal address that loses the device.
    fn write(&self, at: u64, bytes: &[u8]) -> Result<(), DeviceFault> {
        match self.resolve(at) {
            Some((buf, off)) if off + bytes.len() <= buf.lock().unwrap().len() => {
                buf.lock().unwrap()[off..off + bytes.len()].copy_from_slice(bytes);
                Ok(())
            }
            _ => {
                let code = format!(
                    "CUDA_ERROR_ILLEGAL_ADDRESS (write of {} bytes at {at:#x}, outside every allocation)",
                    bytes.len()
                );
                *self.lost.lock().unwrap() = Some(code.clone());
                Err(DeviceFault::from_status(
                    FaultClass::Sticky,
                    "simulated kernel",
                    &code,
                ))
            }
        }
    }

    fn read_i32(&self, at: u64) -> i32 {
        let (buf, off) = self.resolve(at).expect("a read inside a live buffer");
        let d = buf.lock().unwrap();
        i32::from_le_bytes(d[off..off + 4].try_into().unwrap())
    }

    /// `moe_align` as the contract states it, reading and writing through the arguments.
    fn moe_align(&self, kernel: &KernelDecl, values: &[RawArg]) -> Result<(), DeviceFault> {
        let a = Args::of(kernel, values);
        let (slots, experts, bm) = (
            a.int(ScalarArg::Slots),
            a.int(ScalarArg::Experts),
            a.int(ScalarArg::BlockM),
        );
        let ids: Vec<i32> = (0..slots)
            .map(|s| self.read_i32(a.ptr(TensorRole::TopkIds) + 4 * s as u64))
            .collect();
        let map = a.ptr(TensorRole::ExpertMap);
        let (sorted, blocks) = (
            a.ptr(TensorRole::SortedTokenIds),
            a.ptr(TensorRole::ExpertIds),
        );
        let mut at = 0usize;
        for e in 0..experts {
            let run: Vec<usize> = (0..slots).filter(|&s| ids[s] == e as i32).collect();
            if run.is_empty() {
                continue;
            }
            let padded = run.len().div_ceil(bm) * bm;
            for i in 0..padded {
                let slot = run.get(i).copied().unwrap_or(slots) as i32;
                self.write(sorted + 4 * (at + i) as u64, &slot.to_le_bytes())?;
            }
            let id = if map == 0 {
                e as i32
            } else {
                self.read_i32(map + 4 * e as u64)
            };
            for b in at / bm..(at + padded) / bm {
                self.write(blocks + 4 * b as u64, &id.to_le_bytes())?;
            }
            at += padded;
        }
        if self.mode == Misbehave::AlignPastPaddedLength && at < a.int(ScalarArg::SortedCapacity) {
            self.write(sorted + 4 * at as u64, &(slots as i32).to_le_bytes())?;
        }
        self.write(
            a.ptr(TensorRole::TokensPostPadded),
            &(at as i32).to_le_bytes(),
        )
    }

    /// `moe`'s rows and blocks from the align step's buffers; the tile's BM from the entry name.
    fn moe(&self, kernel: &KernelDecl, entry: &str, values: &[RawArg]) -> Result<(), DeviceFault> {
        let a = Args::of(kernel, values);
        let bm: usize = entry
            .rsplit('_')
            .next()
            .and_then(|t| t.split('x').next())
            .and_then(|b| b.parse().ok())
            .expect("a tile variant entry");
        let (slots, n, stride) = (
            a.int(ScalarArg::Slots),
            a.int(ScalarArg::N),
            a.int(ScalarArg::YRowStride),
        );
        let ntpp = self.read_i32(a.ptr(TensorRole::TokensPostPadded)) as usize;
        let y = a.ptr(TensorRole::Y);
        for b in 0..ntpp / bm {
            let expert = self.read_i32(a.ptr(TensorRole::ExpertIds) + 4 * b as u64);
            for r in 0..bm {
                let at = a.ptr(TensorRole::SortedTokenIds) + 4 * (b * bm + r) as u64;
                let slot = self.read_i32(at);
                if slot < 0 || slot as usize >= slots {
                    continue;
                }
                let slot = slot as usize;
                for col in 0..n {
                    let v = if expert < 0 {
                        0u16
                    } else {
                        (slot * n + col + 1) as u16
                    };
                    self.write(y + 2 * (slot * stride + col) as u64, &v.to_le_bytes())?;
                }
            }
        }
        Ok(())
    }
}

impl DeviceInfo for Sim {
    fn target(&self) -> Target {
        Target::Sm90
    }

    fn name(&self) -> String {
        match self.ordinal {
            0 => "simulated".into(),
            n => format!("simulated (device {n})"),
        }
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Simulated
    }

    fn allocation(&self) -> Allocation {
        self.allocation
    }

    fn health(&self) -> Health {
        match self.lost.lock().unwrap().clone() {
            None => Health::Ok,
            Some(cause) => Health::Lost { cause },
        }
    }
}

impl ReferenceOffload for Sim {
    fn reference_gemm_f64(
        &self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let Some(mode) = self.f64_gemm else {
            return Err(DeviceFault::MissingCapability {
                capability: Capability::F64Gemm,
                device: self.name(),
                why: "the simulated device has no f64 GEMM".into(),
            });
        };
        let (mut y, mut a) = (vec![0.0; m * n], vec![0.0; m * n]);
        for r in 0..m {
            for c in 0..n {
                let (xr, wr) = (&x[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
                let (s, t) = xr
                    .iter()
                    .zip(wr)
                    .fold((0.0, 0.0), |(s, t), (p, q)| (p * q + s, (p * q).abs() + t));
                y[r * n + c] = s;
                a[r * n + c] = t;
                if mode == F64Gemm::Wrong {
                    y[r * n + c] += 1e-6 * (1.0 + t);
                }
            }
        }
        Ok((y, a))
    }

    fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        let Some(draws) = self.draws else {
            return Ok(None);
        };
        DRAWN_ACTIVATIONS.with(|n| n.set(n.get() + 1));
        let mut x = w4a16_reference::data::realistic_on_host(stream, dtype, count);
        if draws == Draws::Wrong {
            x.iter_mut().for_each(|v| *v = v.wrapping_add(1));
        }
        Ok(Some(x))
    }

    fn reference_products_held(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        _w_key: Option<u64>,
    ) -> Result<Option<HeldLanes>, DeviceFault> {
        if !self.held {
            return Ok(None);
        }
        let (m, n, k) = (x.m, weights.n, weights.k);
        let x = &x.to_f64();
        let (w, _, w_offset) = weights.decode();
        let (y, a) = self.reference_gemm_f64(x, &w, m, n, k)?;
        let offset = match w_offset {
            Some(o) => {
                let xa: Vec<f64> = x.iter().map(|v| v.abs()).collect();
                Some(self.reference_gemm_f64(&xa, &o, m, n, k)?.0)
            }
            None => None,
        };
        Ok(Some(HeldLanes {
            m,
            n,
            has_offset: offset.is_some(),
            inner: Box::new(HostLanes((y, a, offset))),
        }))
    }

    fn held_gather(
        &self,
        lanes: &HeldLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        let host: &HostLanes = lanes.inner(&self.name())?;
        Ok(host.gather(lanes.m * lanes.n, index))
    }

    fn held_download(&self, lanes: &HeldLanes) -> Result<RawLanes, DeviceFault> {
        let host: &HostLanes = lanes.inner(&self.name())?;
        Ok(host.0.clone())
    }

    fn held_overwrite_y_rows(
        &self,
        lanes: &mut HeldLanes,
        rows: &[(usize, Vec<f64>)],
    ) -> Result<(), DeviceFault> {
        lanes.check_rows(rows, &self.name())?;
        let n = lanes.n;
        let host: &mut HostLanes = lanes.inner_mut(&self.name())?;
        host.overwrite_y_rows(n, rows);
        Ok(())
    }

    fn held_judge(
        &self,
        lanes: &HeldLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        let host: &HostLanes = lanes.inner(&self.name())?;
        HELD_JUDGEMENTS.with(|n| n.set(n.get() + 1));
        Ok(host.judge(lanes.m, lanes.n, request))
    }
}

impl Runtime for Sim {
    type Buffer = SimBuf;

    type Event = u64;

    fn alloc(&self, bytes: usize) -> Result<SimBuf, DeviceFault> {
        let mut next = self.next.lock().unwrap();
        let base = *next;
        *next += (bytes as u64).next_multiple_of(256) + 256;
        let data = Arc::new(Mutex::new(vec![0xEE; bytes]));
        self.sizes.lock().unwrap().push(bytes);
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

    fn compares_on_device(&self) -> bool {
        self.compares
    }

    fn same_bytes(&self, a: &SimBuf, b: &SimBuf, bytes: usize) -> Result<bool, DeviceFault> {
        let (a, b) = (a.data.lock().unwrap(), b.data.lock().unwrap());
        Ok(bytes <= a.len() && bytes <= b.len() && a[..bytes] == b[..bytes])
    }

    fn input_cache(&self) -> Option<&Mutex<InputCache<SimBuf>>> {
        self.input_cache.as_ref()
    }

    fn copy(&self, dst: &mut SimBuf, src: &SimBuf, bytes: usize) -> Result<(), DeviceFault> {
        self.copies.lock().unwrap().push((src.base, dst.base));
        self.clock.tick(self.costs.as_ref(), &SimOp::Copy { bytes });
        let s = src.data.lock().unwrap()[..bytes].to_vec();
        dst.data.lock().unwrap()[..bytes].copy_from_slice(&s);
        Ok(())
    }

    fn launch(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        g: &LaunchGeometry,
        args: &PackedArgs,
    ) -> Result<(), DeviceFault> {
        *self.launches.lock().unwrap() += 1;
        let op = SimOp::Launch {
            kernel: kernel.id,
            entry,
            geometry: g,
        };
        self.clock.tick(self.costs.as_ref(), &op);
        if self.mode == Misbehave::Sticky {
            *self.lost.lock().unwrap() = Some("CUDA_ERROR_ILLEGAL_ADDRESS".into());
            return Err(DeviceFault::from_status(
                FaultClass::Sticky,
                "sync",
                "CUDA_ERROR_ILLEGAL_ADDRESS",
            ));
        }
        let values = args.values(kernel).expect("packed for this declaration");
        match kernel.id {
            KernelId::MoeAlign => return self.moe_align(kernel, &values),
            KernelId::Moe => return self.moe(kernel, entry, &values),
            _ => {}
        }
        let mut y = 0u64;
        let mut dense = 0u64;
        let mut x = 0u64;
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
                        role: TensorRole::Dense,
                        ..
                    },
                    RawArg::Pointer(p),
                ) => dense = p,
                (
                    ArgKind::Pointer {
                        role: TensorRole::X,
                        ..
                    },
                    RawArg::Pointer(p),
                ) => x = p,
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
        // A GEMM writes Y [M, N]; the dequant kernel (no M) writes the dense copy [N, K].
        let k = scalar[&ScalarArg::K];
        let (y, m, n, stride) = match scalar.get(&ScalarArg::M) {
            Some(&m) => (y, m, scalar[&ScalarArg::N], scalar[&ScalarArg::YRowStride]),
            None => (
                dense,
                scalar[&ScalarArg::N],
                k,
                scalar[&ScalarArg::DenseRowStride],
            ),
        };
        let echo = matches!(self.mode, Misbehave::EchoX | Misbehave::EchoXIgnoringStride);
        let mut values = Vec::with_capacity(m * n);
        for mi in 0..m {
            for ni in 0..n {
                values.push(if echo {
                    let xs = if self.mode == Misbehave::EchoX {
                        scalar[&ScalarArg::XRowStride]
                    } else {
                        k
                    };
                    let (xb, xoff) = self.resolve(x).expect("x points into a live buffer");
                    let d = xb.lock().unwrap();
                    let at = xoff + 2 * (mi * xs + ni % k);
                    u16::from_le_bytes([d[at], d[at + 1]])
                } else {
                    (mi * n + ni) as u16
                });
            }
        }
        // Every element goes through the address map, as a GPU's memory accesses do.
        let put = |at: u64, v: u16| -> Result<(), DeviceFault> {
            match self.resolve(at) {
                Some((buf, off)) if off + 2 <= buf.lock().unwrap().len() => {
                    buf.lock().unwrap()[off..off + 2].copy_from_slice(&v.to_le_bytes());
                    Ok(())
                }
                _ => {
                    let code = format!(
                        "CUDA_ERROR_ILLEGAL_ADDRESS (write of 2 bytes at {at:#x}, outside every allocation)"
                    );
                    *self.lost.lock().unwrap() = Some(code.clone());
                    Err(DeviceFault::from_status(
                        FaultClass::Sticky,
                        "simulated kernel",
                        &code,
                    ))
                }
            }
        };
        for mi in 0..m {
            for ni in 0..n {
                if self.mode == Misbehave::SkipLast && mi == m - 1 && ni == n - 1 {
                    continue;
                }
                put(y + 2 * (mi * stride + ni) as u64, values[mi * n + ni])?;
            }
        }
        match self.mode {
            Misbehave::PastEnd => put(y + 2 * ((m - 1) * stride + n) as u64, 1),
            Misbehave::IntoPadding => put(y + 2 * n as u64, 1),
            Misbehave::BeforeBase => put(y - 2, 1),
            _ => Ok(()),
        }
    }

    /// Records the call and computes nothing: the tests read what the BLAS was handed.
    fn blas_gemm(
        &self,
        g: &BlasGemm,
        _x: &SimBuf,
        _dense: &SimBuf,
        _y: &mut SimBuf,
    ) -> Result<(), DeviceFault> {
        if !self.blas {
            return Err(DeviceFault::MissingCapability {
                capability: Capability::VendorBlas,
                device: self.name(),
                why: "the simulated BLAS library is not installed".into(),
            });
        }
        self.blas_calls.lock().unwrap().push(*g);
        let op = SimOp::Blas {
            m: g.m,
            n: g.n,
            k: g.k,
        };
        self.clock.tick(self.costs.as_ref(), &op);
        Ok(())
    }

    fn record(&self) -> Result<u64, DeviceFault> {
        Ok(self.clock.now())
    }

    fn elapsed_us(&self, start: &u64, end: &u64) -> Result<f64, DeviceFault> {
        Ok(clock::elapsed_us(*start, *end))
    }

    fn synchronize(&self, during: &str) -> Result<(), DeviceFault> {
        if let Health::Lost { cause } = self.health() {
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

#[cfg(test)]
mod tests;
