//! Each `[suite]` and its cases: the suite's name, then its `[[sweep]]`s, its `[[case]]` entries
//! and its `[[moe_sweep]]`s, in that order, each case id once.

use std::collections::{BTreeMap, HashMap};

use w4a16_reference::layer::LayerShape;

use super::point::{Point, build_case};
use super::rules::{check_shape, exact_too_large, group_for, unsupported_reason};
use super::sweep::UNSUPPORTED_HINT;
use super::{Parsed, moe_sweep, origin, sweep, valid_name};
use crate::error::CaseFileError;
use crate::schema::{ExplicitCaseRaw, GroupSpec, SuiteRaw};
use crate::{Case, CaseSet, NamedShape, Suite};

/// What an `isa_emulator_max_macs` of 0 is told.
const POSITIVE_MACS: &str =
    "expected a positive number of multiply-adds (M·N·K), e.g. 1048576 for 2^20";

/// Every file's suite, named once, sorted by name; a file without `[suite]` has no cases.
pub(super) fn add_suites(parsed: &[Parsed], set: &mut CaseSet) -> Result<(), CaseFileError> {
    let mut suite_from: HashMap<String, String> = HashMap::new();
    for f in parsed {
        let Some(suite) = &f.raw.suite else {
            if !f.raw.moe_sweep.is_empty() {
                return Err(f.err(
                    "moe_sweep[0]",
                    "sweeps need a [suite] table in the same file",
                ));
            }
            if !f.raw.sweep.is_empty() {
                return Err(f.err("sweep[0]", "sweeps need a [suite] table in the same file"));
            }
            if !f.raw.case.is_empty() {
                return Err(f.err("case[0]", "cases need a [suite] table in the same file"));
            }
            continue;
        };
        if !valid_name(&suite.name, false) {
            return Err(f.err(
                "suite.name",
                format!(
                    "\"{}\" is not a valid suite name (a-z, 0-9, -, _)",
                    suite.name
                ),
            ));
        }
        if let Some(first) = suite_from.get(&suite.name) {
            return Err(f.err(
                "suite.name",
                format!("suite \"{}\" already defined in {first}", suite.name),
            ));
        }
        suite_from.insert(suite.name.clone(), origin(f.path, "suite"));
        let expanded = expand_suite(f, suite, set)?;
        set.suites.push(expanded);
    }
    set.suites.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(())
}

/// A suite's cases as they are expanded, each id once, with the entry that first gave it.
#[derive(Default)]
struct SuiteCases {
    cases: Vec<Case>,
    seen: HashMap<String, String>,
    /// A sweep's `isa_emulator_max_macs`, by the ids it gave first.
    sweep_budgets: BTreeMap<String, u64>,
}

impl SuiteCases {
    /// Adds a swept case unless an earlier entry gave its id (sweeps may overlap); the sweep's
    /// emulator budget goes with it.
    fn add_swept(&mut self, case: Case, here: &str, budget: Option<u64>) {
        if self.seen.contains_key(&case.id) {
            return;
        }
        self.seen.insert(case.id.clone(), here.to_owned());
        if let Some(max) = budget {
            self.sweep_budgets.insert(case.id.clone(), max);
        }
        self.cases.push(case);
    }

    /// Adds a `[[case]]` entry's case, refusing an id an earlier entry gave: a listed case is
    /// written on purpose, so a duplicate is a mistake.
    fn add_listed(&mut self, f: &Parsed, case: Case, here: String) -> Result<(), CaseFileError> {
        if let Some(first) = self.seen.get(&case.id) {
            return Err(f.err(
                here,
                format!("duplicate case id \"{}\" (also from {first})", case.id),
            ));
        }
        self.seen.insert(case.id.clone(), here);
        self.cases.push(case);
        Ok(())
    }
}

fn expand_suite(f: &Parsed, suite: &SuiteRaw, set: &CaseSet) -> Result<Suite, CaseFileError> {
    let mut out = SuiteCases::default();
    for (i, sw) in f.raw.sweep.iter().enumerate() {
        let here = format!("sweep[{i}]");
        if sw.isa_emulator_max_macs == Some(0) {
            return Err(f.err(format!("{here}.isa_emulator_max_macs"), POSITIVE_MACS));
        }
        for case in sweep::expand_sweep(f, suite, sw, &here, set)? {
            out.add_swept(case, &here, sw.isa_emulator_max_macs);
        }
    }
    for (i, c) in f.raw.case.iter().enumerate() {
        let here = format!("case[{i}]");
        let case = listed_case(f, suite, c, &here, set)?;
        out.add_listed(f, case, here)?;
    }
    for (i, sw) in f.raw.moe_sweep.iter().enumerate() {
        let here = format!("moe_sweep[{i}]");
        for case in moe_sweep::expand_moe_sweep(f, suite, sw, &here, set)? {
            out.add_swept(case, &here, None);
        }
    }
    Ok(Suite {
        name: suite.name.clone(),
        description: suite.description.clone(),
        file: f.path.to_path_buf(),
        allow_unsupported: suite.allow_unsupported,
        on_request: suite.on_request,
        isa_emulator_max_macs: match suite.isa_emulator_max_macs {
            Some(0) => return Err(f.err("suite.isa_emulator_max_macs", POSITIVE_MACS)),
            budget => budget,
        },
        isa_emulator_sweep_budgets: out.sweep_budgets,
        cases: out.cases,
    })
}

