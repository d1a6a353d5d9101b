//! The ISA emulator's sanitizers as a device offers them (`w4a16 run --sanitize
//! racecheck|initcheck` on a gfx target without its GPU): which tool a device was opened with,
//! and the reports its launches made, in the layout of compute-sanitizer's (a headline, then
//! indented lines naming the kernel, thread, block and address) so that the harness reads both
//! with one parser (`w4a16_harness::runner::sanitize`).

/// A sanitizer of the ISA emulator (`w4a16_emu::sanitize`), named as compute-sanitizer's tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EmuSanitizer {
    /// LDS data races between the waves of a workgroup.
    Racecheck,
    /// Loads of LDS or global bytes nothing wrote (inputs uploaded count as written; outputs
    /// filled with poison do not).
    Initcheck,
}

impl EmuSanitizer {
    /// The tool's name, as `--sanitize` takes it.
    pub fn name(self) -> &'static str {
        match self {
            EmuSanitizer::Racecheck => "racecheck",
            EmuSanitizer::Initcheck => "initcheck",
        }
    }
}

impl std::fmt::Display for EmuSanitizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One report of a sanitized launch: the kernel's entry point and the report's lines (the
/// headline first, then the indented detail lines), without compute-sanitizer's `=========`
/// prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanitizerReport {
    pub kernel: String,
    pub lines: Vec<String>,
}
