//! Static gates on code objects, and their exceptions as data (ARCHITECTURE.md rule 5).
//!
//! A gate is a property every build must have: no scratch, no spills, and the fast-path
//! instruction families the field relies on. An exception (in
//! `cases/exceptions/static-gates.toml`) turns one failing gate into an expected failure that
//! is still evaluated: if it starts passing, or the exception's date passes, the suite fails.
//! Exceptions follow the same rule as known-bad cases (one date type, one glob, one
//! strict-xfail rule, all from `w4a16_kernels`). The file is read by the case-file layer
//! (`w4a16_cases::gate_exceptions`), which hands over plain [`GateException`] values: this
//! crate reads code objects, not case files.

use super::KernelInfo;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use w4a16_kernels::glob::Glob;
use w4a16_kernels::xfail::{Date, Mode, Xfail, strict_xfail};
use w4a16_kernels::{KernelId, Target};
use w4a16_reference::ActDtype;

w4a16_reference::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Gate {
        /// No private segment, no dynamic stack, no scratch/buffer instructions.
        NoScratch = "no-scratch",
        /// No VGPR or SGPR spills.
        NoSpill = "no-spill",
        /// fp16 dequant (skinny and dequant f16 entries) uses `v_and_or_b32` on gfx11/gfx12.
        Fp16AndOr = "fp16-v_and_or_b32",
        /// The tile main loop (`fused`, `moe` built on it, and `fused_carrier`, fused's tiles on the
        /// carrier) uses WMMA on gfx11/gfx12.
        FusedWmma = "fused-wmma",
    }
}

impl Gate {
    /// Whether this gate applies to `entry` on `target`.
    pub fn applies(self, target: Target, entry: &str) -> bool {
        let parsed = split_entry(entry);
        let fast_path_target = target.is_gfx11() || target.is_gfx12();
        match self {
            Gate::NoScratch | Gate::NoSpill => true,
            Gate::Fp16AndOr => {
                fast_path_target
                    && matches!(
                        parsed,
                        Some((KernelId::Skinny | KernelId::Dequant, ActDtype::F16, _))
                    )
            }
            Gate::FusedWmma => {
                fast_path_target
                    && matches!(
                        parsed,
                        Some((
                            KernelId::Fused | KernelId::Moe | KernelId::FusedCarrier,
                            _,
                            _
                        ))
                    )
            }
        }
    }
}

/// Splits `w4a16_<kernel>_<dtype>[_<variant>]` ([`KernelId::split_entry`]; kernel names may hold
/// `_`: `moe_align`, `fused_carrier`).
pub fn split_entry(entry: &str) -> Option<(KernelId, ActDtype, Option<&str>)> {
    KernelId::split_entry(entry)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateResult {
    pub target: Target,
    pub entry: String,
    pub gate: Gate,
    pub outcome: Outcome,
}

/// Evaluates every applicable gate on one kernel entry.
pub fn evaluate(
    target: Target,
    kernel: &KernelInfo,
    families: &BTreeMap<&'static str, u32>,
) -> Vec<GateResult> {
    let count = |f: &str| families.get(f).copied().unwrap_or(0);
    Gate::ALL
        .into_iter()
        .filter(|g| g.applies(target, &kernel.name))
        .map(|gate| {
            let mut why = Vec::new();
            match gate {
                Gate::NoScratch => {
                    if kernel.scratch_bytes > 0 {
                        why.push(format!(
                            "{} bytes of scratch per lane",
                            kernel.scratch_bytes
                        ));
                    }
                    if kernel.uses_dynamic_stack {
                        why.push("a dynamic stack".to_owned());
                    }
                    for (f, what) in [
                        ("scratch", "scratch_*"),
                        ("buffer_mem", "buffer load/store"),
                    ] {
                        if count(f) > 0 {
                            why.push(format!("{} {what} instructions", count(f)));
                        }
                    }
                }
                Gate::NoSpill => {
                    if kernel.vgpr_spill_count > 0 {
                        why.push(format!("{} VGPR spills", kernel.vgpr_spill_count));
                    }
                    if kernel.sgpr_spill_count > 0 {
                        why.push(format!("{} SGPR spills", kernel.sgpr_spill_count));
                    }
                }
                Gate::Fp16AndOr => {
                    if count("v_and_or_b32") == 0 {
                        why.push("no v_and_or_b32 (packed fp16 dequant missing)".to_owned());
                    }
                }
                Gate::FusedWmma => {
                    if count("v_wmma") == 0 {
                        why.push("no v_wmma* (matrix cores unused)".to_owned());
                    }
                }
            }
            let outcome = if why.is_empty() {
                Outcome::Pass
            } else {
                Outcome::Fail(why.join(", "))
            };
            GateResult {
                target,
                entry: kernel.name.clone(),
                gate,
                outcome,
            }
        })
        .collect()
}

/// Which entries an exception covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryMatch {
    /// A glob on the entry name (`w4a16_fused_bf16*`).
    Entry(Glob),
    /// Every entry of one kernel.
    Kernel(KernelId),
}

