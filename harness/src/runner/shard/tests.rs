//! Shards end to end on the simulated device (no GPU needed): the run arm with `--shard I/N`
//! for every I, then `merge`, against one unsharded run of the same suite.

use super::*;
use crate::runner::cli_run::{self, RunOptions};
use crate::runner::gpus::Gpus;
use crate::runner::snapshot::SnapshotMode;
use std::sync::OnceLock;
use std::time::Duration;
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{RunTarget, Target};
use w4a16_select::config::KernelConfig;

/// Several layers, several batch sizes per layer, and quick on the simulated device.
const SUITE: &str = "smoke";
const SHARDS: usize = 3;

fn spec(s: &str) -> Result<ShardSpec, ShardParseError> {
    s.parse()
}

#[test]
fn a_shard_is_i_of_n_counted_from_one_and_anything_else_is_refused_naming_the_flag() {
    assert_eq!(spec("2/4"), Ok(ShardSpec { index: 2, count: 4 }));
    assert_eq!(spec("1/1").unwrap().to_string(), "1/1");
    for (bad, why) in [
        ("3/2", "I = 3 is above N = 2"),
        ("0/2", "I is 0 (shards count from 1)"),
        ("1/0", "N is 0"),
        ("a/b", "I \"a\" is not a whole number"),
        ("1/b", "N \"b\" is not a whole number"),
        ("-1/2", "I \"-1\" is not a whole number"),
        ("2", "got no `/`"),
    ] {
        let e = spec(bad).unwrap_err();
        assert_eq!(e.why, why, "{bad}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("--shard {bad:?}: expected I/N")),
            "{text}"
        );
    }
}

/// Every case in exactly one shard, each layer whole in one shard, shard sizes within one
/// layer of each other, and the same split however often it is computed.
#[test]
fn shards_take_whole_layers_once_each_balanced_by_case_count() {
    let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
    let chosen: Vec<&Case> = set.cases().filter(|c| c.suite == "field").collect();
    assert!(chosen.len() > 1000, "{}", chosen.len());
    let layer = |c: &Case| c.layer_key();
    let biggest_layer = session::by_layer(chosen.iter().map(|c| c.layer_key()))
        .iter()
        .map(Vec::len)
        .max()
        .unwrap();
    for n in [1, 2, 4, 7] {
        let shards: Vec<Vec<(usize, &Case)>> = (1..=n)
            .map(|i| ShardSpec { index: i, count: n }.take(&chosen))
            .collect();
        let mut seen: Vec<usize> = shards.iter().flatten().map(|(p, _)| *p).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..chosen.len()).collect::<Vec<_>>(), "n = {n}");
        let mut owner: BTreeMap<String, usize> = BTreeMap::new();
        for (i, s) in shards.iter().enumerate() {
            assert!(
                s.windows(2).all(|w| w[0].0 < w[1].0),
                "in the suite's order"
            );
            for (p, c) in s {
                assert_eq!(chosen[*p].id, c.id);
                let o = *owner.entry(layer(c)).or_insert(i);
                assert_eq!(o, i, "layer {} split across shards (n = {n})", layer(c));
            }
        }
        let sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(max - min <= biggest_layer, "n = {n}: {sizes:?}");
        let again: Vec<usize> = ShardSpec { index: 1, count: n }
            .take(&chosen)
            .iter()
            .map(|(p, _)| *p)
            .collect();
        assert_eq!(again, shards[0].iter().map(|(p, _)| *p).collect::<Vec<_>>());
    }
    // More shards than layers: the extra shards are empty, none is lost or doubled.
    let two: Vec<&Case> = chosen
        .iter()
        .copied()
        .filter(|c| layer(c) == layer(chosen[0]))
        .collect();
    let taken: Vec<usize> = (1..=3)
        .map(|i| ShardSpec { index: i, count: 3 }.take(&two).len())
        .collect();
    assert_eq!(taken, vec![two.len(), 0, 0]);
}

fn options(
    report_dir: &Path,
    snapshots: &Path,
    mode: SnapshotMode,
    shard: Option<ShardSpec>,
) -> RunOptions {
    RunOptions {
        cases_dir: w4a16_cases::locate(None).unwrap(),
        suites: vec![SUITE.to_string()],
        filter: None,
        target: Some(RunTarget::native(Target::Sm90)),
        jobs: 1,
        gpus: Gpus::First,
        report_dir: report_dir.to_path_buf(),
        snapshot: Some(mode),
        snapshots: Some(snapshots.to_path_buf()),
        in_process: true,
        case_timeout: Duration::from_secs(120),
        sanitize: None,
        sources: KernelSources::Embedded,
        fail_fast: false,
        config: KernelConfig::default(),
        worker_exe: None,
        reference: None,
        shard,
    }
}

