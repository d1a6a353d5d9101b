//! `w4a16 merge DIR…`: the shards' report folders combined by [`shard::merge_command`].

use super::args::{self, SnapshotArg};
use super::exit::{CliError, Status};
use std::path::PathBuf;
use w4a16_harness::runner::{shard, snapshot};

/// `w4a16 merge`'s options.
#[derive(clap::Args)]
pub struct MergeArgs {
    /// The shards' report folders, one per shard, in any order.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where the merged reports go (`snapshots/` inside it gets the merged snapshot files).
    #[arg(long, alias = "out", default_value = args::REPORT_DIR)]
    report_dir: PathBuf,
    /// Compare (`check`) or record (`update`) the merged verdict snapshots, as `run` does.
    #[arg(long, value_enum, default_value_t = SnapshotArg::Off)]
    snapshot: SnapshotArg,
    /// Folder of the verdict snapshots (default: `snapshots/` beside the cases folder).
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
}

pub fn merge(args: MergeArgs, cases: Option<PathBuf>) -> Result<Status, CliError> {
    let snapshot = match args.snapshot.mode() {
        None => None,
        Some(mode) => Some((
            mode,
            match args.snapshots {
                Some(dir) => dir,
                None => snapshot::snapshot_dir(None, &w4a16_cases::locate(cases)?),
            },
        )),
    };
    let end = shard::merge_command(
        &args.dirs,
        &args.report_dir,
        snapshot.as_ref().map(|(m, d)| (*m, d.as_path())),
    )?;
    Ok(Status::passed_if(end.passed()))
}
