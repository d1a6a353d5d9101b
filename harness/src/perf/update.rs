//! `w4a16 perf --update-goldens`: the only writer of goldens. Builds the new file from the
//! candidate side of a run and says what moved against the old one, for the PR that commits it.

use super::golden::{GOLDEN_SCHEMA, GoldenEntry, GoldenFile};
use super::judge::ratio_samples;
use super::key::{KernelLabel, Measured, PerfKey};
use super::report::{PerfRun, fmt_delta};
use super::stats::median;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the new goldens change against the old ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateSummary {
    /// Keys the old file did not have.
    pub added: Vec<PerfKey>,
    /// Keys of the old file a whole-suite run did not measure (or could not: no finite medians).
    pub dropped: Vec<PerfKey>,
    /// Keys of the old file a filtered run did not reach: their entries stay as they were.
    pub kept: Vec<PerfKey>,
    /// (key, old label, new label).
    pub relabeled: Vec<(PerfKey, KernelLabel, KernelLabel)>,
    /// Keys whose ratio moved beyond the band: (key, new ratio / old ratio − 1), largest first.
    pub moved: Vec<(PerfKey, f64)>,
}

/// One side's measurement as a golden entry; `None` when its medians are not finite.
pub fn golden_entry(m: &Measured) -> Option<GoldenEntry> {
    let ratio_samples = ratio_samples(m);
    Some(GoldenEntry {
        key: m.key.clone(),
        kernel: m.kernel.clone(),
        time_us: median(&m.times_us)?,
        control: m.control,
        control_us: median(&m.control_us)?,
        ratio: median(&ratio_samples)?,
        ratio_samples,
    })
}

/// The new golden file from the run's candidate side (first outcome of a key wins), keeping
/// the old file's band and noise overrides, and what moved. Moves are judged against the
/// old file's band where it sets one, else the run's.
/// What the run that rewrites the goldens covered: the whole suite, or part of it (`--filter`),
/// so that goldens can be recorded in batches (one device call cannot time the whole field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateScope {
    /// Old entries the run did not measure are dropped: the suite no longer has them.
    WholeSuite,
    /// Old entries the run did not measure are kept unchanged.
    Filtered,
}

/// Why a run's timings cannot go into the golden file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UpdateError {
    #[error(
        "the goldens were recorded on {file_device}, this run is on {run_device}: a filtered \
         batch would leave one file with times of two devices (record the whole suite on this \
         device, or run the batch on {file_device})"
    )]
    OtherDevice {
        file_device: String,
        run_device: String,
    },
}