fn run_simulated(opts: RunOptions) -> Result<cli_run::RunEnd, cli_run::RunError> {
    cli_run::run_with(opts, &cli_run::SimulatedDevices { count: Some(1) })
}

/// One unsharded run (`whole/`, snapshots recorded in `snaps/`) and its shards (`shard-I/`,
/// each checking its rows against `snaps/`), made once for the tests below.
struct Runs {
    root: tempfile::TempDir,
}

impl Runs {
    fn whole(&self) -> PathBuf {
        self.root.path().join("whole")
    }
    /// Where the unsharded run wrote its reports and `merge` writes the merged ones: failure
    /// details name their artifacts there.
    fn out(&self) -> PathBuf {
        self.root.path().join("out")
    }
    fn snaps(&self) -> PathBuf {
        self.root.path().join("snaps")
    }
    fn shard(&self, i: usize) -> PathBuf {
        self.root.path().join(format!("shard-{i}"))
    }
    fn shards(&self) -> Vec<PathBuf> {
        (1..=SHARDS).map(|i| self.shard(i)).collect()
    }
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let runs = Runs {
            root: tempfile::tempdir().unwrap(),
        };
        let end = run_simulated(options(
            &runs.out(),
            &runs.snaps(),
            SnapshotMode::Update,
            None,
        ))
        .unwrap();
        assert!(end.differing_snapshots.is_empty());
        std::fs::rename(runs.out(), runs.whole()).unwrap();
        // Shards in reverse order: nothing may depend on which ran first.
        for i in (1..=SHARDS).rev() {
            let shard = Some(ShardSpec {
                index: i,
                count: SHARDS,
            });
            let end = run_simulated(options(
                &runs.shard(i),
                &runs.snaps(),
                SnapshotMode::Check,
                shard,
            ))
            .unwrap();
            assert_eq!(
                end.differing_snapshots,
                Vec::<String>::new(),
                "shard {i}'s rows are the unsharded run's rows of its cases"
            );
        }
        runs
    })
}

/// report.json without its `timing` object.
fn untimed(path: &Path) -> String {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let timing = json.as_object_mut().unwrap().remove("timing");
    assert!(timing.is_some(), "{} has its timing", path.display());
    serde_json::to_string_pretty(&json).unwrap()
}

