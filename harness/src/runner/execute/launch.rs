//! Launching a path on the device: one kernel (with its determinism and padding-identity
//! checks in differential mode) or the dequant + vendor-BLAS pair, each output then judged.

use super::{CaseRun, Mode, path_check};
use crate::runner::timing::Phase;
use crate::runner::verdict::{Cause, Check, Mismatch, Outcome};
use std::time::Instant;
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{TensorView, XBuffer, YSpec};
use w4a16_device::{DequantCheck, Device, GemmOutput, OutputLayout};
use w4a16_kernels::decl::LaunchShape;
use w4a16_kernels::{KernelDecl, KernelId, set};
use w4a16_reference::formats::{Carrier, ResidentLayer, RowPadding};
use w4a16_reference::layer::{Activations, QuantizedLayer};

impl<'c, 'a> CaseRun<'c, 'a> {
    fn entry(&self, decl: &KernelDecl, x: &Activations) -> String {
        let shape = LaunchShape {
            m: x.m,
            n: self.case.shape.n,
            k: self.case.shape.k,
            group: self.case.shape.group,
            dtype: self.case.dtype,
            asymmetric: self.case.symmetry == w4a16_reference::layer::Symmetry::Asym,
            routing: None,
        };
        decl.launch_entry(&shape, self.ctx.target)
    }

    /// Launches one path; returns its output bits when it produced any.
    pub(super) fn run_path(
        &mut self,
        device: &dyn Device,
        path: &[KernelId],
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        seed: u64,
    ) -> Option<Vec<u16>> {
        let check = path_check(path);
        let y = self.y_spec(x.m, self.case.y_layout);
        let last = set::decl(*path.last().expect("non-empty path"));
        let output = if path == [KernelId::Dequant, KernelId::Dense] {
            self.run_dequant_dense(device, x, logical, resident, &y)
        } else {
            let decl = set::decl(path[0]);
            let entry = self.entry(decl, x);
            let xb = self.x_buffer(decl.id, x);
            let carrier = self.carrier.clone();
            let inputs = match decl.id {
                KernelId::FusedCarrier => {
                    DeviceInputs::gemm_carrier_strided(decl, resident, carrier.as_ref(), &xb, y)
                }
                _ => DeviceInputs::gemm_strided(decl, resident, &xb, y),
            };
            let inputs = match inputs {
                Ok(i) => i,
                Err(e) => {
                    self.push_contract(check, Outcome::Fail, (decl.id, e), |c| {
                        format!("refused at launch: {c}")
                    });
                    return None;
                }
            };
            let first = self
                .times
                .time(Phase::Device, || device.run_gemm(decl, &entry, &inputs));
            if let (Ok(a), Mode::Differential) = (&first, self.mode) {
                // Determinism: a second launch must match bit for bit.
                let second = self
                    .times
                    .time(Phase::Device, || device.run_gemm(decl, &entry, &inputs));
                let det = Check::Determinism(decl.id);
                match second {
                    Ok(b) if b.y_bits == a.y_bits => self.push(det, Outcome::Pass, ""),
                    Ok(b) => {
                        let elements = differing(&a.y_bits, &b.y_bits);
                        self.push_cause(
                            det,
                            Outcome::Fail,
                            Cause::Mismatch(Mismatch::Nondeterministic { elements }),
                        );
                    }
                    Err(e) => self.push_device(det, e),
                }
                let views = (inputs.launch().x.clone(), y);
                self.padding_identity(device, decl, &entry, x, logical, resident, views, &a.y_bits);
            }
            first.map_err(Cause::Device)
        };
        let out = match output {
            Ok(o) => o,
            Err(Cause::Device(e)) => {
                self.push_device(check, e);
                return None;
            }
            Err(cause) => {
                self.push_cause(check, Outcome::Fail, cause);
                return None;
            }
        };
        let recipe = (last.recipe)(self.case.dtype);
        let start = Instant::now();
        let v = self.judge(check, &recipe, x, logical, &out, seed);
        self.times.add(Phase::Verify, start.elapsed());
        self.verdicts.push(v);
        Some(out.y_bits)
    }

