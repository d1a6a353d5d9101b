//! For unit tests of instruction semantics: a fresh wave and memory, and [`Bench::run_asm`] to
//! run one instruction written as assembly. The coverage table counts an instruction as unit
//! tested when a test passes its mnemonic to `run_asm`, so every per-instruction test goes
//! through it.

use super::{Ctx, Flow, step};
use crate::fault::FaultKind;
use crate::inst::Gen;
use crate::memory::{GlobalMemory, Lds};
use crate::parse::parse_asm;
use crate::wave::Wave;

/// A wave with 256 VGPRs and all 32 lanes on, global memory and 64 KiB of LDS.
pub struct Bench {
    pub generation: Gen,
    pub wave: Wave,
    pub global: GlobalMemory,
    pub lds: Lds,
}

impl Bench {
    pub fn new(generation: Gen) -> Bench {
        Bench {
            generation,
            wave: Wave::new(0, 256, 32, 0),
            global: GlobalMemory::default(),
            lds: Lds::new(64 * 1024),
        }
    }

    /// Parses `asm` and runs it on the wave.
    pub fn run_asm(&mut self, asm: &str) -> Result<Flow, FaultKind> {
        let inst = parse_asm(asm).unwrap_or_else(|e| panic!("test assembly `{asm}`: {e}"));
        let mut ctx = Ctx {
            generation: self.generation,
            global: &mut self.global,
            lds: &mut self.lds,
            sanitizer: None,
        };
        step(&mut self.wave, &inst, &mut ctx)
    }
}
