//! The peers timed on the same cases with the same cold-input method (torch's int4 kernel and
//! dense fp16), so that every table has them side by side.

use serde::{Deserialize, Serialize};

/// Medians of one case's peers; a peer that could not run is named in `skipped` with why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerTimes {
    pub torch_int4_us: Option<f64>,
    pub dense_fp16_us: Option<f64>,
    pub skipped: Vec<String>,
}