/// Whether a run on `device` may update `old` under `scope`: a filtered batch keeps the old
/// entries it did not reach, so it must come from the device that recorded them. Asked before
/// timing (so a wrong device costs nothing) and again by [`update_goldens`].
pub fn may_update(
    old: Option<&GoldenFile>,
    device: &str,
    scope: UpdateScope,
) -> Result<(), UpdateError> {
    match old {
        Some(g) if scope == UpdateScope::Filtered && g.device != device => {
            Err(UpdateError::OtherDevice {
                file_device: g.device.clone(),
                run_device: device.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// The new goldens and what moved ([`may_update`] first); a filtered batch's command is added
/// to `recorded`.
pub fn update_goldens(
    old: Option<&GoldenFile>,
    run: &PerfRun,
    scope: UpdateScope,
    recorded: String,
) -> Result<(GoldenFile, UpdateSummary), UpdateError> {
    may_update(old, &run.device, scope)?;
    let recorded = match (scope, old) {
        (UpdateScope::Filtered, Some(g)) if !g.entries.is_empty() => {
            format!("{}; then {recorded}", g.recorded)
        }
        _ => recorded,
    };
    let mut new: BTreeMap<PerfKey, GoldenEntry> = BTreeMap::new();
    for o in &run.outcomes {
        if new.contains_key(&o.key) {
            continue;
        }
        if let Some(e) = golden_entry(&o.candidate) {
            new.insert(o.key.clone(), e);
        }
    }
    let band = old.and_then(|g| g.band).unwrap_or(run.policy.band);
    let mut summary = UpdateSummary::default();
    let old_entries: BTreeMap<&PerfKey, &GoldenEntry> = old
        .map(|g| g.entries.iter().map(|e| (&e.key, e)).collect())
        .unwrap_or_default();
    for (key, e) in &new {
        let Some(was) = old_entries.get(key) else {
            summary.added.push(key.clone());
            continue;
        };
        if was.kernel != e.kernel {
            summary
                .relabeled
                .push((key.clone(), was.kernel.clone(), e.kernel.clone()));
        }
        let delta = e.ratio / was.ratio - 1.0;
        if delta.abs() > band {
            summary.moved.push((key.clone(), delta));
        }
    }
    let unmeasured: Vec<PerfKey> = old_entries
        .keys()
        .filter(|k| !new.contains_key(**k))
        .map(|k| (*k).clone())
        .collect();
    match scope {
        UpdateScope::WholeSuite => summary.dropped = unmeasured,
        UpdateScope::Filtered => {
            for k in &unmeasured {
                new.insert(k.clone(), (*old_entries[k]).clone());
            }
            summary.kept = unmeasured;
        }
    }
    summary
        .moved
        .sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then_with(|| a.0.cmp(&b.0)));
    let file = GoldenFile {
        schema: GOLDEN_SCHEMA,
        target: run.target.clone(),
        device: run.device.clone(),
        recorded,
        band: old.and_then(|g| g.band),
        noise_limit: old.and_then(|g| g.noise_limit),
        entries: new.into_values().collect(),
    };
    Ok((file, summary))
}

impl UpdateSummary {
    /// `perf/<target>.moved.md`: the counts, then every added, dropped, relabeled and moved key.
    pub fn markdown(&self, target: &str) -> String {
        let mut md = format!("# Perf goldens for `{target}`: what moved\n\n");
        let _ = writeln!(
            md,
            "{} added, {} dropped, {} kept unmeasured, {} relabeled, {} moved beyond the band.\n",
            self.added.len(),
            self.dropped.len(),
            self.kept.len(),
            self.relabeled.len(),
            self.moved.len()
        );
        let list = |md: &mut String, title: &str, keys: &[PerfKey]| {
            if !keys.is_empty() {
                let _ = writeln!(md, "## {title}\n");
                keys.iter().for_each(|k| {
                    let _ = writeln!(md, "- `{k}`");
                });
                md.push('\n');
            }
        };
        list(&mut md, "Added", &self.added);
        list(&mut md, "Dropped", &self.dropped);
        list(
            &mut md,
            "Kept (not measured by this filtered run)",
            &self.kept,
        );
        if !self.relabeled.is_empty() {
            md.push_str("## Relabeled (a different kernel now runs)\n\n| case | was | now |\n|---|---|---|\n");
            for (k, was, now) in &self.relabeled {
                let _ = writeln!(md, "| `{k}` | `{was}` | `{now}` |");
            }
            md.push('\n');
        }
        if !self.moved.is_empty() {
            md.push_str("## Moved beyond the band (ratio to control, new / old − 1; + is slower)\n\n| case | Δ |\n|---|---|\n");
            for (k, delta) in &self.moved {
                let _ = writeln!(md, "| `{k}` | {} |", fmt_delta(*delta));
            }
            md.push('\n');
        }
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::judge::tests::measured;
    use crate::perf::judge::{JudgePolicy, judge_case};
    use crate::perf::measure::PerfPlan;

    fn run_of(sides: Vec<Measured>) -> PerfRun {
        PerfRun {
            target: "sm_90".into(),
            device: "NVIDIA H200".into(),
            suite: "field".into(),
            policy: JudgePolicy::default(),
            plan: PerfPlan::default(),
            candidate: "embedded kernels".into(),
            control: None,
            outcomes: sides
                .into_iter()
                .map(|m| judge_case(m, None, None, &JudgePolicy::default()))
                .collect(),
            not_timed: Vec::new(),
            peers_note: None,
        }
    }

    #[test]
    fn golden_entry_takes_medians_and_ratio_samples() {
        let m = measured(1, "skinny:k", 30.0, 0.02, 15);
        let e = golden_entry(&m).unwrap();
        approx::assert_abs_diff_eq!(e.time_us, 30.0, epsilon = 1e-9);
        approx::assert_abs_diff_eq!(e.control_us, 10.0, epsilon = 1e-9);
        approx::assert_abs_diff_eq!(e.ratio, 3.0, epsilon = 1e-9);
        assert_eq!(e.ratio_samples.len(), 15);
        let mut empty = m.clone();
        empty.times_us.clear();
        assert_eq!(golden_entry(&empty), None);
    }

    #[test]
    fn update_reports_added_dropped_relabeled_moved() {
        let old_run = run_of(vec![
            measured(1, "skinny:k", 30.0, 0.02, 15),
            measured(2, "skinny:k", 30.0, 0.02, 15),
            measured(3, "skinny:k", 30.0, 0.02, 15),
        ]);
        let (mut old, first) =
            update_goldens(None, &old_run, UpdateScope::WholeSuite, "old".into()).unwrap();
        assert_eq!(first.added.len(), 3);
        assert!(first.dropped.is_empty() && first.moved.is_empty());
        old.band = Some(0.1);

        let new_run = run_of(vec![
            measured(1, "skinny:k", 31.0, 0.02, 15), // +3.3 %: not moved
            measured(2, "fused:k", 36.0, 0.02, 15),  // relabeled and +20 %
            measured(4, "skinny:k", 30.0, 0.02, 15), // new
            measured(4, "skinny:k", 99.0, 0.02, 15), // same key again: first wins
        ]);
        let (file, s) = update_goldens(
            Some(&old),
            &new_run,
            UpdateScope::WholeSuite,
            "abc: perf --update-goldens".into(),
        )
        .unwrap();
        let key = |m| PerfKey {
            m,
            ..old_run.outcomes[0].key.clone()
        };
        assert_eq!(s.added, vec![key(4)]);
        assert_eq!(s.dropped, vec![key(3)]);
        assert_eq!(
            s.relabeled,
            vec![(
                key(2),
                KernelLabel("skinny:k".into()),
                KernelLabel("fused:k".into())
            )]
        );
        assert_eq!(s.moved.len(), 1);
        assert_eq!(s.moved[0].0, key(2));
        approx::assert_abs_diff_eq!(s.moved[0].1, 0.2, epsilon = 1e-9);
        assert_eq!(file.band, Some(0.1), "the override is kept");
        assert_eq!(file.recorded, "abc: perf --update-goldens");
        assert_eq!(file.entries.len(), 3);
        assert!((file.entry(&key(4)).unwrap().time_us - 30.0).abs() < 1e-9);

        let md = s.markdown("sm_90");
        assert!(
            md.contains("1 added, 1 dropped, 0 kept unmeasured, 1 relabeled, 1 moved"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `hybrid-w4a16-zp-bf16/qwen3-8b.mlp_down/M=2` | `skinny:k` | `fused:k` |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| `hybrid-w4a16-zp-bf16/qwen3-8b.mlp_down/M=2` | +20.0 % |"),
            "{md}"
        );
    }

    #[test]
    fn a_filtered_update_keeps_what_it_did_not_measure() {
        let old_run = run_of(vec![
            measured(1, "skinny:k", 30.0, 0.02, 15),
            measured(2, "skinny:k", 30.0, 0.02, 15),
        ]);
        let (old, _) =
            update_goldens(None, &old_run, UpdateScope::WholeSuite, "old".into()).unwrap();
        let batch = run_of(vec![measured(2, "skinny:k", 33.0, 0.02, 15)]);
        let (file, s) =
            update_goldens(Some(&old), &batch, UpdateScope::Filtered, "b".into()).unwrap();
        assert_eq!(file.entries.len(), 2, "key 1 stays");
        assert_eq!(file.recorded, "old; then b", "the batch's command is added");
        assert!(s.dropped.is_empty());
        assert_eq!(s.kept, vec![old.entries[0].key.clone()]);
        assert_eq!(file.entry(&s.kept[0]), Some(&old.entries[0]), "unchanged");
        assert!((file.entry(&old.entries[1].key).unwrap().time_us - 33.0).abs() < 1e-9);
        let (whole, s) =
            update_goldens(Some(&old), &batch, UpdateScope::WholeSuite, "c".into()).unwrap();
        assert_eq!(whole.entries.len(), 1);
        assert_eq!(s.dropped.len(), 1);
        assert_eq!(whole.recorded, "c");
        // A batch from another device would mix two devices' times in one file: refused.
        let mut elsewhere = batch.clone();
        elsewhere.device = "NVIDIA H100".into();
        let e = update_goldens(Some(&old), &elsewhere, UpdateScope::Filtered, "d".into());
        assert!(
            matches!(&e, Err(UpdateError::OtherDevice { run_device, .. }) if run_device == "NVIDIA H100"),
            "{e:?}"
        );
        let whole = update_goldens(Some(&old), &elsewhere, UpdateScope::WholeSuite, "d".into());
        assert!(whole.is_ok(), "a whole-suite run replaces every entry");
    }
}
