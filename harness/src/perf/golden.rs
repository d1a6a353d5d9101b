//! Per-target perf goldens, `perf/<target>.json`: what each case's selected kernel took, as a
//! time and as a ratio to the control measured beside it. Only `w4a16 perf --update-goldens`
//! writes them ([`super::update`]); everything else only reads.

use super::key::{ControlKind, KernelLabel, PerfKey};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the file layout; a file of another version is refused, not guessed at.
pub const GOLDEN_SCHEMA: u32 = 1;

/// Significant digits kept in the file: far below the noise, and diffs stay small.
const SIGNIFICANT_DIGITS: i32 = 4;

/// One case's golden: medians of the run that recorded it and the ratio samples the
/// Mann–Whitney test compares new runs against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoldenEntry {
    pub key: PerfKey,
    pub kernel: KernelLabel,
    /// Median per-launch time of the selected path, µs.
    pub time_us: f64,
    pub control: ControlKind,
    /// Median per-launch time of the control, µs.
    pub control_us: f64,
    /// Median of `ratio_samples`: the value new runs are judged against.
    pub ratio: f64,
    /// time_us[i] / median(control_us) of the recording run.
    pub ratio_samples: Vec<f64>,
}

/// A target's goldens and where they came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoldenFile {
    pub schema: u32,
    /// `Target`'s Display (`sm_90`); must match the file's name.
    pub target: String,
    /// The device that recorded them (`NVIDIA H200`).
    pub device: String,
    /// Free text: commit and command that recorded them.
    pub recorded: String,
    /// Per-target override of the band (fraction, 0.08 = ±8 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<f64>,
    /// Per-target override of the noise limit (IQR/median of the ratio samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_limit: Option<f64>,
    pub entries: Vec<GoldenEntry>,
}

/// Why a golden file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a golden file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: schema {found}, this harness reads schema {expected}")]
    WrongSchema {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error("{path}: two entries for {key}; a case has one golden")]
    DuplicateKey { path: PathBuf, key: Box<PerfKey> },
    #[error("{path}: holds goldens of target `{found}`, the file is named for `{expected}`")]
    TargetMismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },
    #[error("{path}: {key}: {field} is {value}, expected {expected}")]
    BadValue {
        path: PathBuf,
        key: Box<PerfKey>,
        field: &'static str,
        value: String,
        expected: &'static str,
    },
}

impl GoldenFile {
    /// `<dir>/<target>.json`.
    pub fn path_for(dir: &Path, target: &str) -> PathBuf {
        dir.join(format!("{target}.json"))
    }

    /// Reads and checks a golden file; `Ok(None)` if there is none yet (every case is then
    /// `NoGolden`).
    pub fn load(path: &Path) -> Result<Option<GoldenFile>, GoldenError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(GoldenError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        // Schema first, so that a future layout is named as such rather than as a parse error.
        #[derive(Deserialize)]
        struct SchemaOnly {
            schema: u32,
        }
        let parse = |source| GoldenError::Parse {
            path: path.to_path_buf(),
            source,
        };
        let SchemaOnly { schema } = serde_json::from_str(&text).map_err(parse)?;
        if schema != GOLDEN_SCHEMA {
            return Err(GoldenError::WrongSchema {
                path: path.to_path_buf(),
                found: schema,
                expected: GOLDEN_SCHEMA,
            });
        }
        let file: GoldenFile = serde_json::from_str(&text).map_err(parse)?;
        file.check(path)?;
        Ok(Some(file))
    }

    /// Writes the file ([`goldens_text`]), entries sorted by key and values rounded to 4
    /// significant digits, after the same checks [`GoldenFile::load`] makes.
    pub fn save(&self, path: &Path) -> Result<(), GoldenError> {
        let mut file = self.clone();
        file.entries.sort_by(|a, b| a.key.cmp(&b.key));
        for e in &mut file.entries {
            e.time_us = round_significant(e.time_us);
            e.control_us = round_significant(e.control_us);
            e.ratio = round_significant(e.ratio);
            e.ratio_samples
                .iter_mut()
                .for_each(|x| *x = round_significant(*x));
        }
        file.check(path)?;
        write_json(path, &file)
    }