/// summary.md without its timed end: the wall-time line (wall time and phase split) and the
/// cost per suite after it.
fn untimed_md(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let (body, timing) = text
        .rsplit_once("\n_")
        .filter(|(_, t)| t.contains(" s wall on "))
        .unwrap_or_else(|| panic!("{} has no wall-time line: {text}", path.display()));
    assert!(timing.contains("s wall on"), "{timing}");
    body.to_string()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn merged_shards_are_byte_for_byte_the_unsharded_run_but_for_timing() {
    let runs = runs();
    let out = runs.out();
    // Shards given in any order.
    let mut dirs = runs.shards();
    dirs.reverse();
    let end = merge_command(&dirs, &out, Some((SnapshotMode::Check, &runs.snaps()))).unwrap();
    assert!(end.differing_snapshots.is_empty());
    let whole = runs.whole();
    let report = |d: &Path| untimed(&d.join("report.json"));
    assert_eq!(report(&out), report(&whole));
    let raw = std::fs::read_to_string(out.join("report.json")).unwrap();
    assert!(
        !raw.contains("\"shard\""),
        "a merged report is not a shard's"
    );
    // The cost per suite: the shards' rows add up to the unsharded run's cases.
    let suite_rows = |d: &Path| {
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("report.json")).unwrap()).unwrap();
        let rows = j["timing"]["suites"].as_array().unwrap().clone();
        rows.iter()
            .map(|r| {
                (
                    r["suite"].as_str().unwrap().to_string(),
                    r["cases"].as_u64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(suite_rows(&out), suite_rows(&whole));
    assert_eq!(suite_rows(&whole)[0].0, SUITE);
    assert!(
        std::fs::read_to_string(out.join("summary.md"))
            .unwrap()
            .contains("Cost per suite")
    );
    assert_eq!(
        std::fs::read(out.join("junit.xml")).unwrap(),
        std::fs::read(whole.join("junit.xml")).unwrap()
    );
    assert_eq!(
        untimed_md(&out.join("summary.md")),
        untimed_md(&whole.join("summary.md"))
    );
    // Every failure artifact the details name is there, as the unsharded run's.
    assert_eq!(
        files_in(&out.join("artifacts")),
        files_in(&whole.join("artifacts"))
    );
    // The snapshot files: those the unsharded run recorded, byte for byte.
    let snaps = files_in(&runs.snaps());
    assert_eq!(files_in(&out.join("snapshots")), snaps);
    assert!(!snaps.is_empty());
    for name in &snaps {
        assert_eq!(
            std::fs::read(out.join("snapshots").join(name)).unwrap(),
            std::fs::read(runs.snaps().join(name)).unwrap(),
            "{name}"
        );
    }
    // The same summary counts, and every shard held some of the cases.
    let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let whole_v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(whole.join("report.json")).unwrap()).unwrap();
    assert_eq!(v["summary"], whole_v["summary"]);
    for dir in runs.shards() {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        assert!(!s["shard"]["positions"].as_object().unwrap().is_empty());
    }
}

/// A copy of the shard folders in a fresh folder, so a test can break one.
fn copy_of_shards() -> (tempfile::TempDir, Vec<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for (i, from) in runs().shards().iter().enumerate() {
        let to = tmp.path().join(format!("shard-{}", i + 1));
        std::fs::create_dir_all(to.join("snapshots")).unwrap();
        std::fs::copy(from.join("report.json"), to.join("report.json")).unwrap();
        for name in files_in(&from.join("snapshots")) {
            std::fs::copy(
                from.join("snapshots").join(&name),
                to.join("snapshots").join(&name),
            )
            .unwrap();
        }
        dirs.push(to);
    }
    (tmp, dirs)
}

fn edit_report(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("report.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

fn merge_at(dirs: &[PathBuf]) -> Result<Merged, MergeError> {
    merge(dirs, Path::new("artifacts"))
}

/// The cases a budgeted run (the ISA emulator) left out travel in every shard's record, so the
/// merged snapshot keeps their committed rows and its header says how many, as an unsharded run's
/// does.
#[test]
fn merged_snapshots_carry_the_cases_a_budget_left_out() {
    let (_tmp, dirs) = copy_of_shards();
    let merged = merge_at(&dirs).unwrap();
    let (key, _) = merged
        .snapshots
        .first()
        .expect("the shards recorded snapshots");
    assert_eq!(
        key.left_out, None,
        "the simulated device leaves nothing out"
    );
    let suite = key.suite.clone();
    let left_out = LeftOut {
        by: crate::runner::budget::Interpreter::IsaEmulator,
        cases: [format!("{suite}/a-large-layer/M=4096")].into(),
    };
    for dir in &dirs {
        let record = serde_json::to_value(&left_out).unwrap();
        edit_report(dir, |json| {
            json["shard"]["left_out"] = serde_json::json!({ suite.clone(): record });
        });
    }
    let merged = merge_at(&dirs).unwrap();
    let (key, _) = merged
        .snapshots
        .iter()
        .find(|(k, _)| k.suite == suite)
        .unwrap();
    assert_eq!(key.left_out.as_ref(), Some(&left_out));
    assert!(
        key.description().ends_with(&left_out.clause()),
        "{}",
        key.description()
    );
}

#[test]
fn a_missing_shard_is_refused_naming_which() {
    let shards = runs().shards();
    let e = merge_at(&[shards[0].clone(), shards[2].clone()]).unwrap_err();
    assert!(
        matches!(e, MergeError::Missing { present: 2, count: 3, ref missing } if *missing == [2])
    );
    assert_eq!(e.to_string(), "2 of 3 shards present: missing 2/3");
}

#[test]
fn a_shard_given_twice_is_refused_as_overlapping() {
    let shards = runs().shards();
    let e = merge_at(&[shards[0].clone(), shards[1].clone(), shards[1].clone()]).unwrap_err();
    assert!(
        matches!(
            e,
            MergeError::Overlap {
                index: 2,
                count: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("shard 2/3 is given twice: "),
        "{e}"
    );
}

#[test]
fn a_case_in_two_shards_is_refused_naming_it() {
    let (_tmp, dirs) = copy_of_shards();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("report.json")).unwrap())
            .unwrap();
    let stolen = report["shard"]["positions"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    edit_report(&dirs[1], |j| {
        j["shard"]["positions"]
            .as_object_mut()
            .unwrap()
            .insert(stolen.clone(), 0.into());
    });
    let e = merge_at(&dirs).unwrap_err();
    assert!(
        matches!(&e, MergeError::OverlapCase { case, .. } if *case == stolen),
        "{e}"
    );
}

#[test]
fn shards_of_different_targets_suites_or_commits_are_refused() {
    for (field, key, value) in [
        ("target", None, serde_json::json!("sm_100")),
        ("suites", Some("suites"), serde_json::json!(["edges"])),
        (
            "commit",
            Some("commit"),
            serde_json::json!("0123456789abcdef"),
        ),
        ("shard count N", Some("count"), serde_json::json!(4)),
        (
            "selection digest",
            Some("selection"),
            serde_json::json!("00"),
        ),
    ] {
        let (_tmp, dirs) = copy_of_shards();
        edit_report(&dirs[2], |j| match key {
            None => j[field] = value.clone(),
            Some(k) => j["shard"][k] = value.clone(),
        });
        let e = merge_at(&dirs).unwrap_err();
        let MergeError::Different { field: f, dir, .. } = &e else {
            panic!("{field}: expected a difference, got {e}");
        };
        assert_eq!((*f, dir), (field, &dirs[2]), "{e}");
        assert!(e.to_string().contains("shards of one run share it"), "{e}");
    }
}

#[test]
fn an_unsharded_report_or_no_folder_is_not_merged() {
    let e = merge_at(&[runs().whole()]).unwrap_err();
    assert!(e.to_string().contains("it has no `shard` object"), "{e}");
    assert!(matches!(merge_at(&[]).unwrap_err(), MergeError::NoShards));
    let e = merge_at(&[runs().root.path().join("nowhere")]).unwrap_err();
    assert!(matches!(e, MergeError::Read { .. }), "{e}");
}

#[test]
fn recording_snapshots_from_one_shard_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let shard = Some(ShardSpec { index: 1, count: 2 });
    let e = run_simulated(options(tmp.path(), tmp.path(), SnapshotMode::Update, shard))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--shard 1/2 with --snapshot update"), "{e}");
    assert!(e.contains("w4a16 merge"), "{e}");
}

/// A shard's folder read back with the report folder's own path taken out (the shard record
/// and any failure detail name it) and the timing left out: what must not depend on `--gpus`.
fn untimed_folder(dir: &Path) -> BTreeMap<String, String> {
    let own = dir.display().to_string();
    let mut got = BTreeMap::new();
    got.insert(
        "report.json".to_string(),
        untimed(&dir.join("report.json")).replace(&own, "DIR"),
    );
    got.insert(
        "summary.md".to_string(),
        untimed_md(&dir.join("summary.md")).replace(&own, "DIR"),
    );
    for sub in [dir.to_path_buf(), snapshot_part_dir(dir)] {
        for e in std::fs::read_dir(&sub).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_file() && name != "report.json" && name != "summary.md" {
                let text = std::fs::read_to_string(&path).unwrap().replace(&own, "DIR");
                got.insert(name, text);
            }
        }
    }
    got
}

/// `--gpus` through the run arm, with `--shard` and `--reference`: a shard dealt over two
/// simulated GPUs writes what it writes on one (reports, snapshot rows, comparisons), and a
/// backend without GPUs to bind ignores `--gpus all` loudly and gives the same files too.
#[test]
fn a_shard_on_several_gpus_writes_what_it_writes_on_one() {
    let runs = runs();
    for (i, devices) in [(2, Some(2)), (3, None)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = options(
            tmp.path(),
            &runs.snaps(),
            SnapshotMode::Check,
            Some(ShardSpec {
                index: i,
                count: SHARDS,
            }),
        );
        opts.gpus = Gpus::All;
        opts.reference = Some(ReferenceChoice::Cpu);
        let end = cli_run::run_with(opts, &cli_run::SimulatedDevices { count: devices }).unwrap();
        assert!(end.differing_snapshots.is_empty(), "shard {i}, {devices:?}");
        let one = untimed_folder(&runs.shard(i));
        let many = untimed_folder(tmp.path());
        assert!(one.len() >= 4, "{:?}", one.keys());
        assert_eq!(
            many.keys().collect::<Vec<_>>(),
            one.keys().collect::<Vec<_>>()
        );
        for (name, text) in &one {
            assert_eq!(
                &many[name], text,
                "{name} of shard {i} on {devices:?} devices"
            );
        }
    }
}

/// Bad `--gpus` values met at the run arm are typed errors naming the value and what was
/// expected, before any case runs: an ordinal beyond the devices seen, one that does not open,
/// and ordinals on a backend without GPUs to bind.
#[test]
fn gpus_the_backend_cannot_bind_are_refused_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    for (gpus, devices, says) in [
        (
            Gpus::List(vec![0, 3]),
            Some(2),
            "--gpus: no a simulated device device 3 (2 present, ordinals 0..2)",
        ),
        (
            Gpus::List(vec![5]),
            Some(2),
            "--gpus 5: device 5 does not open: no simulated device 5 (2 present)",
        ),
        (
            Gpus::List(vec![0, 1]),
            None,
            "--gpus 0,1: sm_90 runs on simulated (a simulated device has no GPUs to bind); only CUDA and ROCm devices are bound",
        ),
    ] {
        let mut opts = options(tmp.path(), tmp.path(), SnapshotMode::Check, None);
        opts.gpus = gpus.clone();
        let e = cli_run::run_with(opts, &cli_run::SimulatedDevices { count: devices })
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(says), "{gpus}: {e}");
        assert!(
            !tmp.path().join("report.json").exists(),
            "{gpus}: refused before running"
        );
    }
}
