//! Loud skips (ARCHITECTURE.md rule 4): a check that cannot run here says why, and
//! `W4A16_REQUIRE=gpu,amd-toolchain,nvrtc` turns that skip into a failure.
//!
//! # Tests of one backend, and what `gpu` demands of them
//!
//! A GPU test has one case per backend (`…_cuda`, `…_rocm`), each opening its own device. A
//! machine has one vendor's GPU, so the other vendor's cases skip on every GPU job, and `gpu`
//! cannot mean "every backend opened". [`backend_skip_or_fail`] judges such a skip:
//!
//! - `cuda` / `rocm` in `W4A16_REQUIRE` demand that backend: its skip fails.
//! - `gpu` demands this machine's GPU, whichever vendor's: a backend's skip fails when no other
//!   GPU backend opened here either. So on the H200 job (`W4A16_REQUIRE=gpu`) a `_cuda` case
//!   whose device does not open (driver, NVRTC, context) fails, as no ROCm device opens there,
//!   while the `_rocm` cases skip loudly because CUDA did open; the AMD runner mirrors it. A
//!   machine whose only GPU has a broken driver opens nothing and fails every case. What `gpu`
//!   alone cannot catch is a machine with both vendors' GPUs and one broken: name the vendor.
//! - The skip's own requirement (say `nvrtc`), demanded, fails as in [`skip_or_fail`].
//!
//! The rule is kept here, pure ([`backend_skip_failure`]), and the caller says whether another
//! backend opened (only asked when `gpu` is demanded and the answer matters): this crate sits
//! below the devices and cannot open one. A backend that is not a GPU (an ISA emulator) is no
//! "other backend": it opens everywhere and would make `gpu` demand nothing.
//!
//! Its own crate, below `kernels` and `harness`, so that every test binary of the workspace
//! (the kernels crate's included, which cannot depend on the harness) prints skips one way
//! and reads `W4A16_REQUIRE` one way.
//!
//! # Why skips are written with `std::io::stderr()` and summarised from `atexit`
//!
//! libtest has no runtime skip: a test that skips part of its body still reports `ok`. And
//! libtest's output capture (on unless `--nocapture`/`--show-output`) swallows what a passing
//! test prints with `eprintln!`, so a plain `cargo test` showed passing tests and no skip.
//!
//! The capture is a thread-local sink that only the `print!`/`eprint!` macros (and panic
//! messages) consult; a write through the [`std::io::stderr`] handle goes straight to file
//! descriptor 2, past the capture, on every platform and on stable Rust. So each skipped part
//! writes its line through the handle ([`announce_skip`]). `tests/visible.rs` runs a test
//! binary with capture on in a subprocess and asserts the lines reach its stderr, so a libtest
//! that started capturing handles too would fail there rather than hide skips again.
//!
//! The per-binary summary needs a hook at process end: statics are never dropped, and a
//! thread-local's destructor does not run for the main thread at exit. `atexit` (C, in every
//! libc and the Windows CRT) runs both when libtest's `main` returns and when it calls
//! `process::exit` after a failure; it is registered on the first skip, so a binary that
//! skipped nothing prints nothing. Lines are written as they happen (not only at exit) so a
//! binary that aborts still shows what it skipped before.

use std::fmt;
use std::io::Write;
use std::sync::{Mutex, Once, PoisonError};

/// Something a check needs from the machine it runs on.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Requirement {
    /// A usable GPU of this machine's vendor (CUDA or ROCm device); for a test of one backend,
    /// see the crate docs.
    Gpu,
    /// The CUDA backend: an NVIDIA GPU, its driver, and NVRTC to build the kernels.
    Cuda,
    /// The ROCm backend (cargo feature `rocm`): an AMD GPU and the HIP runtime.
    Rocm,
    /// clang-19 (or ROCm clang) with the HIP headers and AMD device bitcode.
    AmdToolchain,
    /// NVRTC and the CUDA headers (PyPI wheels or a toolkit).
    Nvrtc,
}

