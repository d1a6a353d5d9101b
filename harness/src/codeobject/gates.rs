//! Static gates on code objects, and their exceptions as data (DESIGN rule 5).
//!
//! A gate is a property every build must have: no scratch, no spills, and the fast-path
//! instruction families the field relies on. An exception (in
//! `cases/exceptions/static-gates.toml`) turns one failing gate into an expected failure that
//! is still evaluated: if it starts passing, or the exception's date passes, the suite fails.

use super::KernelInfo;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use w4a16_kernels::{KernelId, Target};
use w4a16_reference::ActDtype;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gate {
    /// No private segment, no dynamic stack, no scratch/buffer instructions.
    NoScratch,
    /// No VGPR or SGPR spills.
    NoSpill,
    /// fp16 dequant (skinny and dequant f16 entries) uses `v_and_or_b32` on gfx11/gfx12.
    Fp16AndOr,
    /// The tile main loop (`fused`, `moe` built on it, and `fused_carrier`, fused's tiles on the
    /// carrier) uses WMMA on gfx11/gfx12.
    FusedWmma,
}

impl Gate {
    pub const ALL: [Gate; 4] = [
        Gate::NoScratch,
        Gate::NoSpill,
        Gate::Fp16AndOr,
        Gate::FusedWmma,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Gate::NoScratch => "no-scratch",
            Gate::NoSpill => "no-spill",
            Gate::Fp16AndOr => "fp16-v_and_or_b32",
            Gate::FusedWmma => "fused-wmma",
        }
    }

    pub fn parse(s: &str) -> Option<Gate> {
        Gate::ALL.into_iter().find(|g| g.name() == s)
    }

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

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

/// A calendar date (the exception expiry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl Date {
    /// Today in UTC.
    pub fn today() -> Date {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Date::from_days_since_epoch((secs / 86_400) as i64)
    }

    /// Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    pub fn from_days_since_epoch(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
        Date { year, month, day }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// `*` matches any run of characters, `?` one character; everything else literally.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Which entries an exception covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryMatch {
    /// A glob on the entry name (`w4a16_fused_bf16*`).
    Entry(String),
    /// Every entry of one kernel.
    Kernel(KernelId),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exception {
    /// `exception[<index>]`, for messages.
    pub key: String,
    /// Glob on the target name (`gfx12*`).
    pub target: String,
    pub entries: EntryMatch,
    pub gate: Gate,
    pub reason: String,
    pub tracking: String,
    pub expires: Date,
}

impl Exception {
    pub fn covers(&self, r: &GateResult) -> bool {
        self.gate == r.gate
            && glob_match(&self.target, r.target.name())
            && match &self.entries {
                EntryMatch::Entry(g) => glob_match(g, &r.entry),
                EntryMatch::Kernel(k) => split_entry(&r.entry).is_some_and(|(kk, _, _)| kk == *k),
            }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}: {key}: {message}", file.display())]
pub struct ExceptionError {
    pub file: PathBuf,
    pub key: String,
    pub message: String,
}

/// The parsed exceptions file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptionSet {
    pub file: PathBuf,
    pub exceptions: Vec<Exception>,
}

/// The repository's static-gate exceptions file.
pub fn default_exceptions_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases/exceptions/static-gates.toml")
}

impl ExceptionSet {
    pub fn load(path: &Path) -> Result<ExceptionSet, ExceptionError> {
        let text = std::fs::read_to_string(path).map_err(|e| ExceptionError {
            file: path.to_path_buf(),
            key: "(file)".into(),
            message: e.to_string(),
        })?;
        ExceptionSet::parse(&text, path)
    }

