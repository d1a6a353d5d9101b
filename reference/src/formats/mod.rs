//! Checkpoint formats going in (SPEC §3) and the resident layout every kernel reads (SPEC §2).

pub mod resident;

pub use resident::{
    PackedZeroPoints, ResidentLayer, ResidentScales, ResidentWeights, UnpackedZeroPoints,
    ZeroPoints,
};