    pub fn entry(&self, key: &PerfKey) -> Option<&GoldenEntry> {
        self.entries.iter().find(|e| &e.key == key)
    }

    /// The invariants judging relies on: the file is named for its target, one entry per key,
    /// positive finite times and ratios, at least one ratio sample.
    fn check(&self, path: &Path) -> Result<(), GoldenError> {
        let named = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if named != self.target {
            return Err(GoldenError::TargetMismatch {
                path: path.to_path_buf(),
                expected: named.to_string(),
                found: self.target.clone(),
            });
        }
        let mut keys: Vec<&PerfKey> = self.entries.iter().map(|e| &e.key).collect();
        keys.sort();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(GoldenError::DuplicateKey {
                path: path.to_path_buf(),
                key: Box::new(w[0].clone()),
            });
        }
        for e in &self.entries {
            let bad = |field, value: String, expected| GoldenError::BadValue {
                path: path.to_path_buf(),
                key: Box::new(e.key.clone()),
                field,
                value,
                expected,
            };
            for (field, v) in [
                ("time_us", e.time_us),
                ("control_us", e.control_us),
                ("ratio", e.ratio),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(bad(field, v.to_string(), "a positive finite number"));
                }
            }
            if e.ratio_samples.is_empty() {
                return Err(bad("ratio_samples", "empty".into(), "at least one sample"));
            }
            if let Some(v) = e
                .ratio_samples
                .iter()
                .find(|v| !(v.is_finite() && **v > 0.0))
            {
                return Err(bad(
                    "ratio_samples",
                    format!("holding {v}"),
                    "positive finite numbers",
                ));
            }
        }
        Ok(())
    }
}

/// `x` rounded to [`SIGNIFICANT_DIGITS`] significant digits, through an exact power of ten so
/// that the printed value is the short decimal (33.61, not 33.609999999999999).
fn round_significant(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let shift = SIGNIFICANT_DIGITS - 1 - x.abs().log10().floor() as i32;
    if shift >= 0 {
        let f = 10f64.powi(shift);
        (x * f).round() / f
    } else {
        let f = 10f64.powi(-shift);
        (x / f).round() * f
    }
}

/// A goldens file written, its folder made first: the one writer of the speed goldens and the
/// emulator's counter goldens.
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, file: &T) -> Result<(), GoldenError> {
    let io = |source| GoldenError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, goldens_text(file)).map_err(io)
}

