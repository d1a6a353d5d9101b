//! Realistic X drawn on the device (`data::RealisticSource`, `cuda/seeded_activations.cu`):
//! the host's ChaCha8 draw was most of a GPU run's data time. The values come back to the host,
//! where the data module spot-checks them against its own stream and everything downstream
//! (the launches, the reference, the cross-check, the artifacts) reads them as before.

use cudarc::driver::PushKernelArg;
use w4a16_reference::ActDtype;
use w4a16_reference::data::StreamKey;

use super::CudaDevice;
use super::reference_judge::{config, grid};
use crate::{DeviceFault, Runtime};

/// At most this many blocks; each thread strides over groups of eight elements.
const MAX_BLOCKS: usize = 4096;

impl CudaDevice {
    pub(super) fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        if count == 0 {
            return Ok(Some(Vec::new()));
        }
        let during = format!("drawing {count} realistic activations");
        let f = self.harness_functions()?;
        self.bind(&during)?;
        // SAFETY: the generator writes every one of the `count` elements before the download.
        let mut out =
            unsafe { self.stream.alloc::<u16>(count) }.map_err(|e| self.fault(e, &during))?;
        let pair = |i: usize| u64::from(stream.key[i]) | (u64::from(stream.key[i + 1]) << 32);
        let (k01, k23, k45, k67) = (pair(0), pair(2), pair(4), pair(6));
        let (bf16, count64) = (i32::from(dtype == ActDtype::Bf16), count as u64);
        let mut b = self.stream.launch_builder(&f.realistic);
        b.arg(&k01).arg(&k23).arg(&k45).arg(&k67);
        b.arg(&stream.stream).arg(&bf16).arg(&count64).arg(&mut out);
        // SAFETY: `out` holds `count` u16; the kernel writes only indices below `count`.
        unsafe { b.launch(config(grid(count.div_ceil(8), MAX_BLOCKS))) }
            .map_err(|e| self.fault(e, &during))?;
        self.synchronize(&during)?;
        let values = self
            .stream
            .memcpy_dtov(&out)
            .map_err(|e| self.fault(e, &during))?;
        Ok(Some(values))
    }
}
