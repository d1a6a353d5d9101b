//! Selection and the static cross-check: the path the selection picks must be accepted by the
//! declared contracts on the case's real tensors (or, without a device, on the planned ones),
//! and the paths a mode runs are chosen here, with a kernel's declared refusal of the case's
//! X/Y views told apart from a real one.

use super::{CaseRun, Mode, path_check, producer_of};
use crate::runner::timing::Phase;
use crate::runner::verdict::{Cause, Check, KernelPath, Outcome, SourceError};
use std::time::Instant;
use w4a16_cases::ViewLayout;
use w4a16_device::tensor::LaunchInputs;
use w4a16_device::validate::ContractError;
use w4a16_kernels::{KernelDecl, KernelId, TensorRole, set};
use w4a16_reference::formats::{Producer, ResidentLayer};
use w4a16_reference::layer::{Activations, QuantizedLayer};
use w4a16_select::LayerRequest;

impl<'c, 'a> CaseRun<'c, 'a> {
    /// Without a device, a large layer's data would only feed skipped launches: check the
    /// selection against the declared contracts on the planned tensors instead.
    pub(super) fn select_statically(&mut self) {
        let case = self.case;
        let sel = w4a16_select::select(
            self.ctx.target,
            &LayerRequest::from_case_under(case, &self.ctx.config),
            &self.ctx.config,
        );
        let Some(path) = KernelPath::new(sel.path.clone()) else {
            self.push(
                Check::Selection(None),
                Outcome::Refused,
                "no kernel takes the layer",
            );
            return;
        };
        let check = Check::Selection(Some(path.clone()));
        match w4a16_select::cross_check(&sel, &w4a16_select::DeclaredContracts) {
            Ok(()) => self.push(check, Outcome::Pass, sel.dispatch.to_string()),
            Err(e) => self.push_cause(check, Outcome::Fail, Cause::Selection(SourceError::new(e))),
        }
        self.push_no_device(Check::Path(path));
    }

    pub(super) fn select_and_launch(
        &mut self,
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        seed: u64,
    ) {
        let case = self.case;
        let req = LayerRequest::from_case_under(case, &self.ctx.config);
        let sel = w4a16_select::select(self.ctx.target, &req, &self.ctx.config);
        let legacy = producer_of(case) == Producer::LegacyUnpackedZp;

        // Static cross-check with the real resident tensors: the chosen path's declared
        // contracts must accept them, or the selection would crash at launch.
        let mut refusal = None;
        for &k in &sel.path {
            if let Err(e) = self.check_case_contract(set::decl(k), x, resident) {
                refusal = Some((k, e));
                break;
            }
        }
        let layout_refusal = refusal
            .as_ref()
            .and_then(|(_, e)| self.declared_layout_refusal(e));
        let Some(sel_path) = KernelPath::new(sel.path.clone()) else {
            self.push(
                Check::Selection(None),
                Outcome::Refused,
                format!("no kernel takes the layer: {}", sel.rejection_list()),
            );
            return;
        };
        let check = Check::Selection(Some(sel_path));
        match (refusal, legacy) {
            (Some(r), true) => {
                self.push_contract(check, Outcome::Refused, r, |c| {
                    format!("the legacy unpacked zero points were refused before launch: {c}")
                });
                return;
            }
            // The case's X/Y view is one the selected kernel declares it does not take: the
            // engine must hand it another view, which is not the kernel's bug.
            (Some(r), false) if layout_refusal.is_some() => {
                let view = self.layout_name(layout_refusal);
                self.push_contract(check, Outcome::Refused, r, |c| {
                    format!("refuses this {view} view as declared: {c}")
                });
                if self.mode != Mode::Differential {
                    return;
                }
            }
            (Some(r), false) => {
                self.push_contract(check, Outcome::Fail, r, |c| {
                    format!("selected path would fail at launch: {c}")
                });
                return;
            }
            (None, true) => {
                self.push(
                    check,
                    Outcome::Fail,
                    "legacy unpacked zero points were accepted by a packed-zp kernel",
                );
                return;
            }
            (None, false) => self.push(check, Outcome::Pass, sel.dispatch.to_string()),
        }

        let paths: Vec<Vec<KernelId>> = match self.mode {
            Mode::Selected => vec![sel.path.clone()],
            Mode::SelectedWithFallback => {
                let mut p = vec![sel.path.clone()];
                if sel.path != [KernelId::Fallback]
                    && self.takes_case_layout(&[KernelId::Fallback], x, resident)
                {
                    p.push(vec![KernelId::Fallback]);
                }
                p
            }
            Mode::Differential => {
                // Every path the selection can reach (declared once in `select`), where the
                // case's layout is taken.
                let mut p = Vec::new();
                for path in w4a16_select::LINEAR_PATHS {
                    if self.takes_case_layout(path, x, resident) {
                        p.push(path.to_vec());
                    }
                }
                if self.case.carrier.is_on() && self.carrier_path(x, resident) {
                    p.push(vec![KernelId::FusedCarrier]);
                }
                p
            }
        };
        let Some(device) = self.ctx.device else {
            for p in paths {
                self.push_no_device(path_check(&p));
            }
            return;
        };
        let mut fallback_out: Option<Vec<u16>> = None;
        let mut fast_outs: Vec<(KernelId, Vec<u16>)> = Vec::new();
        for p in paths {
            let Some(out) = self.run_path(device, &p, x, logical, resident, seed) else {
                continue;
            };
            if p == [KernelId::Fallback] {
                fallback_out = Some(out);
            } else if p.len() == 1 || self.mode == Mode::SelectedWithFallback {
                // A selected multi-kernel path (dequant+dense) is judged by its last kernel's
                // recipe, as its own check is.
                fast_outs.push((*p.last().expect("non-empty path"), out));
            }
        }
        if let (Mode::Differential | Mode::SelectedWithFallback, Some(fb)) =
            (self.mode, fallback_out)
        {
            let start = Instant::now();
            for (k, out) in fast_outs {
                self.second_opinion(k, &out, &fb, x, logical);
            }
            self.times.add(Phase::Verify, start.elapsed());
        }
    }

