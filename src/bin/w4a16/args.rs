//! Typed command-line values: every closed choice (targets, dtypes, sanitizer tools) is parsed by
//! clap against its list, read from the type that owns the names, so a wrong value is clap's own
//! error listing the choices, and `--help` shows them.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use w4a16_kernels::RunTarget;
use w4a16_reference::Named;

/// `--target` where the GPU found here may choose: `auto` or a run target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetArg {
    Auto,
    Run(RunTarget),
}

impl TargetArg {
    /// The target asked for; `None` for `auto`.
    pub fn run_target(self) -> Option<RunTarget> {
        match self {
            TargetArg::Auto => None,
            TargetArg::Run(t) => Some(t),
        }
    }

    /// The spelling of the command line (`auto`, `sm_90`, `gfx1151-emu`).
    pub fn name(self) -> String {
        match self {
            TargetArg::Auto => "auto".to_string(),
            TargetArg::Run(t) => t.name(),
        }
    }
}

/// Every run target as a choice, natives with their aliases (`sm90`).
fn run_target_values() -> impl Iterator<Item = PossibleValue> {
    RunTarget::all()
        .into_iter()
        .map(|t| PossibleValue::new(t.name()).aliases(t.aliases().iter().copied()))
}

/// `--target` of the commands that run on a GPU: `auto` or any run target.
pub fn target_or_auto() -> impl TypedValueParser<Value = TargetArg> {
    let values = std::iter::once(PossibleValue::new("auto")).chain(run_target_values());
    PossibleValuesParser::new(values).try_map(|s: String| match s.as_str() {
        "auto" => Ok(TargetArg::Auto),
        _ => RunTarget::parse(&s)
            .map(TargetArg::Run)
            .ok_or_else(|| format!("not a target: {s:?}")),
    })
}

/// `--target` of the host-side commands (select, bench --cpu-side): a run target, no `auto`.
pub fn run_target() -> impl TypedValueParser<Value = RunTarget> {
    PossibleValuesParser::new(run_target_values())
        .try_map(|s: String| RunTarget::parse(&s).ok_or_else(|| format!("not a target: {s:?}")))
}

/// A value of a [`Named`] enum, by its name or one of its aliases.
pub fn named<T: Named + Send + Sync>() -> impl TypedValueParser<Value = T> {
    let values = T::ALL
        .iter()
        .map(|v| PossibleValue::new(v.name()).aliases(v.aliases().iter().copied()));
    PossibleValuesParser::new(values)
        .try_map(|s: String| T::parse(&s).ok_or_else(|| format!("not a {}: {s:?}", T::TYPE_NAME)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use w4a16_kernels::Target;
    use w4a16_reference::ActDtype;

    #[derive(Parser, Debug)]
    struct T {
        #[arg(long, value_parser = target_or_auto(), default_value = "auto")]
        target: TargetArg,
        #[arg(long, value_parser = run_target())]
        host: Option<RunTarget>,
        #[arg(long, value_parser = named::<ActDtype>())]
        dtype: Option<ActDtype>,
    }

    fn parse(args: &[&str]) -> Result<T, clap::Error> {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
    }

    #[test]
    fn every_target_name_and_alias_parses() {
        assert_eq!(parse(&[]).unwrap().target, TargetArg::Auto);
        for t in RunTarget::all() {
            assert_eq!(
                parse(&["--target", &t.name()]).unwrap().target,
                TargetArg::Run(t)
            );
            assert_eq!(parse(&["--host", &t.name()]).unwrap().host, Some(t));
        }
        assert_eq!(
            parse(&["--target", "sm90"]).unwrap().target,
            TargetArg::Run(RunTarget::native(Target::Sm90))
        );
        assert_eq!(
            parse(&["--dtype", "bfloat16"]).unwrap().dtype,
            Some(ActDtype::Bf16)
        );
    }

    /// A wrong value is clap's error, which lists the choices.
    #[test]
    fn a_wrong_value_lists_the_choices() {
        let e = parse(&["--target", "gfx1152"]).unwrap_err().to_string();
        assert!(e.contains("invalid value 'gfx1152'"), "{e}");
        for name in RunTarget::known_names() {
            assert!(e.contains(&name), "{name} missing from: {e}");
        }
        assert!(e.contains("auto"), "{e}");
        let e = parse(&["--host", "auto"]).unwrap_err().to_string();
        assert!(e.contains("invalid value 'auto'"), "{e}");
        let e = parse(&["--dtype", "f32"]).unwrap_err().to_string();
        assert!(e.contains("[possible values: f16, bf16]"), "{e}");
    }
}
