//! Per-target counter goldens, `perf/<target>.counters.json`: each counted case's kernel label
//! and every launch's counters, recorded by the ISA emulator. Only `w4a16 perf --update-goldens`
//! writes them ([`update`], then [`CountersFile::save`]); everything else only reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Counted, LaunchCount};
use crate::perf::golden::GoldenError;
use crate::perf::key::{KernelLabel, PerfKey};
use crate::perf::update::UpdateScope;

/// Version of the file layout; another is refused, not guessed at.
pub const COUNTERS_SCHEMA: u32 = 1;

/// One case's golden counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountersEntry {
    pub key: PerfKey,
    pub kernel: KernelLabel,
    pub launches: Vec<LaunchCount>,
    /// The model time on the target's declared machine when recorded (µs). A model: shown,
    /// never judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_us: Option<f64>,
}

/// A target's counter goldens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountersFile {
    pub schema: u32,
    /// The target (`gfx1151`); the file is named `<target>.counters.json`.
    pub target: String,
    /// What counted them (the ISA emulator, and the target).
    pub device: String,
    /// Commit and command that recorded them.
    pub recorded: String,
    /// The MAC budget of the recording run.
    pub max_macs: u64,
    /// Cases the budget left out when recorded (their keys).
    #[serde(default)]
    pub left_out: Vec<PerfKey>,
    pub entries: Vec<CountersEntry>,
}

impl CountersFile {
    /// `<dir>/<target>.counters.json`.
    pub fn path_for(dir: &Path, target: &str) -> PathBuf {
        dir.join(format!("{target}.counters.json"))
    }

    /// Reads and checks a file; `Ok(None)` when there is none (every case is then `no golden`).
    pub fn load(path: &Path) -> Result<Option<CountersFile>, GoldenError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(GoldenError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let parse = |source| GoldenError::Parse {
            path: path.to_path_buf(),
            source,
        };
        #[derive(Deserialize)]
        struct SchemaOnly {
            schema: u32,
        }
        let SchemaOnly { schema } = serde_json::from_str(&text).map_err(parse)?;
        if schema != COUNTERS_SCHEMA {
            return Err(GoldenError::WrongSchema {
                path: path.to_path_buf(),
                found: schema,
                expected: COUNTERS_SCHEMA,
            });
        }
        let file: CountersFile = serde_json::from_str(&text).map_err(parse)?;
        file.check(path)?;
        Ok(Some(file))
    }

    /// Writes the file, entries sorted by key, model times to 4 significant digits. Called by
    /// `w4a16 perf --update-goldens` only.
    pub fn save(&self, path: &Path) -> Result<(), GoldenError> {
        let mut file = self.clone();
        file.entries.sort_by(|a, b| a.key.cmp(&b.key));
        file.left_out.sort();
        for e in &mut file.entries {
            e.model_us = e.model_us.map(round4);
        }
        file.check(path)?;
        crate::perf::golden::write_json(path, &file)
    }

    pub fn entry(&self, key: &PerfKey) -> Option<&CountersEntry> {
        self.entries.iter().find(|e| &e.key == key)
    }

    /// The file is named for its target and holds one entry per key.
    fn check(&self, path: &Path) -> Result<(), GoldenError> {
        let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("");
        let named = name.strip_suffix(".counters.json").unwrap_or(name);
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
        Ok(())
    }
}

fn round4(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(3 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// What an update changed, for `perf/<target>.counters.moved.md`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountersUpdate {
    pub added: Vec<PerfKey>,
    pub dropped: Vec<PerfKey>,
    pub kept: Vec<PerfKey>,
    pub changed: Vec<PerfKey>,
}

/// The new file from the candidate's counts (old entries the run did not count are kept under
/// a filter, dropped otherwise), and what changed.
#[allow(clippy::too_many_arguments)]
pub fn update(
    old: Option<&CountersFile>,
    target: &str,
    device: &str,
    counted: &[&Counted],
    left_out: &[PerfKey],
    max_macs: u64,
    scope: UpdateScope,
    recorded: String,
) -> (CountersFile, CountersUpdate) {
    let mut new: BTreeMap<PerfKey, CountersEntry> = BTreeMap::new();
    for c in counted {
        new.entry(c.key.clone()).or_insert_with(|| CountersEntry {
            key: c.key.clone(),
            kernel: c.kernel.clone(),
            launches: c.launches.clone(),
            model_us: c.model_us,
        });
    }
    let mut summary = CountersUpdate::default();
    let old_entries: BTreeMap<&PerfKey, &CountersEntry> = old
        .map(|f| f.entries.iter().map(|e| (&e.key, e)).collect())
        .unwrap_or_default();
    for (key, e) in &new {
        match old_entries.get(key) {
            None => summary.added.push(key.clone()),
            Some(was) if was.kernel != e.kernel || was.launches != e.launches => {
                summary.changed.push(key.clone())
            }
            Some(_) => {}
        }
    }
    for (k, e) in &old_entries {
        if new.contains_key(*k) {
            continue;
        }
        match scope {
            UpdateScope::WholeSuite => summary.dropped.push((*k).clone()),
            UpdateScope::Filtered => {
                summary.kept.push((*k).clone());
                new.insert((*k).clone(), (*e).clone());
            }
        }
    }
    let file = CountersFile {
        schema: COUNTERS_SCHEMA,
        target: target.to_string(),
        device: device.to_string(),
        recorded,
        max_macs,
        left_out: left_out.to_vec(),
        entries: new.into_values().collect(),
    };
    (file, summary)
}

impl CountersUpdate {
    /// `perf/<target>.counters.moved.md`.
    pub fn markdown(&self, target: &str) -> String {
        use std::fmt::Write as _;
        let mut md = format!("# Counter goldens for `{target}`: what changed\n\n");
        let _ = writeln!(
            md,
            "{} added, {} dropped, {} kept uncounted, {} changed.\n",
            self.added.len(),
            self.dropped.len(),
            self.kept.len(),
            self.changed.len()
        );
        for (title, keys) in [
            ("Added", &self.added),
            ("Dropped", &self.dropped),
            ("Changed", &self.changed),
        ] {
            if keys.is_empty() {
                continue;
            }
            let _ = writeln!(md, "## {title}\n");
            for k in keys {
                let _ = writeln!(md, "- `{k}`");
            }
            md.push('\n');
        }
        md
    }
}
