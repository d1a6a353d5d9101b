//! What a device needs for one launch: host bytes for each input tensor, tied to the views they
//! were validated as, and the kernel-argument buffer packed from the declaration.
//!
//! [`DeviceInputs`] can only be built through validation, so a device never launches on
//! unvalidated inputs; [`pack_args`] lays the arguments out at `arg_offsets(decl.args)`, the
//! same buffer the code-object ABI check compares against.

use std::borrow::Cow;
use std::ffi::c_void;

use w4a16_kernels::decl::arg_offsets;
use w4a16_kernels::{ArgKind, KernelDecl, KernelId, TensorRole};
use w4a16_reference::Activations;
use w4a16_reference::formats::{Carrier, ResidentLayer, ZeroPoints};

use crate::tensor::{DenseSpec, LaunchInputs, XBuffer, YSpec};
use crate::validate::{ArgValue, ContractError, ValidatedLaunch, validate};

/// Host memory behind one input tensor, in its natural element type (uploaded little-endian).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostBytes<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
}

impl<'a> HostBytes<'a> {
    pub fn len_bytes(&self) -> usize {
        match self {
            HostBytes::U8(b) => b.len(),
            HostBytes::U16(b) => b.len() * 2,
            HostBytes::U32(b) => b.len() * 4,
        }
    }

    /// The bytes as the device sees them (little-endian): the host's own bytes where it is
    /// little-endian too, with no copy (X and the weights go up for every case).
    pub fn le_bytes(&self) -> Cow<'a, [u8]> {
        #[cfg(target_endian = "little")]
        return match *self {
            HostBytes::U8(b) => Cow::Borrowed(b),
            HostBytes::U16(b) => Cow::Borrowed(bytemuck::cast_slice(b)),
            HostBytes::U32(b) => Cow::Borrowed(bytemuck::cast_slice(b)),
        };
        #[cfg(target_endian = "big")]
        match *self {
            HostBytes::U8(b) => Cow::Borrowed(b),
            HostBytes::U16(b) => Cow::Owned(b.iter().flat_map(|v| v.to_le_bytes()).collect()),
            HostBytes::U32(b) => Cow::Owned(b.iter().flat_map(|v| v.to_le_bytes()).collect()),
        }
    }
}

/// Everything a device needs for one launch, validated against one kernel declaration.
#[derive(Clone, Debug)]
pub struct DeviceInputs<'a> {
    launch: LaunchInputs,
    validated: ValidatedLaunch,
    host: Vec<(TensorRole, HostBytes<'a>)>,
    output: TensorRole,
}