    pub fn parse(text: &str, file: &Path) -> Result<ExceptionSet, ExceptionError> {
        let err = |key: String, message: String| ExceptionError {
            file: file.to_path_buf(),
            key,
            message,
        };
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| err("(syntax)".into(), e.to_string()))?;
        for k in root.keys() {
            if k != "exception" {
                return Err(err(
                    k.clone(),
                    "unknown top-level key; expected [[exception]] tables".into(),
                ));
            }
        }
        let list = match root.get("exception") {
            None => {
                return Ok(ExceptionSet {
                    file: file.to_path_buf(),
                    exceptions: Vec::new(),
                });
            }
            Some(toml::Value::Array(a)) => a,
            Some(_) => {
                return Err(err(
                    "exception".into(),
                    "expected an array of tables ([[exception]])".into(),
                ));
            }
        };
        let mut exceptions = Vec::new();
        for (i, v) in list.iter().enumerate() {
            let key = format!("exception[{i}]");
            let toml::Value::Table(t) = v else {
                return Err(err(key, "expected a table".into()));
            };
            const KEYS: [&str; 7] = [
                "target", "entry", "kernel", "gate", "reason", "tracking", "expires",
            ];
            if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(err(
                    format!("{key}.{k}"),
                    format!("unknown key; expected one of {}", KEYS.join(", ")),
                ));
            }
            let string = |name: &str| -> Result<String, ExceptionError> {
                match t.get(name) {
                    Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
                    Some(toml::Value::String(_)) => {
                        Err(err(format!("{key}.{name}"), "must not be empty".into()))
                    }
                    Some(other) => Err(err(
                        format!("{key}.{name}"),
                        format!("expected a string, got {}", other.type_str()),
                    )),
                    None => Err(err(format!("{key}.{name}"), "missing".into())),
                }
            };
            let target = string("target")?;
            let entries = match (t.contains_key("entry"), t.contains_key("kernel")) {
                (true, false) => EntryMatch::Entry(string("entry")?),
                (false, true) => {
                    let k = string("kernel")?;
                    EntryMatch::Kernel(KernelId::parse(&k).ok_or_else(|| {
                        err(
                            format!("{key}.kernel"),
                            format!(
                                "unknown kernel {k:?}; expected one of {}",
                                KernelId::ALL.map(|k| k.name()).join(", ")
                            ),
                        )
                    })?)
                }
                _ => {
                    return Err(err(
                        key,
                        "needs exactly one of `entry` (a glob) or `kernel`".into(),
                    ));
                }
            };
            let gate_name = string("gate")?;
            let gate = Gate::parse(&gate_name).ok_or_else(|| {
                err(
                    format!("{key}.gate"),
                    format!(
                        "unknown gate {gate_name:?}; expected one of {}",
                        Gate::ALL.map(|g| g.name()).join(", ")
                    ),
                )
            })?;
            let expires = match t.get("expires") {
                Some(toml::Value::Datetime(dt)) => match (dt.date, dt.time) {
                    (Some(d), None) => Date {
                        year: d.year,
                        month: d.month,
                        day: d.day,
                    },
                    _ => {
                        return Err(err(
                            format!("{key}.expires"),
                            format!("expected a date (YYYY-MM-DD), got {dt}"),
                        ));
                    }
                },
                Some(other) => {
                    return Err(err(
                        format!("{key}.expires"),
                        format!(
                            "expected a date (YYYY-MM-DD, unquoted), got {}",
                            other.type_str()
                        ),
                    ));
                }
                None => return Err(err(format!("{key}.expires"), "missing".into())),
            };
            exceptions.push(Exception {
                target,
                entries,
                gate,
                reason: string("reason")?,
                tracking: string("tracking")?,
                expires,
                key,
            });
        }
        Ok(ExceptionSet {
            file: file.to_path_buf(),
            exceptions,
        })
    }
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

