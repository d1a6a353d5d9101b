//! A small MoE layer for the CPU tests (the validation below, the simulated device's launch
//! path): T = 3 tokens, top_k = 2 over E = 4 experts, N = 16, K = 64, G = 32, fp16, asymmetric,
//! tile 16x64x32w4, slots per expert {0, 5}, {2}, {1, 3}, {4}.

use super::*;
use w4a16_reference::Activations;

pub(crate) const T: usize = 3;
pub(crate) const TOP_K: usize = 2;
pub(crate) const E: usize = 4;
pub(crate) const N: usize = 16;
pub(crate) const K: usize = 64;
pub(crate) const G: usize = 32;

pub(crate) struct Layer {
    pub(crate) x: Activations,
    pub(crate) weights: Vec<u32>,
    pub(crate) scales: Vec<u16>,
    pub(crate) zeros: Vec<u32>,
    pub(crate) ids: Vec<i32>,
    pub(crate) routed: Vec<f32>,
    /// Every other expert local (0 → 0, 2 → 1).
    pub(crate) map: Vec<i32>,
}

impl Layer {
    pub(crate) fn new() -> Layer {
        let one = ActDtype::F16.from_f32(1.0);
        Layer {
            x: Activations {
                m: T,
                k: K,
                row_stride: K,
                dtype: ActDtype::F16,
                data: vec![one; T * K],
            },
            weights: (0..(E * N * K / 8) as u32).collect(),
            scales: vec![one; E * N * (K / G)],
            zeros: vec![0x8888_8888; E * (N / 8) * (K / G)],
            ids: vec![0, 2, 1, 2, 3, 0],
            routed: vec![0.5; T * TOP_K],
            map: vec![0, -1, 1, -1],
        }
    }

    /// Every expert local, no map, routed weights applied.
    pub(crate) fn launch(&self) -> MoeLaunch<'_> {
        MoeLaunch {
            x: XBuffer::as_laid_out(&self.x),
            weights: &self.weights,
            scales: &self.scales,
            zeros: Some(&self.zeros),
            w_row_stride_bytes: K / 2,
            scale_row_stride: K / G,
            topk_ids: &self.ids,
            topk_weights: Some(&self.routed),
            expert_map: None,
            tokens: T,
            top_k: TOP_K,
            experts: E,
            experts_local: E,
            n: N,
            k: K,
            group: G,
            dtype: ActDtype::F16,
            tile: w4a16_kernels::tiles::MOE_TILE_16X64W4,
            c_placement: None,
        }
    }

    /// Experts 1 and 3 held elsewhere: the stacked tensors hold the first two experts only.
    pub(crate) fn mapped(&self) -> MoeLaunch<'_> {
        let half = |len: usize| len / 2;
        MoeLaunch {
            weights: &self.weights[..half(self.weights.len())],
            scales: &self.scales[..half(self.scales.len())],
            zeros: Some(&self.zeros[..half(self.zeros.len())]),
            expert_map: Some(&self.map),
            experts_local: 2,
            ..self.launch()
        }
    }
}