/// A goldens file's text: one entry per line (`report::json::records`), so that a reviewer sees
/// a re-recorded golden as its own changed line.
pub(crate) fn goldens_text<T: serde::Serialize>(file: &T) -> String {
    crate::report::json::records(file, "a goldens file")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(provider: &str, m: usize, kernel: &str, ratio: f64) -> GoldenEntry {
        GoldenEntry {
            key: PerfKey {
                provider: provider.into(),
                shape: "qwen3-8b.mlp_down".into(),
                m,
            },
            kernel: KernelLabel(kernel.into()),
            time_us: 33.612_345,
            control: ControlKind::for_m(m),
            control_us: 7.001_9,
            ratio,
            ratio_samples: vec![ratio * 0.99, ratio, ratio * 1.01],
        }
    }

    fn file(entries: Vec<GoldenEntry>) -> GoldenFile {
        GoldenFile {
            schema: GOLDEN_SCHEMA,
            target: "sm_90".into(),
            device: "NVIDIA H200".into(),
            recorded: "abc1234: w4a16 perf --update-goldens".into(),
            band: Some(0.1),
            noise_limit: None,
            entries,
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("w4a16-golden-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn rounds_to_four_significant_digits() {
        assert_eq!(round_significant(33.612_345), 33.61);
        assert_eq!(round_significant(0.213_456), 0.2135);
        assert_eq!(round_significant(1372.4), 1372.0);
        assert_eq!(round_significant(81_546.0), 81_550.0);
        assert_eq!(round_significant(-0.000_123_456), -0.000_123_5);
        assert_eq!(round_significant(0.0), 0.0);
    }

    #[test]
    fn save_then_load_round_trips_sorted_and_rounded() {
        let dir = temp_dir("roundtrip");
        let path = GoldenFile::path_for(&dir, "sm_90");
        assert_eq!(path, dir.join("sm_90.json"));
        assert!(
            GoldenFile::load(&path).unwrap().is_none(),
            "absent file is None"
        );

        let g = file(vec![
            entry("b", 16, "fused:x", 1.5),
            entry("a", 1, "skinny:y", 4.712_34),
        ]);
        g.save(&path).unwrap();
        let back = GoldenFile::load(&path).unwrap().unwrap();
        assert_eq!(back.entries[0].key.provider, "a", "entries sorted by key");
        assert_eq!(back.entries[0].ratio, 4.712);
        assert_eq!(back.entries[0].time_us, 33.61);
        assert_eq!(back.entries[0].ratio_samples[0], 4.665); // 4.71234 · 0.99 = 4.66522
        assert_eq!(back.band, Some(0.1));
        assert_eq!(back.noise_limit, None);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"time_us\":33.61,"), "{text}");
        // One entry a line: a re-recorded golden is one changed line in a diff.
        assert_eq!(
            text.lines().filter(|l| l.contains("\"time_us\"")).count(),
            2,
            "{text}"
        );
        assert!(
            !text.contains("noise_limit"),
            "absent overrides are left out"
        );
        // Saving what was loaded changes nothing.
        back.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert_eq!(back.entry(&g.entries[0].key), Some(&back.entries[1]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_duplicates_wrong_target_schema_and_bad_values() {
        let dir = temp_dir("refusals");
        let path = GoldenFile::path_for(&dir, "sm_90");

        let dup = file(vec![entry("a", 1, "k", 1.0), entry("a", 1, "k2", 2.0)]);
        let err = dup.save(&path).unwrap_err();
        assert!(
            matches!(&err, GoldenError::DuplicateKey { key, .. } if key.m == 1),
            "{err}"
        );
        assert!(!path.exists(), "a refused file is not written");

        let wrong = file(vec![entry("a", 1, "k", 1.0)]);
        let other = GoldenFile::path_for(&dir, "gfx1100");
        let err = wrong.save(&other).unwrap_err();
        assert!(
            matches!(&err, GoldenError::TargetMismatch { expected, found, .. }
                if expected == "gfx1100" && found == "sm_90"),
            "{err}"
        );
        // The same checks on load: a file copied under another target's name is refused.
        wrong.save(&path).unwrap();
        std::fs::copy(&path, &other).unwrap();
        assert!(matches!(
            GoldenFile::load(&other),
            Err(GoldenError::TargetMismatch { .. })
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"schema\": 1", "\"schema\": 2")).unwrap();
        assert!(matches!(
            GoldenFile::load(&path),
            Err(GoldenError::WrongSchema {
                found: 2,
                expected: 1,
                ..
            })
        ));
        std::fs::write(&path, "{\"schema\": 1, \"target\": ").unwrap();
        assert!(matches!(
            GoldenFile::load(&path),
            Err(GoldenError::Parse { .. })
        ));

        let mut zero = entry("a", 1, "k", 1.0);
        zero.ratio = 0.0;
        let err = file(vec![zero]).save(&path).unwrap_err();
        assert!(
            matches!(err, GoldenError::BadValue { field: "ratio", .. }),
            "{err}"
        );
        let mut empty = entry("a", 1, "k", 1.0);
        empty.ratio_samples.clear();
        let err = file(vec![empty]).save(&path).unwrap_err();
        assert!(
            matches!(
                err,
                GoldenError::BadValue {
                    field: "ratio_samples",
                    ..
                }
            ),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The goldens kept under `perf/` load (checked as a gate run checks them) and are in the
    /// writer's layout, one entry per line.
    #[test]
    fn committed_goldens_load_in_the_writers_layout() {
        use crate::perf::counters::golden::CountersFile;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../perf");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let written = if name.ends_with(".counters.json") {
                let file = CountersFile::load(&path).unwrap().unwrap();
                assert!(!file.entries.is_empty(), "{name} has no entry");
                goldens_text(&file)
            } else {
                let file = GoldenFile::load(&path).unwrap().unwrap();
                assert!(!file.entries.is_empty(), "{name} has no entry");
                goldens_text(&file)
            };
            assert!(written == text, "{name} is not in the writer's layout");
            seen += 1;
        }
        assert!(seen >= 2, "{seen} goldens files under {}", dir.display());
    }
}
