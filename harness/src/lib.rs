//! The harness: the case runner, verdicts, snapshots, reports, benchmarks and perf mode, on top
//! of selection and the kernel configuration (`w4a16-select`), the case files (`w4a16-cases`),
//! code-object inspection (`w4a16-codeobject`) and the devices with their launch-boundary
//! validation (`w4a16-device`). Each is named by its own crate; nothing is re-exported here.

pub mod bench;
pub mod block_coverage;
pub mod model_check;
pub mod mutants;
pub mod perf;
pub mod report;
pub mod require;
pub mod runner;

#[cfg(test)]
mod named_tests {
    use crate::runner::Outcome;
    use crate::runner::verdict::SanitizerTool;

    w4a16_reference::named_enum_tests! {
        sanitizer_tool: SanitizerTool;
        names_only { outcome: Outcome }
    }

    /// A verdict's outcome has two spellings on disk: its name in snapshot rows and Markdown,
    /// its serde form (a naming rule, not a table) in report.json.
    #[test]
    fn outcomes_keep_both_spellings() {
        let names: Vec<(&str, String)> = Outcome::ALL
            .iter()
            .map(|o| (o.name(), serde_json::to_string(o).unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("pass", "\"pass\""),
                ("refused", "\"refused\""),
                ("xfail", "\"expected-fail\""),
                ("FAIL", "\"fail\""),
                ("FAULT", "\"fault\""),
                ("XPASS", "\"unexpected-pass\""),
                ("EXPIRED", "\"expired\""),
                ("skip", "\"skip\""),
            ]
            .map(|(n, j)| (n, j.to_string()))
        );
    }
}