impl fmt::Display for EntryMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryMatch::Entry(g) => write!(f, "entry {g}"),
            EntryMatch::Kernel(k) => write!(f, "kernel {}", k.name()),
        }
    }
}

/// One `[[exception]]` of the gate exceptions file, checked by the case-file layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateException {
    /// The entries it covers.
    pub entries: EntryMatch,
    pub gate: Gate,
    /// Glob over target names (`gfx12*`).
    pub target: Glob,
    pub reason: String,
    /// Issue or ticket that tracks the fix.
    pub tracking: String,
    /// Last day the exception is valid; from the next day the suite fails.
    pub expires: Date,
    pub mode: Mode,
    /// Where it was written, for messages: the file and `exception[2]`.
    pub file: PathBuf,
    pub key: String,
}

impl GateException {
    /// Whether it covers the gate result `r`.
    pub fn covers(&self, r: &GateResult) -> bool {
        self.gate == r.gate
            && self.target.matches(r.target.name())
            && match &self.entries {
                EntryMatch::Entry(g) => g.matches(&r.entry),
                EntryMatch::Kernel(k) => split_entry(&r.entry).is_some_and(|(kk, _, _)| kk == *k),
            }
    }

    pub fn is_expired(&self, today: Date) -> bool {
        today > self.expires
    }

    /// [`strict_xfail`] with this exception's expiry.
    pub fn judge(&self, failed: bool, today: Date) -> Xfail {
        strict_xfail(self.mode, failed, self.expires, today)
    }
}

/// The exceptions file, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptionSet {
    pub file: PathBuf,
    pub exceptions: Vec<GateException>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// Failed as an exception says it would.
    ExpectedFail {
        exception: usize,
    },
    /// Passed although an exception says it fails: the exception is stale.
    UnexpectedPass {
        exception: usize,
    },
    /// Covered by an exception whose date has passed: fails whatever the gate did.
    Expired {
        exception: usize,
    },
}

#[derive(Clone, Debug)]
pub struct Judged {
    pub result: GateResult,
    pub verdict: Verdict,
}

/// Gate results with exceptions applied. `problems` empty means the suite passes.
#[derive(Clone, Debug)]
pub struct GateReport {
    pub rows: Vec<Judged>,
    pub problems: Vec<String>,
}

impl GateReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn count(&self, pred: impl Fn(&Verdict) -> bool) -> usize {
        self.rows.iter().filter(|r| pred(&r.verdict)).count()
    }
}