    /// The dequant kernel (its own bit-exact `dequant` check), then the vendor BLAS on its copy.
    /// A refusal or a device error of either stage is the path's cause.
    fn run_dequant_dense(
        &mut self,
        device: &dyn Device,
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        y: &YSpec,
    ) -> Result<GemmOutput, Cause> {
        let dq = set::decl(KernelId::Dequant);
        let dense = self.dense_spec(resident);
        let contract = |kernel: KernelId| move |error| Cause::Contract { kernel, error };
        let inputs =
            DeviceInputs::dequant(dq, resident, dense).map_err(contract(KernelId::Dequant))?;
        let entry = (dq.entry_point)(self.case.dtype).to_string();
        let prepared = self.prepared.clone();
        let prepared = prepared.filter(|p| std::ptr::eq(&p.layer, logical));
        // The buffer a correct kernel leaves, where the prepared layer knows it: compared on
        // the device, so an identical copy (the rule) never comes back to the host. Forming it
        // (once per layer) is the dequant check's reference: verification time.
        let poison = self.case.dtype.poison_bits();
        let on_device = device.compares_on_device();
        let payload = self.times.time(Phase::Verify, || {
            let view = inputs.launch().dense.as_ref().filter(|_| on_device);
            view.and_then(|view| {
                let layout = OutputLayout::for_view(view, poison);
                prepared.as_ref()?.dequant_payload(&layout)
            })
        });
        let checked = self
            .times
            .time(Phase::Device, || match &payload {
                Some(p) => device.dequant_against(dq, &entry, &inputs, p),
                None => device
                    .dequant(dq, &entry, &inputs)
                    .map(DequantCheck::Output),
            })
            .map_err(Cause::Device)?;
        let dq_check = Check::kernel(KernelId::Dequant);
        let d = match checked {
            DequantCheck::Output(d) => d,
            DequantCheck::AsExpected => {
                self.push(
                    dq_check,
                    Outcome::Pass,
                    "bit-exact (compared on the device)",
                );
                // Only a comparison against the payload says so.
                let strided = payload.as_deref().map_or(&[][..], Vec::as_slice);
                return self.run_dense(device, x, resident, strided, y);
            }
        };
        // The dequantized copy is bit-exact: (q − z)·s in fp32, rounded once. The expected
        // copy is the prepared layer's (once per layer) unless the case launches another one.
        let mismatches = self.times.time(Phase::Verify, || {
            let own;
            let expected = match &prepared {
                Some(p) => p.dense_copy(),
                None => {
                    own = super::prepare::expected_dense_copy(logical);
                    &own
                }
            };
            copy_mismatches(&d.dense_bits, expected)
        });
        let guards = d.guard_violations.len();
        if mismatches == 0 && guards == 0 {
            self.push(dq_check, Outcome::Pass, "bit-exact");
        } else {
            let cause = Cause::Mismatch(Mismatch::Dequant {
                elements: mismatches,
                guard_violations: guards,
            });
            self.push_cause(dq_check, Outcome::Fail, cause);
        }
        self.run_dense(device, x, resident, &d.strided_bits, y)
    }

    /// The vendor BLAS on the dequant kernel's copy as it lies in its buffer (`strided`).
    fn run_dense(
        &mut self,
        device: &dyn Device,
        x: &Activations,
        resident: &ResidentLayer,
        strided: &[u16],
        y: &YSpec,
    ) -> Result<GemmOutput, Cause> {
        let dense = self.dense_spec(resident);
        let dn = set::decl(KernelId::Dense);
        let xb = self.x_buffer(KernelId::Dense, x);
        let bias = resident.bias.as_deref();
        let inputs =
            DeviceInputs::dense_strided(dn, &xb, dense, strided, bias, *y).map_err(|error| {
                Cause::Contract {
                    kernel: KernelId::Dense,
                    error,
                }
            })?;
        self.times
            .time(Phase::Device, || device.dense_gemm(dn, &inputs))
            .map_err(Cause::Device)
    }