    /// Whether `decl`'s declared contract accepts this launch (the static cross-check), with X
    /// and Y as the case lays them out for that kernel.
    pub(super) fn check_case_contract(
        &self,
        decl: &KernelDecl,
        x: &Activations,
        resident: &ResidentLayer,
    ) -> Result<(), ContractError> {
        let (xl, yl) = (self.case.x_layout, self.case.y_layout);
        self.check_contract(decl, x, resident, xl, yl)
    }

    /// As [`Self::check_case_contract`] with the X and Y layouts given.
    fn check_contract(
        &self,
        decl: &KernelDecl,
        x: &Activations,
        resident: &ResidentLayer,
        x_layout: ViewLayout,
        y_layout: ViewLayout,
    ) -> Result<(), ContractError> {
        let dense = self.dense_spec(resident);
        let xv = self.x_view(decl.id, x, x_layout);
        let y = self.y_spec(x.m, y_layout);
        let inputs = match decl.id {
            KernelId::Dequant => LaunchInputs::dequant(resident, &dense),
            // The dense kernel reads the dense copy: checked on that copy's shape, since its data
            // does not exist before the dequant runs.
            KernelId::Dense => LaunchInputs::dense_view(xv, &dense, resident.bias.as_deref(), &y),
            KernelId::FusedCarrier => {
                LaunchInputs::gemm_carrier_view(resident, self.carrier.as_ref(), xv, &y)
            }
            _ => LaunchInputs::gemm_view(resident, xv, &y),
        };
        w4a16_device::validate::validate(decl, &inputs).map(|_| ())
    }

    /// Differential mode: whether every kernel of `path` takes the case with its X/Y layouts.
    /// A kernel that refuses only the layout, and with its declared row-layout rule, is
    /// `Refused` as intended; one that refuses the layout for any other reason fails; one that
    /// refuses the case whatever the layout is simply not run (as for M or G outside its range).
    pub(super) fn takes_case_layout(
        &mut self,
        path: &[KernelId],
        x: &Activations,
        resident: &ResidentLayer,
    ) -> bool {
        for &k in path {
            let decl = set::decl(k);
            let Err(e) = self.check_case_contract(decl, x, resident) else {
                continue;
            };
            let default = ViewLayout::default();
            let takes_default = self
                .check_contract(decl, x, resident, default, default)
                .is_ok();
            if !takes_default {
                return false;
            }
            let tensor = self.declared_layout_refusal(&e);
            if tensor.is_some() {
                let view = self.layout_name(tensor);
                self.push_contract(path_check(path), Outcome::Refused, (k, e), |c| {
                    format!("refuses this {view} view as declared: {c}")
                });
            } else {
                self.push_contract(path_check(path), Outcome::Fail, (k, e), |c| {
                    format!("takes contiguous X and Y but refuses this case's views with a reason its row-layout rules do not give: {c}")
                });
            }
            return false;
        }
        true
    }

    /// X or Y, when `e` is that tensor's declared row-layout refusal of a layout the case asked
    /// for (a refusal of the default layout is no case-made choice: the caller fails it).
    fn declared_layout_refusal(&self, e: &ContractError) -> Option<TensorRole> {
        e.row_layout_tensor().filter(|role| match role {
            TensorRole::X => !self.case.x_layout.is_default(),
            TensorRole::Y => !self.case.y_layout.is_default(),
            _ => false,
        })
    }

    /// `x offset-2b` / `y odd-stride`, for refusal messages.
    fn layout_name(&self, tensor: Option<TensorRole>) -> String {
        match tensor {
            Some(TensorRole::X) => format!("x {}", self.case.x_layout.name()),
            Some(TensorRole::Y) => format!("y {}", self.case.y_layout.name()),
            _ => "x/y".to_string(),
        }
    }
}
