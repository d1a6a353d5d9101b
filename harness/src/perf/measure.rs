//! Times the selected path of every perf case on the candidate (and control) device.

use serde::{Deserialize, Serialize};

/// How each case is timed: `reps` per-launch samples per side (9–30), after `warmup` launches
/// left queued, rotating through `copies` separately allocated copies of the inputs (cold reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfPlan {
    pub reps: usize,
    pub warmup: usize,
    pub copies: usize,
}

impl Default for PerfPlan {
    fn default() -> Self {
        PerfPlan {
            reps: 15,
            warmup: 5,
            copies: 8,
        }
    }
}