    /// Padded and unpadded layouts must give bit-identical results (docs/contract.md §5), and so must
    /// strided and offset views of X and Y against contiguous ones: `views` are the X view and
    /// Y the padded run had.
    #[allow(clippy::too_many_arguments)]
    fn padding_identity(
        &mut self,
        device: &dyn Device,
        decl: &KernelDecl,
        entry: &str,
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        views: (Option<TensorView>, YSpec),
        padded_bits: &[u16],
    ) {
        let unpadded_stride = resident.shape.k / 2;
        let (xv, yv) = views;
        let x_contiguous = xv.is_none_or(|v| v.strides[0] == x.k && v.byte_offset == 0);
        let y_plain = yv.row_stride == yv.n && yv.offset == 0;
        if resident.weights.row_stride_bytes == unpadded_stride
            && resident.scales.row_stride == resident.scales.groups
            && x_contiguous
            && y_plain
        {
            return;
        }
        let Ok(plain) = ResidentLayer::from_logical(logical, RowPadding::NONE) else {
            return;
        };
        let x_plain = x.with_row_stride(x.k);
        let y = YSpec::dense(x.m, self.case.shape.n, self.case.dtype);
        let check = Check::Padding(decl.id);
        // The carrier of the unpadded layer (the same words: the carrier is never padded).
        let plain_carrier = match decl.id {
            KernelId::FusedCarrier => Carrier::from_resident(&plain).ok(),
            _ => None,
        };
        let xb_plain = XBuffer::as_laid_out(&x_plain);
        let inputs = match decl.id {
            KernelId::FusedCarrier => DeviceInputs::gemm_carrier_strided(
                decl,
                &plain,
                plain_carrier.as_ref(),
                &xb_plain,
                y,
            ),
            _ => DeviceInputs::gemm(decl, &plain, &x_plain, y),
        };
        let inputs = match inputs {
            Ok(i) => i,
            Err(e) => {
                self.push_contract(check, Outcome::Fail, (decl.id, e), |c| {
                    format!("the unpadded contiguous layout was refused: {c}")
                });
                return;
            }
        };
        let unpadded = self
            .times
            .time(Phase::Device, || device.run_gemm(decl, entry, &inputs));
        match unpadded {
            Ok(o) if o.y_bits == padded_bits => self.push(
                check,
                Outcome::Pass,
                "padded/strided/offset == unpadded contiguous",
            ),
            Ok(o) => {
                let elements = differing(&o.y_bits, padded_bits);
                self.push_cause(
                    check,
                    Outcome::Fail,
                    Cause::Mismatch(Mismatch::LayoutDependent { elements }),
                );
            }
            Err(e) => self.push_device(check, e),
        }
    }
}

/// How many elements of two outputs of one shape differ.
fn differing(a: &[u16], b: &[u16]) -> usize {
    a.iter().zip(b).filter(|(p, q)| p != q).count()
}

/// Elements where the dequant kernel's copy differs from the expected one (every expected
/// element the copy lacks counts as one), chunked across threads.
fn copy_mismatches(got: &[u16], expected: &[u16]) -> usize {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let missing = expected.len().saturating_sub(got.len());
    let compared = got.len().min(expected.len());
    let differ = got[..compared]
        .par_chunks(CHUNK)
        .zip(expected[..compared].par_chunks(CHUNK))
        .map(|(g, e)| {
            if g == e {
                0
            } else {
                g.iter().zip(e).filter(|(a, b)| a != b).count()
            }
        })
        .sum::<usize>();
    differ + missing
}

#[cfg(test)]
mod copy_tests {
    #[test]
    fn every_differing_or_missing_element_of_the_copy_counts() {
        let expected: Vec<u16> = (0..200_000u32).map(|i| i as u16).collect();
        let mut got = expected.clone();
        assert_eq!(super::copy_mismatches(&got, &expected), 0);
        got[3] ^= 1;
        got[150_000] ^= 0x8000;
        assert_eq!(super::copy_mismatches(&got, &expected), 2);
        got.truncate(199_990);
        assert_eq!(super::copy_mismatches(&got, &expected), 12);
    }
}