/// A `[[case]]` entry's shape: a named shape, or an inline `k`, `n` and group size.
fn listed_shape(
    f: &Parsed,
    c: &ExplicitCaseRaw,
    here: &str,
    set: &CaseSet,
) -> Result<(String, LayerShape), CaseFileError> {
    match (&c.shape, c.k, c.n) {
        (Some(name), None, None) => match set.shapes.iter().find(|s| &s.name == name) {
            Some(s) => Ok((s.name.clone(), s.shape)),
            None => Err(f.err(
                format!("{here}.shape"),
                format!("no shape named \"{name}\""),
            )),
        },
        (Some(_), _, _) => Err(f.err(
            format!("{here}.k"),
            "give either shape or k and n, not both",
        )),
        (None, Some(k), Some(n)) => {
            let group = match c.group {
                Some(GroupSpec::Size(g)) => g,
                Some(GroupSpec::Channelwise) => k.0,
                _ => {
                    return Err(f.err(
                        format!("{here}.group"),
                        "an inline shape needs a group size (a number or \"channelwise\")",
                    ));
                }
            };
            if let Err(e) = check_shape(k.0, group) {
                return Err(f.err(format!("{here}.{}", e.key()), e.to_string()));
            }
            Ok((
                format!("k{}-n{}", k.0, n.0),
                LayerShape::new(n.0, k.0, group),
            ))
        }
        (None, None, _) => Err(f.err(
            format!("{here}.shape"),
            "required key is missing (a shape name, or k and n)",
        )),
        (None, Some(_), None) => Err(f.err(
            format!("{here}.n"),
            "required key is missing (inline shapes need k and n)",
        )),
    }
}

/// The case a `[[case]]` entry names, checked like a sweep's point but refused rather than
/// skipped where the producer does not apply.
fn listed_case(
    f: &Parsed,
    suite: &SuiteRaw,
    c: &ExplicitCaseRaw,
    here: &str,
    set: &CaseSet,
) -> Result<Case, CaseFileError> {
    let (name, base) = listed_shape(f, c, here, set)?;
    let named = NamedShape {
        name: name.clone(),
        shape: base,
        model: None,
    };
    let group = group_for(c.group.unwrap_or(GroupSpec::Shape), &named)
        .map_err(|e| f.err(format!("{here}.group"), e.to_string()))?;
    let act_order = c.act_order.unwrap_or(false);
    if !suite.allow_unsupported
        && let Some(why) = unsupported_reason(base.k, base.n, c.symmetry, act_order)
    {
        let axis = match why.axis() {
            "shapes" if c.shape.is_some() => "shape",
            "shapes" => "k",
            axis => axis,
        };
        return Err(f.err(format!("{here}.{axis}"), format!("{why}{UNSUPPORTED_HINT}")));
    }
    if let Some(msg) = exact_too_large(c.class, base.k) {
        return Err(f.err(format!("{here}.class"), msg));
    }
    let producer = c.producer.unwrap_or(crate::DEFAULT_PRODUCER);
    if !crate::producer_applies_to(producer, c.symmetry) {
        return Err(f.err(
            format!("{here}.producer"),
            format!(
                "producer {} does not apply to {} layers",
                producer.name(),
                c.symmetry.name()
            ),
        ));
    }
    Ok(build_case(
        &suite.name,
        &name,
        LayerShape::new(base.n, base.k, group),
        Point {
            m: c.m.0,
            dtype: c.dtype,
            symmetry: c.symmetry,
            class: c.class,
            padding: c.padding.unwrap_or_default(),
            bias: c.bias.unwrap_or(false),
            act_order,
            producer,
            x_layout: c.x_layout.unwrap_or_default(),
            y_layout: c.y_layout.unwrap_or_default(),
            carrier: c.carrier.unwrap_or_default(),
            moe: None,
        },
    ))
}
