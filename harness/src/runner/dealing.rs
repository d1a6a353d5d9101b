//! How a run's cases are dealt to workers (and devices): the cases of one layer stay together
//! ([`by_layer`]), so a worker makes each layer's weights once, and whole layers go to the
//! least-loaded worker by a time model of each case ([`case_cost`], [`deal`]).

use super::execute::{Mode, ReferenceChoice};
use super::session::mode_for_suite;
use std::collections::BTreeMap;
use w4a16_cases::Case;

/// A rough time model of a case (seconds, roughly, on an H200 host with 14 workers), by where
/// its reference is formed. The workers get whole layers by it ([`deal`]).
///
/// - CPU reference: the layer's weights are read for data, conversion and verification; the
///   batch adds verification work up to the sampled regime (Freivalds above it).
/// - GPU reference: every element is judged on the device, so the batch's cost keeps growing:
///   the output's judging (M·N) and the kernels and f64 products (M·N·K). X is drawn on the
///   same device (its M·K term was the largest before). Fitted to the field's per-layer times
///   (`W4A16_CASE_TIMES`, H200, 14 workers): a 13 % median error per layer; a layer's one
///   conversion (N·K) added nothing to the fit, its batch sizes being the same in every layer.
/// - A dense case of a differential suite with the GPU reference runs every path that takes it,
///   twice, and the dequant copy: a fixed part, one per weight (the copy, the weights staged for
///   each launch) and one per multiply-add (above all the fallback's two runs). Fitted to the
///   per-group worker-seconds of other-shapes on the H200 (bench/cost-per-suite-sm_90.md: strided
///   X at M 6 and 33, the range-edge classes at M 1, 6 and 256, the 70B-class layers at M 1 to
///   2048), each group's mean within 10 %.
pub fn case_cost(case: &Case, reference: ReferenceChoice) -> f64 {
    let (m, n, k) = (case.m as f64, case.shape.n as f64, case.shape.k as f64);
    let differential = mode_for_suite(&case.suite) == Mode::Differential && case.moe.is_none();
    match reference {
        ReferenceChoice::Cpu => 1e-9 * n * k * (1.0 + m.min(256.0) / 64.0),
        ReferenceChoice::Gpu if differential => 0.78 + 1.4e-9 * n * k + 1.07e-10 * m * n * k,
        ReferenceChoice::Gpu => 2.9e-9 * m * n + 3.1e-12 * m * n * k,
    }
}

/// Indices of cases grouped by their layers' keys ([`Case::layer_key`]: the cases that share
/// one layer's weights), groups in order of first appearance.
pub fn by_layer<K: Ord>(layer_keys: impl IntoIterator<Item = K>) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index: BTreeMap<K, usize> = BTreeMap::new();
    for (i, key) in layer_keys.into_iter().enumerate() {
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    groups
}