/// Applies exceptions to gate results by the one strict-xfail rule ([`strict_xfail`]) that
/// known-bad cases follow too. `evaluated` lists the
/// targets that were built, so an exception for a target not built this run is not reported as
/// matching nothing.
pub fn judge(
    results: Vec<GateResult>,
    set: &ExceptionSet,
    today: Date,
    evaluated: &[Target],
) -> GateReport {
    let file = set.file.display();
    let mut problems = Vec::new();
    let mut used = vec![false; set.exceptions.len()];
    for (i, e) in set.exceptions.iter().enumerate() {
        if e.is_expired(today) {
            problems.push(format!(
                "{file}: {} ({} on {} for {}) expired on {}: fix the kernel or renew the exception ({})",
                e.key, e.gate, e.target, e.entries, e.expires, e.tracking
            ));
            used[i] = true;
        }
    }
    let rows = results
        .into_iter()
        .map(|r| {
            let exc = set.exceptions.iter().position(|e| e.covers(&r));
            let verdict = match (exc, &r.outcome) {
                (None, Outcome::Pass) => Verdict::Pass,
                (None, Outcome::Fail(why)) => {
                    problems.push(format!("gate {} failed for {} on {}: {why}", r.gate, r.entry, r.target));
                    Verdict::Fail
                }
                (Some(i), outcome) => {
                    used[i] = true;
                    let e = &set.exceptions[i];
                    match (e.judge(matches!(outcome, Outcome::Fail(_)), today), outcome) {
                        (Xfail::Caught, _) => Verdict::ExpectedFail { exception: i },
                        (Xfail::UnexpectedPass, _) => {
                            problems.push(format!(
                                "gate {} now passes for {} on {}, but {file}: {} expects it to fail: remove the stale exception",
                                r.gate, r.entry, r.target, e.key
                            ));
                            Verdict::UnexpectedPass { exception: i }
                        }
                        (Xfail::Expired, Outcome::Fail(why)) => {
                            problems.push(format!(
                                "gate {} failed for {} on {}: {why} (its exception {} expired on {})",
                                r.gate, r.entry, r.target, e.key, e.expires
                            ));
                            Verdict::Expired { exception: i }
                        }
                        (Xfail::Expired, Outcome::Pass) => {
                            problems.push(format!(
                                "gate {} now passes for {} on {}, and {file}: {} expired on {}: remove the stale exception",
                                r.gate, r.entry, r.target, e.key, e.expires
                            ));
                            Verdict::Expired { exception: i }
                        }
                    }
                }
            };
            Judged { result: r, verdict }
        })
        .collect();
    for (i, e) in set.exceptions.iter().enumerate() {
        if !used[i] && evaluated.iter().any(|t| e.target.matches(t.name())) {
            problems.push(format!(
                "{file}: {} (gate {}, target {}, {}) matches no gate result: remove or fix it",
                e.key, e.gate, e.target, e.entries
            ));
        }
    }
    GateReport { rows, problems }
}

