//! `w4a16 cases`: the suites and their case counts.

use super::exit::{CliError, Status};
use std::path::PathBuf;
use w4a16_harness::runner::cli_run::load_with_dir;

pub fn cases(cases: Option<PathBuf>) -> Result<Status, CliError> {
    let (_, set) = load_with_dir(cases)?;
    println!(
        "{:<14} {:>7} {:>7} {:>5} {:>10}  description",
        "suite", "cases", "shapes", "M", "providers"
    );
    for s in set.suites() {
        println!(
            "{:<14} {:>7} {:>7} {:>5} {:>10}  {}",
            s.name, s.cases, s.shapes, s.batch_sizes, s.providers, s.description
        );
    }
    println!("{:<14} {:>7}", "total", set.total_cases());
    Ok(Status::Passed)
}