impl Requirement {
    pub const ALL: [Requirement; 5] = [
        Requirement::Gpu,
        Requirement::Cuda,
        Requirement::Rocm,
        Requirement::AmdToolchain,
        Requirement::Nvrtc,
    ];

    /// What `W4A16_REQUIRE=all` names: every requirement one machine can meet. Not `cuda` and
    /// `rocm` together (no runner has both vendors' GPUs); `gpu` stands for this machine's.
    pub const ALL_ON_ONE_MACHINE: [Requirement; 3] = [
        Requirement::Gpu,
        Requirement::AmdToolchain,
        Requirement::Nvrtc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Requirement::Gpu => "gpu",
            Requirement::Cuda => "cuda",
            Requirement::Rocm => "rocm",
            Requirement::AmdToolchain => "amd-toolchain",
            Requirement::Nvrtc => "nvrtc",
        }
    }

    /// Whether `W4A16_REQUIRE` names this requirement (comma separated; `all` names every one).
    pub fn is_required(self) -> bool {
        required_from(std::env::var("W4A16_REQUIRE").ok().as_deref()).contains(&self)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a `W4A16_REQUIRE` value (`all`: [`Requirement::ALL_ON_ONE_MACHINE`]). Unknown names
/// are kept out (and reported by `check_env`).
pub fn required_from(value: Option<&str>) -> Vec<Requirement> {
    let Some(v) = value else { return Vec::new() };
    let mut out = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part == "all" {
            return Requirement::ALL_ON_ONE_MACHINE.to_vec();
        }
        if let Some(r) = Requirement::ALL.into_iter().find(|r| r.name() == part) {
            out.push(r);
        }
    }
    out
}

/// Names in `W4A16_REQUIRE` that mean nothing (a typo must not silently require nothing).
pub fn unknown_required(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| {
            !p.is_empty() && *p != "all" && !Requirement::ALL.iter().any(|r| r.name() == *p)
        })
        .map(str::to_owned)
        .collect()
}

/// A check that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skip {
    pub requirement: Requirement,
    pub reason: String,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skipped (needs {}): {}", self.requirement, self.reason)
    }
}

/// For tests: a loud skip line past the capture ([`announce_skip`]), or a panic when
/// `W4A16_REQUIRE` demands the requirement (then nothing is announced: the test fails).
pub fn skip_or_fail(skip: &Skip) {
    if skip.requirement.is_required() {
        panic!("W4A16_REQUIRE={} but {}", skip.requirement, skip);
    }
    announce_skip(skip.requirement.name(), &skip.reason);
}

/// For a test of one backend (`backend` is [`Requirement::Cuda`] or [`Requirement::Rocm`]) that
/// could not run it: a loud skip `W4A16-SKIP [cuda] …`, or a panic under the rule in the crate
/// docs. `another_backend_opened` is asked only when `gpu` is demanded.
pub fn backend_skip_or_fail(
    backend: Requirement,
    skip: &Skip,
    another_backend_opened: impl FnOnce() -> bool,
) {
    let required = required_from(std::env::var("W4A16_REQUIRE").ok().as_deref());
    if let Some(why) = backend_skip_failure(&required, backend, skip, another_backend_opened) {
        panic!("{why}");
    }
    announce_skip(backend.name(), &announced_reason(skip));
}

/// The failure message when `required` turns this backend's skip into a failure (crate docs).
pub fn backend_skip_failure(
    required: &[Requirement],
    backend: Requirement,
    skip: &Skip,
    another_backend_opened: impl FnOnce() -> bool,
) -> Option<String> {
    let reason = backend_reason(skip);
    if required.contains(&backend) {
        return Some(format!(
            "W4A16_REQUIRE={backend} but the {backend} backend {reason}"
        ));
    }
    if skip.requirement != Requirement::Gpu && required.contains(&skip.requirement) {
        return Some(format!("W4A16_REQUIRE={} but {skip}", skip.requirement));
    }
    if required.contains(&Requirement::Gpu) && !another_backend_opened() {
        return Some(format!(
            "W4A16_REQUIRE=gpu and no GPU backend opened here: the {backend} backend {reason}"
        ));
    }
    None
}