/// Applies exceptions to gate results. `evaluated` lists the targets that were built, so an
/// exception for a target not built this run is not reported as matching nothing.
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
        if e.expires < today {
            problems.push(format!(
                "{file}: {} ({} on {} for {:?}) expired on {}: fix the kernel or renew the exception ({})",
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
                    match outcome {
                        Outcome::Fail(why) if e.expires < today => {
                            problems.push(format!(
                                "gate {} failed for {} on {}: {why} (its exception {} expired on {})",
                                r.gate, r.entry, r.target, e.key, e.expires
                            ));
                            Verdict::Fail
                        }
                        Outcome::Fail(_) => Verdict::ExpectedFail { exception: i },
                        Outcome::Pass => {
                            problems.push(format!(
                                "gate {} now passes for {} on {}, but {file}: {} expects it to fail: remove the stale exception",
                                r.gate, r.entry, r.target, e.key
                            ));
                            Verdict::UnexpectedPass { exception: i }
                        }
                    }
                }
            };
            Judged { result: r, verdict }
        })
        .collect();
    for (i, e) in set.exceptions.iter().enumerate() {
        if !used[i] && evaluated.iter().any(|t| glob_match(&e.target, t.name())) {
            problems.push(format!(
                "{file}: {} (gate {}, target {}, {:?}) matches no gate result: remove or fix it",
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
        let p: Vec<u16> = s.split('-').map(|x| x.parse().unwrap()).collect();
        Date {
            year: p[0],
            month: p[1] as u8,
            day: p[2] as u8,
        }
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

    #[test]
    fn globs() {
        assert!(glob_match("gfx11*", "gfx1151"));
        assert!(glob_match("gfx1?01", "gfx1201"));
        assert!(glob_match("*", "gfx1100"));
        assert!(glob_match("w4a16_*_f16*", "w4a16_fused_f16_64x64x32w4"));
        assert!(!glob_match("gfx11*", "gfx1201"));
        assert!(!glob_match("gfx1100", "gfx11000"));
    }

    #[test]
    fn civil_dates() {
        assert_eq!(Date::from_days_since_epoch(0), date("1970-01-01"));
        assert_eq!(Date::from_days_since_epoch(19_782), date("2024-02-29"));
        assert_eq!(
            Date::from_days_since_epoch(20_000).to_string(),
            "2024-10-04"
        );
        assert!(date("2025-01-31") < date("2025-02-01"));
    }

    const FILE: &str = r#"
[[exception]]
target = "gfx12*"
kernel = "fused"
gate = "fused-wmma"
reason = "gfx12 WMMA layout not done"
tracking = "issue 4"
expires = 2030-01-01
"#;

    fn set(text: &str) -> ExceptionSet {
        ExceptionSet::parse(text, Path::new("static-gates.toml")).unwrap()
    }

    #[test]
    fn exception_file_errors_name_file_and_key() {
        let parse = |t: &str| {
            ExceptionSet::parse(t, Path::new("x.toml"))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            parse(&FILE.replace("fused-wmma", "fused-mma")),
            "x.toml: exception[0].gate: unknown gate \"fused-mma\"; expected one of no-scratch, no-spill, fp16-v_and_or_b32, fused-wmma"
        );
        assert_eq!(
            parse(&FILE.replace("2030-01-01", "\"2030-01-01\"")),
            "x.toml: exception[0].expires: expected a date (YYYY-MM-DD, unquoted), got string"
        );
        assert_eq!(
            parse(&FILE.replace("reason = \"gfx12 WMMA layout not done\"\n", "")),
            "x.toml: exception[0].reason: missing"
        );
        assert_eq!(
            parse(&FILE.replace(
                "kernel = \"fused\"",
                "kernel = \"fused\"\nentry = \"w4a16_fused_*\""
            )),
            "x.toml: exception[0]: needs exactly one of `entry` (a glob) or `kernel`"
        );
        assert!(
            parse(&FILE.replace("tracking", "trackin"))
                .starts_with("x.toml: exception[0].trackin: unknown key")
        );
        assert!(parse("[[exception]\n").starts_with("x.toml: (syntax): "));
        assert_eq!(set("").exceptions.len(), 0);
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
        let s = set(FILE);
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
            &set(""),
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
        let s = set(FILE);
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
        assert_eq!(r.rows[0].verdict, Verdict::Fail);
        assert_eq!(r.problems.len(), 2, "{r}");
        assert!(r.problems[0].contains("expired on 2030-01-01"));
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