impl<'a> DeviceInputs<'a> {
    /// Validates `launch` against `decl` and pairs each input view with its host bytes. Output
    /// tensors (the arguments the declaration marks `writes`) take no host data.
    pub fn new(
        decl: &KernelDecl,
        launch: LaunchInputs,
        host: Vec<(TensorRole, HostBytes<'a>)>,
    ) -> Result<Self, ContractError> {
        let validated = validate(decl, &launch)?;
        let mut output = None;
        for a in decl.args {
            if let ArgKind::Pointer { role, writes, .. } = a.kind {
                if writes {
                    output = Some(role);
                    continue;
                }
                let Some(view) = launch.view(role) else {
                    continue;
                };
                let got = host
                    .iter()
                    .find(|(r, _)| *r == role)
                    .map_or(0, |(_, h)| h.len_bytes());
                if got < view.bytes_available {
                    return Err(ContractError::HostBufferShort {
                        tensor: role.name(),
                        claimed: view.bytes_available,
                        got,
                    });
                }
            }
        }
        // Every declaration of the set writes exactly one tensor; one without is refused as a
        // null output rather than launched blind.
        let output = output.ok_or(ContractError::NullPointer {
            kernel: decl.id,
            arg: "(output)",
            tensor: "output",
        })?;
        Ok(DeviceInputs {
            launch,
            validated,
            host,
            output,
        })
    }

    /// `Y = X·Wᵀ (+ bias)` for skinny, fused and fallback.
    pub fn gemm(
        decl: &KernelDecl,
        layer: &'a ResidentLayer,
        x: &'a Activations,
        y: YSpec,
    ) -> Result<Self, ContractError> {
        let launch = LaunchInputs::gemm(layer, x, &y);
        let mut host = layer_host(layer);
        host.push((TensorRole::X, HostBytes::U16(&x.data)));
        Self::new(decl, launch, host)
    }

    /// As [`Self::gemm`], with X strided and offset inside its own buffer.
    pub fn gemm_strided(
        decl: &KernelDecl,
        layer: &'a ResidentLayer,
        x: &'a XBuffer<'_>,
        y: YSpec,
    ) -> Result<Self, ContractError> {
        let launch = LaunchInputs::gemm_view(layer, x.view(), &y);
        let mut host = layer_host(layer);
        host.push((TensorRole::X, HostBytes::U16(&x.host)));
        Self::new(decl, launch, host)
    }

    /// `Y = X·Wᵀ (+ bias)` for fused_carrier: the carrier in place of the scales and zero points,
    /// X strided and offset inside its own buffer. `carrier` is `None` for a layer that has none
    /// (symmetric): refused at validation, before any upload.
    pub fn gemm_carrier_strided(
        decl: &KernelDecl,
        layer: &'a ResidentLayer,
        carrier: Option<&'a Carrier>,
        x: &'a XBuffer<'_>,
        y: YSpec,
    ) -> Result<Self, ContractError> {
        let launch = LaunchInputs::gemm_carrier_view(layer, carrier, x.view(), &y);
        let mut host = vec![
            (TensorRole::Weights, HostBytes::U8(&layer.weights.bytes)),
            (TensorRole::X, HostBytes::U16(&x.host)),
        ];
        if let Some(c) = carrier {
            host.push((TensorRole::Carrier, HostBytes::U32(&c.words)));
        }
        if let Some(b) = &layer.bias {
            host.push((TensorRole::Bias, HostBytes::U16(b)));
        }
        Self::new(decl, launch, host)
    }

    /// The resident layer to the dense copy.
    pub fn dequant(
        decl: &KernelDecl,
        layer: &'a ResidentLayer,
        dense: DenseSpec,
    ) -> Result<Self, ContractError> {
        let mut host = layer_host(layer);
        host.retain(|(r, _)| *r != TensorRole::Bias);
        Self::new(decl, LaunchInputs::dequant(layer, &dense), host)
    }

    /// `Y = X·Denseᵀ (+ bias)` on a dense copy whose rows are `dense.row_stride` apart.
    pub fn dense(
        decl: &KernelDecl,
        x: &'a Activations,
        dense: DenseSpec,
        dense_bits: &'a [u16],
        bias: Option<&'a [u16]>,
        y: YSpec,
    ) -> Result<Self, ContractError> {
        let launch = LaunchInputs::dense(x, &dense, bias, &y);
        let mut host = vec![
            (TensorRole::X, HostBytes::U16(&x.data)),
            (TensorRole::Dense, HostBytes::U16(dense_bits)),
        ];
        if let Some(b) = bias {
            host.push((TensorRole::Bias, HostBytes::U16(b)));
        }
        Self::new(decl, launch, host)
    }

    /// As [`Self::dense`], with X strided and offset inside its own buffer.
    pub fn dense_strided(
        decl: &KernelDecl,
        x: &'a XBuffer<'_>,
        dense: DenseSpec,
        dense_bits: &'a [u16],
        bias: Option<&'a [u16]>,
        y: YSpec,
    ) -> Result<Self, ContractError> {
        let launch = LaunchInputs::dense_view(x.view(), &dense, bias, &y);
        let mut host = vec![
            (TensorRole::X, HostBytes::U16(&x.host)),
            (TensorRole::Dense, HostBytes::U16(dense_bits)),
        ];
        if let Some(b) = bias {
            host.push((TensorRole::Bias, HostBytes::U16(b)));
        }
        Self::new(decl, launch, host)
    }

    pub fn kernel(&self) -> KernelId {
        self.validated.kernel
    }

    pub fn launch(&self) -> &LaunchInputs {
        &self.launch
    }

    pub fn validated(&self) -> &ValidatedLaunch {
        &self.validated
    }

    /// The tensor the launch writes (Y, or the dense copy for dequant).
    pub fn output_role(&self) -> TensorRole {
        self.output
    }

    /// Host bytes of an input tensor (`None` for null arguments and for the output).
    pub fn host(&self, role: TensorRole) -> Option<HostBytes<'a>> {
        self.host.iter().find(|(r, _)| *r == role).map(|(_, h)| *h)
    }
}