/// `skipped: …`, naming the skip's own requirement where it is not the GPU itself.
fn backend_reason(skip: &Skip) -> String {
    format!("skipped: {}", announced_reason(skip))
}

/// The reason on the `W4A16-SKIP [backend]` line: the skip's own, and its requirement where it
/// is not the GPU itself (`needs nvrtc: …`).
fn announced_reason(skip: &Skip) -> String {
    match skip.requirement {
        Requirement::Gpu => skip.reason.clone(),
        other => format!("needs {other}: {}", skip.reason),
    }
}

/// The prefix of every skip line and of the summary, for `grep` in CI logs.
pub const SKIP_PREFIX: &str = "W4A16-SKIP";

/// Skipped parts of this process, `(needs, reason)` with a count, in first-seen order.
static SKIPPED: Mutex<Vec<((String, String), usize)>> = Mutex::new(Vec::new());
static SUMMARY_AT_EXIT: Once = Once::new();

/// Prints `W4A16-SKIP [needs] reason (in test)` past libtest's capture and counts it for the summary
/// printed when the process exits (see the crate docs for why both work under capture).
///
/// `needs` names what the part needs: a [`Requirement`] (use [`skip_or_fail`], which honours
/// `W4A16_REQUIRE`), or a condition no variable can demand, such as `no-gpu` for a test of the
/// no-GPU path on a machine that has one.
pub fn announce_skip(needs: &str, reason: &str) {
    // libtest runs each test on a thread named after it: the line says which test skipped.
    let within = match std::thread::current().name() {
        Some(test) if test != "main" => format!(" (in {test})"),
        _ => String::new(),
    };
    write_past_capture(&format!("{SKIP_PREFIX} [{needs}] {reason}{within}\n"));
    {
        let mut skipped = SKIPPED.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (needs.to_owned(), reason.to_owned());
        match skipped.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => skipped.push((key, 1)),
        }
    }
    SUMMARY_AT_EXIT.call_once(|| {
        // SAFETY: `atexit` is the C standard library's; the handler is an `extern "C" fn`
        // that never unwinds (it ignores write errors and a poisoned lock).
        unsafe {
            atexit(print_summary);
        }
    });
}

