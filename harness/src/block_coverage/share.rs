//! The CI share of the ISA-emulator suites (`coverage/<gfx>.ci-share.toml`): the fewest
//! emulator instructions' worth of cases that still execute every block the full suites
//! execute on that target, chosen from one recording run that read each case's blocks on its
//! own. `cargo test` runs the share on every gfx target and fails when it no longer executes a
//! block of the record (coverage dropped) or when one of its verdicts differs from the
//! committed snapshot row; the full suites run on a schedule and on AMD runners
//! (docs/block-coverage.md, "The CI share").
//!
//! The choice is the greedy weighted set cover: repeatedly the case with the most blocks not yet
//! covered per emulator instruction it costs (instructions counted once per wave: deterministic,
//! unlike seconds), ties to the earlier case in suite order; then each suite that has no case
//! yet gets its cheapest, so every CI suite's snapshot keeps rows checked in CI.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use w4a16_device::BlockCoverage;

/// One executed block: the code object (by kernel), the entry, the block's offset in it.
pub type BlockKey = (String, String, u64);

/// The executed blocks of `coverage`.
pub fn executed_blocks(coverage: &BlockCoverage) -> BTreeSet<BlockKey> {
    coverage
        .entries()
        .flat_map(|(c, e)| {
            e.blocks
                .iter()
                .filter(|b| b.executed)
                .map(|b| (c.kernel.clone(), e.entry.clone(), b.offset))
        })
        .collect()
}

/// One case of a recording run, read on its own.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseCoverage {
    pub suite: String,
    pub case_id: String,
    /// Emulator instructions (once per wave) the case executed.
    pub wave_instructions: u64,
    pub blocks: BTreeSet<BlockKey>,
}

/// One case of the share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareCase {
    pub suite: String,
    pub id: String,
    /// Blocks it executes that no case chosen before it does (0: its suite's representative).
    pub adds: usize,
    pub wave_instructions: u64,
}

/// A target's CI share, as committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub target: String,
    /// Said when the recording run left cases out (as the record's `subset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset: Option<String>,
    /// Blocks the recorded cases execute together (all of them: the share executes each).
    pub blocks: usize,
    /// Cases recorded, and their emulator instructions.
    pub recorded_cases: usize,
    pub recorded_wave_instructions: u64,
    /// The share's emulator instructions (its cost in CI).
    pub wave_instructions: u64,
    #[serde(rename = "case")]
    pub cases: Vec<ShareCase>,
}

/// `coverage/<gfx>.ci-share.toml` under the checkout at `root`.
pub fn share_path(root: &Path, target: &str) -> PathBuf {
    root.join(super::RECORD_DIR)
        .join(format!("{target}.ci-share.toml"))
}

/// Why a share file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ShareFileError {
    #[error("{}: {source}; record it with `w4a16 coverage --target <gfx>`", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
}

impl Share {
    /// Chooses the share of `cases` (in suite order) as the module docs say.
    pub fn choose(target: &str, subset: Option<String>, cases: &[CaseCoverage]) -> Share {
        let mut index: BTreeMap<&BlockKey, usize> = BTreeMap::new();
        for b in cases.iter().flat_map(|c| &c.blocks) {
            let next = index.len();
            index.entry(b).or_insert(next);
        }
        let sets: Vec<Vec<usize>> = cases
            .iter()
            .map(|c| c.blocks.iter().map(|b| index[b]).collect())
            .collect();
        let mut covered = vec![false; index.len()];
        let mut left = index.len();
        let mut taken = vec![false; cases.len()];
        let mut chosen = Vec::new();
        while left > 0 {
            let gain = |i: usize| sets[i].iter().filter(|&&b| !covered[b]).count();
            // Most new blocks per instruction; compared as gain_a * cost_b > gain_b * cost_a.
            let mut best: Option<(usize, usize)> = None;
            for i in (0..cases.len()).filter(|&i| !taken[i]) {
                let g = gain(i);
                if g == 0 {
                    continue;
                }
                let better = best.is_none_or(|(bi, bg)| {
                    g as u128 * cost(&cases[bi]) as u128 > bg as u128 * cost(&cases[i]) as u128
                });
                if better {
                    best = Some((i, g));
                }
            }
            let Some((i, g)) = best else { break };
            for &b in &sets[i] {
                covered[b] = true;
            }
            left -= g;
            taken[i] = true;
            chosen.push((i, g));
        }
        let suites: Vec<&str> = cases.iter().fold(Vec::new(), |mut v, c| {
            if !v.contains(&c.suite.as_str()) {
                v.push(c.suite.as_str());
            }
            v
        });
        for s in suites {
            if chosen.iter().any(|&(i, _)| cases[i].suite == s) {
                continue;
            }
            let cheapest = (0..cases.len())
                .filter(|&i| cases[i].suite == s)
                .min_by_key(|&i| cost(&cases[i]));
            if let Some(i) = cheapest {
                chosen.push((i, 0));
            }
        }
        // Committed in suite order, so a re-recording diffs by case, not by greedy step.
        let mut in_order = chosen.clone();
        in_order.sort_by_key(|&(i, _)| i);
        Share {
            target: target.to_string(),
            subset,
            blocks: index.len(),
            recorded_cases: cases.len(),
            recorded_wave_instructions: cases.iter().map(|c| c.wave_instructions).sum(),
            wave_instructions: chosen
                .iter()
                .map(|&(i, _)| cases[i].wave_instructions)
                .sum(),
            cases: in_order
                .into_iter()
                .map(|(i, adds)| ShareCase {
                    suite: cases[i].suite.clone(),
                    id: cases[i].case_id.clone(),
                    adds,
                    wave_instructions: cases[i].wave_instructions,
                })
                .collect(),
        }
    }