fn layer_host(layer: &ResidentLayer) -> Vec<(TensorRole, HostBytes<'_>)> {
    let mut host = vec![
        (TensorRole::Weights, HostBytes::U8(&layer.weights.bytes)),
        (TensorRole::Scales, HostBytes::U16(&layer.scales.bits)),
    ];
    match &layer.zeros {
        Some(ZeroPoints::Packed(p)) => host.push((TensorRole::Zeros, HostBytes::U32(&p.words))),
        Some(ZeroPoints::UnpackedLegacy(u)) => {
            host.push((TensorRole::Zeros, HostBytes::U16(&u.bits)))
        }
        None => {}
    }
    if let Some(b) = &layer.bias {
        host.push((TensorRole::Bias, HostBytes::U16(b)));
    }
    host
}

/// A kernel-argument buffer laid out as the declaration says (natural alignment,
/// `arg_offsets(decl.args)`), little-endian.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedArgs {
    pub bytes: Vec<u8>,
    pub offsets: Vec<usize>,
}

/// One argument read back from a packed buffer, typed by the declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawArg {
    Pointer(u64),
    I32(i32),
}

impl PackedArgs {
    /// The arguments as typed values, read from `bytes` at `offsets` (what a launch API that
    /// takes one pointer per argument is handed). `None` if the buffer does not fit `decl`.
    pub fn values(&self, decl: &KernelDecl) -> Option<Vec<RawArg>> {
        if self.offsets.len() != decl.args.len() {
            return None;
        }
        decl.args
            .iter()
            .zip(&self.offsets)
            .map(|(a, &off)| {
                let b = self.bytes.get(off..off + a.size())?;
                Some(match a.kind {
                    ArgKind::Pointer { .. } => {
                        RawArg::Pointer(u64::from_le_bytes(b.try_into().ok()?))
                    }
                    ArgKind::I32(_) => RawArg::I32(i32::from_le_bytes(b.try_into().ok()?)),
                })
            })
            .collect()
    }

    /// One pointer per argument into `bytes`: the `kernelParams` form of `cuLaunchKernel` and
    /// `hipModuleLaunchKernel`. Valid while `self` is neither moved nor changed.
    pub fn param_pointers(&mut self) -> Vec<*mut c_void> {
        let base = self.bytes.as_mut_ptr();
        self.offsets
            .iter()
            .map(|&o| base.wrapping_add(o).cast::<c_void>())
            .collect()
    }
}

/// Packs the validated arguments. `base_address(role)` is the device address of the buffer
/// holding that tensor; the view's byte offset is added here. Null arguments pack as 0.
pub fn pack_args(
    decl: &KernelDecl,
    launch: &ValidatedLaunch,
    base_address: &dyn Fn(TensorRole) -> u64,
) -> Result<PackedArgs, ContractError> {
    let mismatch = || ContractError::WrongKernel {
        kernel: decl.id,
        validated: launch.kernel,
    };
    if launch.kernel != decl.id || launch.args.len() != decl.args.len() {
        return Err(mismatch());
    }
    let (offsets, size) = arg_offsets(decl.args);
    let mut bytes = vec![0u8; size];
    for ((a, v), &off) in decl.args.iter().zip(&launch.args).zip(&offsets) {
        match (a.kind, *v) {
            (
                ArgKind::Pointer { role, .. },
                ArgValue::Pointer {
                    role: r,
                    present,
                    byte_offset,
                },
            ) if role == r => {
                let addr = if present {
                    base_address(role) + byte_offset as u64
                } else {
                    0
                };
                bytes[off..off + 8].copy_from_slice(&addr.to_le_bytes());
            }
            (ArgKind::I32(s), ArgValue::I32 { scalar, value }) if s == scalar => {
                bytes[off..off + 4].copy_from_slice(&value.to_le_bytes());
            }
            _ => return Err(mismatch()),
        }
    }
    Ok(PackedArgs { bytes, offsets })
}

#[cfg(test)]
mod le_bytes_tests {
    use super::HostBytes;

    /// What the device reads is each value little-endian, whatever the host's order.
    #[test]
    fn host_values_go_up_little_endian() {
        let u16s = [0x0102u16, 0x0304];
        assert_eq!(&*HostBytes::U16(&u16s).le_bytes(), &[2, 1, 4, 3]);
        let u32s = [0x0102_0304u32];
        assert_eq!(&*HostBytes::U32(&u32s).le_bytes(), &[4, 3, 2, 1]);
        assert_eq!(&*HostBytes::U8(&[7, 9]).le_bytes(), &[7, 9]);
    }
}
