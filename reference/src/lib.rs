//! The CPU side of the W4A16 harness: checkpoint formats and their conversion to the resident
//! layout, quantization, seeded data, the f64 reference with per-element bounds, and the
//! second oracle (Freivalds and sampled verification). Pure Rust, no GPU, no unsafe.
#![forbid(unsafe_code)]

pub mod blas;
pub mod bound;
pub mod compare;
pub mod data;
pub mod dtype;
pub mod formats;
pub mod gemm;
pub mod layer;
pub mod moe;
pub mod named;
pub mod offload;
pub mod quantize;
pub mod recipe;
pub mod scratch;
pub mod tricks;
pub mod verify;

pub use dtype::ActDtype;
pub use gemm::WeightRounding;
pub use layer::{Activations, DequantizedWeights, LayerShape, QuantizedLayer};
pub use named::Named;
pub use recipe::{BiasStage, NumericRecipe};