unsafe extern "C" {
    fn atexit(handler: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn print_summary() {
    let skipped = SKIPPED.lock().unwrap_or_else(PoisonError::into_inner);
    if skipped.is_empty() {
        return;
    }
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| binary_name(&s).to_owned())
        .unwrap_or_else(|| "this test binary".into());
    write_past_capture(&format!("{}\n", summary_line(&binary, &skipped)));
}

/// libtest's capture does not see writes through the handle (crate docs); errors are ignored,
/// as `eprintln!` would panic on them and a skip line must never fail a test.
fn write_past_capture(line: &str) {
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A test binary's file stem without cargo's `-<16 hex digits>` suffix.
fn binary_name(stem: &str) -> &str {
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => stem,
    }
}

/// `W4A16-SKIP summary (binary): N parts skipped: needs: reason ×k; …`.
fn summary_line(binary: &str, skipped: &[((String, String), usize)]) -> String {
    let total: usize = skipped.iter().map(|(_, n)| n).sum();
    let parts = if total == 1 { "part" } else { "parts" };
    let each: Vec<String> = skipped
        .iter()
        .map(|((needs, reason), n)| {
            // One line per binary, even for a reason that quotes a compiler's output.
            let reason = reason.lines().collect::<Vec<_>>().join(" / ");
            format!("{needs}: {reason} ×{n}")
        })
        .collect();
    format!(
        "{SKIP_PREFIX} summary ({binary}): {total} {parts} skipped: {}",
        each.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_require_lists() {
        assert_eq!(
            required_from(Some("gpu, nvrtc")),
            vec![Requirement::Gpu, Requirement::Nvrtc]
        );
        assert_eq!(required_from(Some("all")).len(), 3);
        assert!(required_from(None).is_empty());
        assert_eq!(unknown_required("gpu,gpus"), vec!["gpus".to_string()]);
    }

    #[test]
    fn vendor_requirements_are_named_one_by_one() {
        assert_eq!(
            required_from(Some("gpu,rocm")),
            vec![Requirement::Gpu, Requirement::Rocm]
        );
        let all = required_from(Some("all"));
        assert!(!all.contains(&Requirement::Cuda) && !all.contains(&Requirement::Rocm));
        assert!(unknown_required("cuda,rocm").is_empty());
    }

    #[test]
    fn a_backend_skip_fails_under_gpu_only_when_no_other_backend_opened() {
        let no_device = Skip {
            requirement: Requirement::Gpu,
            reason: "no AMD device".into(),
        };
        let rocm = |required: &[Requirement], other: bool| {
            backend_skip_failure(required, Requirement::Rocm, &no_device, || other)
        };
        // The NVIDIA job: CUDA opened, the ROCm cases skip.
        assert_eq!(rocm(&[Requirement::Gpu], true), None);
        // Nothing opened (a broken driver): the machine's GPU is demanded.
        let fail = rocm(&[Requirement::Gpu], false).expect("fails");
        assert!(fail.contains("no GPU backend opened") && fail.contains("no AMD device"));
        // The vendor named: fails whatever else opened.
        assert!(rocm(&[Requirement::Rocm], true).is_some());
        assert_eq!(rocm(&[Requirement::Cuda], false), None);
        // Nothing demanded (.ci/run's amd-toolchain,nvrtc on a machine without a GPU).
        assert_eq!(
            rocm(&[Requirement::AmdToolchain, Requirement::Nvrtc], false),
            None
        );
        assert_eq!(rocm(&[], false), None);
    }

    #[test]
    fn a_backend_skip_for_another_demanded_requirement_fails() {
        let no_nvrtc = Skip {
            requirement: Requirement::Nvrtc,
            reason: "libnvrtc not found".into(),
        };
        let cuda = |required: &[Requirement]| {
            backend_skip_failure(required, Requirement::Cuda, &no_nvrtc, || true)
        };
        assert_eq!(
            cuda(&[Requirement::Nvrtc]).as_deref(),
            Some("W4A16_REQUIRE=nvrtc but skipped (needs nvrtc): libnvrtc not found")
        );
        assert_eq!(cuda(&[Requirement::AmdToolchain]), None);
        // "Another backend opened" is asked only when `gpu` is demanded.
        let asked = std::cell::Cell::new(false);
        backend_skip_failure(&[], Requirement::Cuda, &no_nvrtc, || {
            asked.set(true);
            false
        });
        assert!(!asked.get());
    }

    #[test]
    fn the_summary_counts_each_reason() {
        let skipped = vec![
            (("gpu".to_string(), "no CUDA device".to_string()), 2),
            (("nvrtc".to_string(), "no headers".to_string()), 1),
        ];
        assert_eq!(
            summary_line("gpu_smoke", &skipped),
            "W4A16-SKIP summary (gpu_smoke): 3 parts skipped: gpu: no CUDA device ×2; \
             nvrtc: no headers ×1"
        );
        assert_eq!(
            summary_line("x", &skipped[1..]),
            "W4A16-SKIP summary (x): 1 part skipped: nvrtc: no headers ×1"
        );
    }

    #[test]
    fn binary_names_lose_cargos_hash() {
        assert_eq!(binary_name("gpu_smoke-0123456789abcdef"), "gpu_smoke");
        assert_eq!(
            binary_name("w4a16_harness-0123456789abcdef"),
            "w4a16_harness"
        );
        assert_eq!(binary_name("amd-rocm"), "amd-rocm");
    }
}