impl fmt::Display for GateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.rows {
            let tag = match &r.verdict {
                Verdict::Pass => continue,
                Verdict::Fail => "FAIL",
                Verdict::ExpectedFail { .. } => "XFAIL",
                Verdict::UnexpectedPass { .. } => "XPASS",
                Verdict::Expired { .. } => "EXPIRED",
            };
            let why = match &r.result.outcome {
                Outcome::Pass => String::new(),
                Outcome::Fail(w) => format!(": {w}"),
            };
            writeln!(
                f,
                "{tag} {} {} {}{why}",
                r.result.target, r.result.entry, r.result.gate
            )?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str) -> KernelInfo {
        KernelInfo {
            name: name.into(),
            symbol: format!("{name}.kd"),
            vgpr_count: 64,
            sgpr_count: 30,
            agpr_count: None,
            vgpr_spill_count: 0,
            sgpr_spill_count: 0,
            lds_bytes: 0,
            scratch_bytes: 0,
            uses_dynamic_stack: false,
            wavefront_size: 32,
            max_flat_workgroup_size: 256,
            kernarg_segment_size: 64,
            args: vec![],
            hidden_args: vec![],
        }
    }

    fn fams(pairs: &[(&'static str, u32)]) -> BTreeMap<&'static str, u32> {
        pairs.iter().copied().collect()
    }

    fn date(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    #[test]
    fn entries_split_into_kernel_dtype_variant() {
        assert_eq!(
            split_entry("w4a16_skinny_f16"),
            Some((KernelId::Skinny, ActDtype::F16, None))
        );
        assert_eq!(
            split_entry("w4a16_fused_bf16_64x64x32w4"),
            Some((KernelId::Fused, ActDtype::Bf16, Some("64x64x32w4")))
        );
        assert_eq!(
            split_entry("w4a16_moe_align_bf16"),
            Some((KernelId::MoeAlign, ActDtype::Bf16, None))
        );
        assert_eq!(
            split_entry("w4a16_moe_f16_16x64x32w4"),
            Some((KernelId::Moe, ActDtype::F16, Some("16x64x32w4")))
        );
        assert_eq!(
            split_entry("w4a16_fused_carrier_f16_16x64x32w4"),
            Some((KernelId::FusedCarrier, ActDtype::F16, Some("16x64x32w4")))
        );
        assert_eq!(split_entry("w4a16_moe_align"), None);
        assert_eq!(split_entry("w4a16_probe_f16"), None);
        assert_eq!(split_entry("w4a16_skinny_f32"), None);
    }

    #[test]
    fn gates_apply_by_entry_and_target() {
        assert!(Gate::Fp16AndOr.applies(Target::Gfx1151, "w4a16_skinny_f16"));
        assert!(Gate::Fp16AndOr.applies(Target::Gfx1201, "w4a16_dequant_f16"));
        assert!(!Gate::Fp16AndOr.applies(Target::Gfx1151, "w4a16_skinny_bf16"));
        assert!(!Gate::Fp16AndOr.applies(Target::Gfx942, "w4a16_skinny_f16"));
        assert!(!Gate::Fp16AndOr.applies(Target::Gfx1100, "w4a16_fallback_f16"));
        assert!(Gate::FusedWmma.applies(Target::Gfx1100, "w4a16_fused_bf16_64x64x32w4"));
        assert!(!Gate::FusedWmma.applies(Target::Gfx942, "w4a16_fused_bf16"));
        assert!(Gate::FusedWmma.applies(Target::Gfx1201, "w4a16_moe_f16_64x128x32w8"));
        assert!(!Gate::FusedWmma.applies(Target::Gfx1201, "w4a16_moe_align_f16"));
        assert!(Gate::NoScratch.applies(Target::Gfx942, "anything"));
    }

    #[test]
    fn gate_failures_say_why() {
        let mut k = kernel("w4a16_fused_f16");
        k.scratch_bytes = 16;
        k.vgpr_spill_count = 3;
        let res = evaluate(Target::Gfx1151, &k, &fams(&[("scratch", 2), ("v_wmma", 0)]));
        let get = |g| res.iter().find(|r| r.gate == g).unwrap().outcome.clone();
        assert_eq!(
            get(Gate::NoScratch),
            Outcome::Fail("16 bytes of scratch per lane, 2 scratch_* instructions".into())
        );
        assert_eq!(get(Gate::NoSpill), Outcome::Fail("3 VGPR spills".into()));
        assert!(matches!(get(Gate::FusedWmma), Outcome::Fail(w) if w.contains("v_wmma")));
        let ok = evaluate(
            Target::Gfx1151,
            &kernel("w4a16_fused_f16"),
            &fams(&[("v_wmma", 8)]),
        );
        assert!(ok.iter().all(|r| r.outcome == Outcome::Pass), "{ok:?}");
        assert_eq!(ok.len(), 3);
    }

    /// What `cases/exceptions/static-gates.toml` would say for gfx12's fused WMMA.
    fn set() -> ExceptionSet {
        ExceptionSet {
            file: "static-gates.toml".into(),
            exceptions: vec![GateException {
                entries: EntryMatch::Kernel(KernelId::Fused),
                gate: Gate::FusedWmma,
                target: Glob::new("gfx12*"),
                reason: "gfx12 WMMA layout not done".into(),
                tracking: "issue 4".into(),
                expires: date("2030-01-01"),
                mode: Mode::XfailStrict,
                file: "static-gates.toml".into(),
                key: "exception[0]".into(),
            }],
        }
    }

    fn no_exceptions() -> ExceptionSet {
        ExceptionSet {
            file: "static-gates.toml".into(),
            exceptions: vec![],
        }
    }

    #[test]
    fn exceptions_cover_their_gate_target_and_entries() {
        let e = &set().exceptions[0];
        assert!(e.covers(&fail(Target::Gfx1201, "w4a16_fused_f16", Gate::FusedWmma)));
        assert!(!e.covers(&fail(Target::Gfx1201, "w4a16_fused_f16", Gate::NoSpill)));
        assert!(!e.covers(&fail(Target::Gfx1151, "w4a16_fused_f16", Gate::FusedWmma)));
        assert!(!e.covers(&fail(Target::Gfx1201, "w4a16_moe_f16", Gate::FusedWmma)));
        let by_entry = GateException {
            entries: EntryMatch::Entry(Glob::new("w4a16_moe_*")),
            ..e.clone()
        };
        assert!(by_entry.covers(&fail(Target::Gfx1201, "w4a16_moe_f16", Gate::FusedWmma)));
        assert!(!by_entry.covers(&fail(Target::Gfx1201, "w4a16_fused_f16", Gate::FusedWmma)));
        assert_eq!(e.judge(true, date("2030-01-01")), Xfail::Caught);
        assert_eq!(e.judge(true, date("2030-01-02")), Xfail::Expired);
    }

    fn fail(t: Target, entry: &str, gate: Gate) -> GateResult {
        GateResult {
            target: t,
            entry: entry.into(),
            gate,
            outcome: Outcome::Fail("no v_wmma*".into()),
        }
    }
    fn pass(t: Target, entry: &str, gate: Gate) -> GateResult {
        GateResult {
            target: t,
            entry: entry.into(),
            gate,
            outcome: Outcome::Pass,
        }
    }

    #[test]
    fn exception_turns_failure_into_expected_failure() {
        let s = set();
        let today = date("2026-01-01");
        let targets = [Target::Gfx1151, Target::Gfx1201];
        let r = judge(
            vec![
                fail(Target::Gfx1201, "w4a16_fused_f16", Gate::FusedWmma),
                pass(Target::Gfx1151, "w4a16_fused_f16", Gate::FusedWmma),
            ],
            &s,
            today,
            &targets,
        );
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.rows[0].verdict, Verdict::ExpectedFail { exception: 0 });
        assert!(
            r.to_string()
                .contains("XFAIL gfx1201 w4a16_fused_f16 fused-wmma")
        );
        // Without the exception the same failure fails the suite.
        let r = judge(
            vec![fail(Target::Gfx1201, "w4a16_fused_f16", Gate::FusedWmma)],
            &no_exceptions(),
            today,
            &targets,
        );
        assert_eq!(
            r.problems,
            vec!["gate fused-wmma failed for w4a16_fused_f16 on gfx1201: no v_wmma*".to_string()]
        );
    }

    #[test]
    fn stale_expired_and_unmatched_exceptions_fail() {
        let s = set();
        let targets = [Target::Gfx1201];
        // Stale: the gate passes now.
        let r = judge(
            vec![pass(Target::Gfx1201, "w4a16_fused_bf16", Gate::FusedWmma)],
            &s,
            date("2026-01-01"),
            &targets,
        );
        assert_eq!(r.rows[0].verdict, Verdict::UnexpectedPass { exception: 0 });
        assert!(r.problems[0].contains("remove the stale exception"), "{r}");
        // Expired: the failure counts again and the expiry is reported.
        let r = judge(
            vec![fail(Target::Gfx1201, "w4a16_fused_bf16", Gate::FusedWmma)],
            &s,
            date("2030-01-02"),
            &targets,
        );
        assert_eq!(r.rows[0].verdict, Verdict::Expired { exception: 0 });
        assert_eq!(r.problems.len(), 2, "{r}");
        assert!(r.problems[0].contains("expired on 2030-01-01"));
        assert!(
            r.to_string()
                .contains("EXPIRED gfx1201 w4a16_fused_bf16 fused-wmma")
        );
        // Expired and passing: still a failure, naming both.
        let r = judge(
            vec![pass(Target::Gfx1201, "w4a16_fused_bf16", Gate::FusedWmma)],
            &s,
            date("2030-01-02"),
            &targets,
        );
        assert_eq!(r.rows[0].verdict, Verdict::Expired { exception: 0 });
        assert_eq!(r.problems.len(), 2, "{r}");
        assert!(r.problems[1].contains("now passes"), "{r}");
        // Unmatched on a target that was built: a typo must not linger.
        let r = judge(
            vec![pass(Target::Gfx1201, "w4a16_skinny_f16", Gate::NoSpill)],
            &s,
            date("2026-01-01"),
            &targets,
        );
        assert!(r.problems[0].contains("matches no gate result"), "{r}");
        // ... but an exception for a target not built this run is not judged.
        let r = judge(vec![], &s, date("2026-01-01"), &[Target::Gfx1100]);
        assert!(r.is_ok(), "{r}");
    }
}
