//! The carrier case: the asymmetric carrier built and read back (`carrier`), the typed
//! refusal of a symmetric layer's carrier launch, and the padded-stride trap
//! (`carrier-stride-trap`), before fused_carrier is launched at all.

use super::{CaseRun, path_check};
use crate::runner::verdict::{Check, Outcome, ReferenceStage};
use w4a16_cases::{CarrierMode, ViewLayout};
use w4a16_device::tensor::{LaunchInputs, TensorView};
use w4a16_device::validate::ContractError;
use w4a16_kernels::{KernelId, set};
use w4a16_reference::formats::{Carrier, CarrierError, ResidentLayer, ZeroPoints};
use w4a16_reference::layer::Activations;

impl<'c, 'a> CaseRun<'c, 'a> {
    /// A carrier case: builds the layer's carrier (the `carrier` verdict), checks the stride
    /// trap of a padded-scales case, and decides whether fused_carrier runs. A symmetric layer
    /// has no carrier: its carrier launch must be refused by validation, typed, before any
    /// launch (the `fused_carrier` verdict, `Refused`).
    pub(super) fn carrier_path(&mut self, x: &Activations, resident: &ResidentLayer) -> bool {
        let path = [KernelId::FusedCarrier];
        self.carrier = self.build_carrier(resident);
        if resident.zeros.is_none() {
            let decl = set::decl(KernelId::FusedCarrier);
            match self.check_case_contract(decl, x, resident) {
                Err(e @ ContractError::CarrierForSymmetricLayer { .. }) => {
                    self.push_contract(
                        path_check(&path),
                        Outcome::Refused,
                        (decl.id, e),
                        |c| format!("refused before launch, as a symmetric layer must be: {c}"),
                    );
                }
                Err(e) => self.push_contract(path_check(&path), Outcome::Fail, (decl.id, e), |c| {
                    format!("a symmetric layer's carrier launch was refused for another reason than its symmetry: {c}")
                }),
                Ok(()) => self.push(
                    path_check(&path),
                    Outcome::Fail,
                    "a carrier launch for a symmetric layer passed validation",
                ),
            }
            return false;
        }
        if self.carrier.is_none() {
            return false;
        }
        if self.case.carrier == CarrierMode::PaddedScales {
            self.stride_trap(x, resident);
        }
        self.takes_case_layout(&path, x, resident)
    }

    /// The carrier of the resident layer, checked against the scales and packed zero points it
    /// was built from (the `carrier` verdict). `None` without one: a symmetric layer (no verdict
    /// here; its launch is the refusal), legacy zero points (refused), or a failure.
    fn build_carrier(&mut self, resident: &ResidentLayer) -> Option<Carrier> {
        let c = match Carrier::from_resident(resident) {
            Ok(c) => c,
            Err(CarrierError::SymmetricLayer) => return None,
            Err(e @ CarrierError::UnpackedZeroPoints { .. }) => {
                self.push_reference(Check::Carrier, Outcome::Refused, ReferenceStage::Carrier, e);
                return None;
            }
            Err(e) => {
                self.push_reference(Check::Carrier, Outcome::Fail, ReferenceStage::Carrier, e);
                return None;
            }
        };
        let Some(ZeroPoints::Packed(zeros)) = &resident.zeros else {
            unreachable!("a carrier is built from packed zero points only");
        };
        let (n, groups) = (resident.shape.n, resident.shape.groups());
        let f16 = resident.dtype == w4a16_reference::ActDtype::F16;
        let wrong = (0..n)
            .flat_map(|r| (0..groups).map(move |g| (r, g)))
            .find(|&(r, g)| {
                let s = resident.scales.get(r, g);
                // An fp16 word of a zero scale holds ±0 whatever z: nothing to read back.
                let z_lost = f16 && resident.dtype.to_f64(s) == 0.0;
                c.scale_bits(r, g) != s || (!z_lost && c.zero(r, g) != Some(zeros.get(r, g)))
            });
        match wrong {
            _ if (c.n, c.groups, c.words.len()) != (n, groups, n * groups) => self.push(
                Check::Carrier,
                Outcome::Fail,
                format!(
                    "carrier is [{}, {}] with {} words, expected [N, K/G] = [{n}, {groups}]",
                    c.n,
                    c.groups,
                    c.words.len()
                ),
            ),
            Some((r, g)) => self.push(
                Check::Carrier,
                Outcome::Fail,
                format!(
                    "word (n = {r}, g = {g}) = {:#010x} does not read back as scale {:#06x}, z = {}",
                    c.word(r, g),
                    resident.scales.get(r, g),
                    zeros.get(r, g)
                ),
            ),
            None => self.push(
                Check::Carrier,
                Outcome::Pass,
                format!(
                    "u32 [{n}, {groups}], row stride K/G = {groups} (scales row stride {}); reads back as the scales and zero points",
                    resident.scales.row_stride
                ),
            ),
        }
        Some(c)
    }

    /// docs/field.md §6 item 4: the unpadded carrier handed over with the scales' padded row stride
    /// must be refused, typed, before any launch.
    fn stride_trap(&mut self, x: &Activations, resident: &ResidentLayer) {
        let Some(c) = &self.carrier else { return };
        let decl = set::decl(KernelId::FusedCarrier);
        let stride = resident.scales.row_stride;
        let xv = self.x_view(decl.id, x, ViewLayout::default());
        let y = self.y_spec(x.m, ViewLayout::default());
        let mut inputs = LaunchInputs::gemm_carrier_view(resident, Some(c), xv, &y);
        inputs.carrier = Some(TensorView::matrix(
            w4a16_device::tensor::ElemType::U32,
            c.n,
            c.groups,
            stride,
            c.words.len() * 4,
        ));
        let check = Check::CarrierStrideTrap;
        match w4a16_device::validate::validate(decl, &inputs) {
            Err(e @ ContractError::CarrierRowStride { .. }) => {
                self.push_contract(check, Outcome::Refused, (decl.id, e), |c| {
                    format!("the carrier with the scales' padded row stride was refused before launch: {c}")
                });
            }
            Err(e) => self.push_contract(check, Outcome::Fail, (decl.id, e), |c| {
                format!("the mis-strided carrier was refused for another reason than its stride: {c}")
            }),
            Ok(_) => self.push(
                check,
                Outcome::Fail,
                format!(
                    "the carrier with the scales' row stride {stride} (not K/G = {}) passed validation",
                    c.groups
                ),
            ),
        }
    }
}
