//! The harness: devices, validation at the launch boundary, selection, the case runner,
//! verdicts, snapshots and reports.

pub mod bench;
pub mod cases;
pub mod codeobject;
pub mod config;
pub mod device;
pub mod launch;
pub mod model_check;
pub mod mutants;
pub mod perf;
pub mod require;
pub mod runner;
pub mod select;
pub mod tensor;
pub mod validate;

#[cfg(test)]
mod named_tests {
    use crate::cases::{CarrierMode, Mode, RowPadding, ViewLayout};
    use crate::codeobject::gates::Gate;
    use crate::config::PrefillDequant;
    use crate::runner::Outcome;
    use crate::runner::sanitize::SanitizerTool;
    use crate::select::LayerKernel;
    use crate::tensor::ElemType;

    w4a16_reference::named_enum_tests! {
        row_padding: RowPadding,
        view_layout: ViewLayout,
        carrier_mode: CarrierMode,
        suppression_mode: Mode,
        gate: Gate,
        prefill_dequant: PrefillDequant,
        sanitizer_tool: SanitizerTool,
        layer_kernel: LayerKernel,
        elem_type: ElemType;
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