    /// The file's text: a header saying what it is and how it was made, then the fields.
    pub fn to_toml(&self) -> String {
        let header = format!(
            "# The CI share of the ISA-emulator suites on {t}: the cases `cargo test` runs on\n\
             # {t}'s ISA emulator (tests/block_coverage.rs), chosen to execute every block the\n\
             # full suites execute ({b} blocks) for {pct:.1} % of their emulator instructions.\n\
             # Written by `w4a16 coverage --target {t}` with coverage/{t}.json; do not edit.\n\n",
            t = self.target,
            b = self.blocks,
            pct = 100.0 * self.wave_instructions as f64
                / self.recorded_wave_instructions.max(1) as f64,
        );
        header + &toml::to_string(self).expect("a share serialises")
    }

    /// Reads `path`.
    pub fn read(path: &Path) -> Result<Share, ShareFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ShareFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ShareFileError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The share's cases of `suite`, by id.
    pub fn ids_of<'a>(&'a self, suite: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.cases
            .iter()
            .filter(move |c| c.suite == suite)
            .map(|c| c.id.as_str())
    }
}

/// A case's cost for the choice: a case that executed nothing still costs one.
fn cost(c: &CaseCoverage) -> u64 {
    c.wave_instructions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(suite: &str, id: &str, cost: u64, blocks: &[u64]) -> CaseCoverage {
        CaseCoverage {
            suite: suite.into(),
            case_id: id.into(),
            wave_instructions: cost,
            blocks: blocks
                .iter()
                .map(|&o| ("k".to_string(), "e".to_string(), o))
                .collect(),
        }
    }

    #[test]
    fn the_share_covers_every_block_cheaply_and_keeps_a_case_per_suite() {
        let cases = [
            case("smoke", "a", 100, &[1, 2, 3]),
            case("smoke", "b", 10, &[1, 2]),
            case("kernels", "c", 10, &[3]),
            case("kernels", "d", 1000, &[1, 2, 3, 4]),
            case("kernels", "e", 5, &[4]),
            case("edges", "f", 50, &[2]),
            case("edges", "g", 40, &[1]),
        ];
        let share = Share::choose("gfx1100", None, &cases);
        let ids: Vec<&str> = share.cases.iter().map(|c| c.id.as_str()).collect();
        // b, c and e cover the four blocks for 25 instructions; edges' cheapest joins with 0.
        assert_eq!(ids, ["b", "c", "e", "g"]);
        assert_eq!(share.blocks, 4);
        assert_eq!(share.wave_instructions, 10 + 10 + 5 + 40);
        assert_eq!(share.recorded_wave_instructions, 1215);
        let adds: Vec<usize> = share.cases.iter().map(|c| c.adds).collect();
        assert_eq!(adds, [2, 1, 1, 0]);
        let again = Share::read_str(&share.to_toml());
        assert_eq!(again, share);
        assert_eq!(share.ids_of("kernels").collect::<Vec<_>>(), ["c", "e"]);
    }

    #[test]
    fn cases_that_execute_nothing_new_are_left_out() {
        let cases = [
            case("smoke", "a", 10, &[1]),
            case("smoke", "b", 10, &[1]),
            case("smoke", "c", 1, &[]),
        ];
        let share = Share::choose("gfx1201", None, &cases);
        assert_eq!(share.cases.len(), 1);
        assert_eq!(share.cases[0].id, "a");
    }

    impl Share {
        fn read_str(text: &str) -> Share {
            toml::from_str(text).unwrap()
        }
    }
}