/// Deals groups of cases to `jobs` shards, largest first onto the least-loaded shard (LPT):
/// a layer's cases stay together, and the run ends when the busiest shard does.
pub fn deal(groups: Vec<Vec<usize>>, cost: impl Fn(usize) -> f64, jobs: usize) -> Vec<Vec<usize>> {
    let mut weighted: Vec<(f64, Vec<usize>)> = groups
        .into_iter()
        .map(|g| (g.iter().map(|&i| cost(i)).sum(), g))
        .collect();
    weighted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let jobs = jobs.max(1);
    let mut shards: Vec<(f64, Vec<usize>)> = vec![(0.0, Vec::new()); jobs];
    for (c, g) in weighted {
        let lightest = shards
            .iter_mut()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("at least one shard");
        lightest.0 += c;
        lightest.1.extend(g);
    }
    shards
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_of_one_layer_group_together_in_first_seen_order() {
        let ids = [
            "field/a/M=1/f16/sym/g128/realistic",
            "field/a/M=1/bf16/sym/g128/realistic",
            "field/a/M=64/f16/sym/g128/realistic",
            "field/b/M=1/f16/sym/g128/realistic",
            "field/a/M=64/bf16/sym/g128/realistic",
        ];
        let keys = ids.map(w4a16_reference::data::layer_key);
        assert_eq!(by_layer(keys), vec![vec![0, 2], vec![1, 4], vec![3]]);
    }

    /// The differential model against the measured per-group means it was fitted to (other-shapes
    /// on the H200, worker-seconds a case): each within 10 %, and a 70B-class prefill case far
    /// above a decode case of a small layer.
    #[test]
    fn the_differential_cost_model_follows_the_measured_groups() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let mean = |pick: &dyn Fn(&Case) -> bool| {
            let costs: Vec<f64> = set
                .cases()
                .filter(|c| c.suite == "other-shapes" && c.moe.is_none() && pick(c))
                .map(|c| case_cost(c, ReferenceChoice::Gpu))
                .collect();
            assert!(!costs.is_empty());
            costs.iter().sum::<f64>() / costs.len() as f64
        };
        let x_views = mean(&|c| c.id.contains("/x-"));
        let range_edge =
            mean(&|c| c.id.contains("/saturating") || c.id.contains("/special-values"));
        let seventy_b = mean(&|c| c.id.contains("llama-3-70b"));
        for (model, measured) in [(x_views, 0.97), (range_edge, 1.37), (seventy_b, 10.9)] {
            assert!(
                (model / measured - 1.0).abs() <= 0.10,
                "model {model:.2} s vs measured {measured} s a case"
            );
        }
        let decode = mean(&|c| c.id.contains("phi-3-mini.o_proj/M=1/"));
        let prefill = mean(&|c| c.id.contains("llama-3-70b.down_proj/M=2048/"));
        assert!(prefill > 20.0 * decode, "{prefill} vs {decode}");
    }

    /// With the GPU reference every element of a batch is judged, so a layer's cost keeps
    /// growing with M (and X's generation with K); the CPU reference's stops at the sampled
    /// regime. Layers are dealt by these costs.
    #[test]
    fn the_cost_model_follows_where_the_reference_is_formed() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let of = |layer: &str, m: usize| {
            set.cases()
                .find(|c| c.id.starts_with(&format!("field/{layer}/M={m}/")))
                .unwrap_or_else(|| panic!("field/{layer}/M={m}"))
        };
        let (small, large) = (of("qwen3-8b.o_proj", 256), of("qwen3-8b.o_proj", 4096));
        let cpu = |c| case_cost(c, ReferenceChoice::Cpu);
        let gpu = |c| case_cost(c, ReferenceChoice::Gpu);
        assert_eq!(cpu(small), cpu(large));
        assert!(gpu(large) > 10.0 * gpu(small));
        // Same N, 12× the K: the GPU reference's batch costs follow K (the products).
        let (wide, deep) = (
            of("qwen3-8b.o_proj", 4096),
            of("large-vocab.k49152-n4096", 4096),
        );
        assert!(
            gpu(deep) > 5.0 * gpu(wide),
            "{} vs {}",
            gpu(deep),
            gpu(wide)
        );
    }

    #[test]
    fn dealing_keeps_groups_whole_and_balances_the_load() {
        let costs = [5.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.0];
        let groups: Vec<Vec<usize>> = (0..costs.len()).map(|i| vec![i]).collect();
        let shards = deal(groups, |i| costs[i], 2);
        let load = |s: &Vec<usize>| s.iter().map(|&i| costs[i]).sum::<f64>();
        let loads: Vec<f64> = shards.iter().map(load).collect();
        assert_eq!(loads.iter().sum::<f64>(), 20.0);
        assert!(loads.iter().all(|&l| l <= 11.0), "{loads:?}");
        let mut all: Vec<usize> = shards.concat();
        all.sort();
        assert_eq!(all, (0..costs.len()).collect::<Vec<_>>());

        // A group is never split, and more jobs than groups leaves no empty shard.
        let shards = deal(vec![vec![0, 1, 2], vec![3]], |_| 1.0, 4);
        assert_eq!(shards, vec![vec![0, 1, 2], vec![3]]);
    }
}
