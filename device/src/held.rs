//! The GPU reference's lanes kept on the device (`--reference gpu`): the f64 products
//! `y = X·Wᵀ`, `a = |X|·|W|ᵀ` and the offset lane stay where the DGEMM formed them, the kernel
//! output is judged there ([`ReferenceOffload::held_judge`](crate::ReferenceOffload::held_judge)), and only the report comes back. The
//! harness reaches them through [`DeviceHeld`], the reference crate's
//! [`HeldProducts`] over a device.

use std::any::Any;

use w4a16_reference::compare::{self, CompareReport, JudgeRequest};
use w4a16_reference::offload::{
    ActivationOperand, GemmError, HeldGemm, HeldProducts, RawLanes, WeightOperand,
};

use crate::{Device, DeviceFault};

/// One reference's lanes on a device: what the backend keeps (`inner`, its own type) and the
/// shape every caller checks against.
pub struct HeldLanes {
    pub m: usize,
    pub n: usize,
    pub has_offset: bool,
    pub inner: Box<dyn Any + Send + Sync>,
}

impl HeldLanes {
    /// The backend's own part, or a fault naming the mix-up (lanes of another backend).
    pub fn inner<T: 'static>(&self, device: &str) -> Result<&T, DeviceFault> {
        self.inner
            .downcast_ref::<T>()
            .ok_or_else(|| another_backend(device))
    }

    /// As [`HeldLanes::inner`], to write to.
    pub fn inner_mut<T: 'static>(&mut self, device: &str) -> Result<&mut T, DeviceFault> {
        self.inner
            .downcast_mut::<T>()
            .ok_or_else(|| another_backend(device))
    }

    /// Rows to overwrite in the `y` lane, each `N` long and below `M`: a fault naming the
    /// first that is not.
    pub fn check_rows(&self, rows: &[(usize, Vec<f64>)], device: &str) -> Result<(), DeviceFault> {
        match rows.iter().find(|(m, v)| *m >= self.m || v.len() != self.n) {
            Some((m, v)) => Err(DeviceFault::Unsupported {
                what: format!(
                    "row {m} of {} values for held lanes of M = {} and N = {}",
                    v.len(),
                    self.m,
                    self.n
                ),
                device: device.to_string(),
            }),
            None => Ok(()),
        }
    }
}

fn another_backend(device: &str) -> DeviceFault {
    DeviceFault::Unsupported {
        what: "device-held reference lanes formed by another backend".into(),
        device: device.to_string(),
    }
}

/// Lanes in host memory: a device written in host code (the simulated one) keeps its products
/// this way and judges them with the host twin of the on-device judge.
pub struct HostLanes(pub RawLanes);

impl HostLanes {
    pub fn gather(&self, n_elements: usize, index: &[usize]) -> Vec<[f64; 3]> {
        let (y, a, o) = &self.0;
        index
            .iter()
            .filter(|&&i| i < n_elements)
            .map(|&i| [y[i], a[i], o.as_ref().map_or(0.0, |o| o[i])])
            .collect()
    }

    /// Overwrites whole rows of `y` (checked by [`HeldLanes::check_rows`]).
    pub fn overwrite_y_rows(&mut self, n: usize, rows: &[(usize, Vec<f64>)]) {
        for (m, values) in rows {
            self.0.0[m * n..(m + 1) * n].copy_from_slice(values);
        }
    }

    pub fn judge(&self, m: usize, n: usize, request: &JudgeRequest<'_>) -> Option<CompareReport> {
        let (y, a, o) = &self.0;
        compare::judge_plain(request, m, n, y, a, o.as_deref())
    }
}

/// A device's held lanes as the reference crate's [`HeldProducts`].
pub struct DeviceHeld<'d> {
    device: &'d dyn Device,
    lanes: HeldLanes,
}

fn boxed(e: DeviceFault) -> GemmError {
    Box::new(e)
}

impl HeldProducts for DeviceHeld<'_> {
    fn gather(&self, index: &[usize]) -> Result<Vec<[f64; 3]>, GemmError> {
        self.device.held_gather(&self.lanes, index).map_err(boxed)
    }

    fn download(&self) -> Result<RawLanes, GemmError> {
        self.device.held_download(&self.lanes).map_err(boxed)
    }

    fn judge(&self, request: &JudgeRequest<'_>) -> Result<Option<CompareReport>, GemmError> {
        self.device.held_judge(&self.lanes, request).map_err(boxed)
    }

    fn overwrite_y_rows(&mut self, rows: &[(usize, Vec<f64>)]) -> Result<(), GemmError> {
        self.device
            .held_overwrite_y_rows(&mut self.lanes, rows)
            .map_err(boxed)
    }
}

/// A device as the held reference's GEMM.
pub struct DeviceHeldGemm<'d>(pub &'d dyn Device);

impl<'d> HeldGemm<'d> for DeviceHeldGemm<'d> {
    fn products(
        &mut self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<Box<dyn HeldProducts + 'd>>, GemmError> {
        let lanes = self
            .0
            .reference_products_held(x, weights, w_key)
            .map_err(boxed)?;
        Ok(lanes.map(|lanes| {
            Box::new(DeviceHeld {
                device: self.0,
                lanes,
            }) as Box<dyn HeldProducts + 'd>
        }))
    }

    fn stands_in(&self) -> bool {
        self.0.computes_nothing()
    }
}

/// A backend without held lanes was asked about some.
pub fn no_held_lanes(device: String) -> DeviceFault {
    DeviceFault::Unsupported {
        what: "device-held reference lanes (this backend forms none)".into(),
        device,
    }
}
