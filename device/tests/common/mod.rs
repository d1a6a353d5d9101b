//! Layers and launches shared by the launch-validation tests (`validation*.rs`): a valid GEMM
//! launch (M = 2, N = 256, K = 1024, G = 128) to break one rule at a time.

// Each test binary uses a subset.
#![allow(dead_code)]

use w4a16_device::tensor::{LaunchInputs, YSpec};
use w4a16_device::validate::{ContractError, validate};
use w4a16_kernels::KernelId;
use w4a16_kernels::set::decl;
use w4a16_reference::formats::{
    PackedZeroPoints, ResidentLayer, ResidentScales, ResidentWeights, UnpackedZeroPoints,
    ZeroPoints,
};
use w4a16_reference::{ActDtype, Activations, LayerShape};

pub const GEMM_KERNELS: [KernelId; 3] = [KernelId::Skinny, KernelId::Fused, KernelId::Fallback];

/// Layout knobs for a test layer.
#[derive(Clone, Copy)]
pub struct Layout {
    pub asym: bool,
    pub bias: bool,
    /// Extra bytes per weight row.
    pub weight_pad: usize,
    /// Extra elements per scale row.
    pub scale_pad: usize,
}

pub const PLAIN: Layout = Layout {
    asym: false,
    bias: false,
    weight_pad: 0,
    scale_pad: 0,
};
pub const ASYM: Layout = Layout {
    asym: true,
    bias: false,
    weight_pad: 0,
    scale_pad: 0,
};
pub const PADDED: Layout = Layout {
    asym: true,
    bias: true,
    weight_pad: 128,
    scale_pad: 8,
};

pub fn layer(n: usize, k: usize, g: usize, dtype: ActDtype, l: Layout) -> ResidentLayer {
    let groups = k / g;
    let row = k / 2 + l.weight_pad;
    let weights = ResidentWeights {
        n,
        k,
        row_stride_bytes: row,
        bytes: (0..(n - 1) * row + k / 2).map(|i| (i * 7) as u8).collect(),
    };
    let srow = groups + l.scale_pad;
    let scales = ResidentScales {
        n,
        groups,
        row_stride: srow,
        dtype,
        bits: vec![dtype.from_f32(0.5); (n - 1) * srow + groups],
    };
    let zeros = l.asym.then(|| {
        ZeroPoints::Packed(PackedZeroPoints {
            n,
            groups,
            words: vec![0x8888_8888; n.div_ceil(8) * groups],
        })
    });
    let bias = l.bias.then(|| vec![dtype.from_f32(1.0); n]);
    ResidentLayer {
        shape: LayerShape::new(n, k, g),
        dtype,
        weights,
        scales,
        zeros,
        bias,
    }
}

pub fn legacy_zeros(layer: &mut ResidentLayer) {
    let (n, groups, dtype) = (layer.shape.n, layer.shape.groups(), layer.dtype);
    layer.zeros = Some(ZeroPoints::UnpackedLegacy(UnpackedZeroPoints {
        n,
        groups,
        dtype,
        bits: vec![dtype.from_f32(8.0); n * groups],
    }));
}

pub fn x(m: usize, k: usize, dtype: ActDtype) -> Activations {
    Activations {
        m,
        k,
        row_stride: k,
        dtype,
        data: vec![dtype.from_f32(1.0); m * k],
    }
}

/// A valid GEMM launch: M=2, N=256, K=1024, G=128.
pub fn gemm_inputs(dtype: ActDtype, l: Layout) -> LaunchInputs {
    let lay = layer(256, 1024, 128, dtype, l);
    LaunchInputs::gemm(&lay, &x(2, 1024, dtype), &YSpec::dense(2, 256, dtype))
}

pub fn refuse(kernel: KernelId, li: &LaunchInputs) -> ContractError {
    match validate(decl(kernel), li) {
        Ok(v) => panic!("{kernel} accepted a launch it must refuse: {v:?}"),
        Err(e) => e,
    }
}

pub fn assert_msg(e: &ContractError, parts: &[&str]) {
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
    }
}
