//! Loud skips (ARCHITECTURE.md rule 4), declared in the `w4a16-require` crate so that the kernels
//! crate's tests share them; re-exported here where the harness and its tests have always
//! found them.

pub use w4a16_require::*;
