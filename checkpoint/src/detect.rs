//! Which tensors make up which linear: names are grouped by module (the name up to its last
//! `.`), and each module is classified by its suffix set for the config's method. Only header
//! metadata is used; no tensor data is read here.

use crate::config::{ModelConfig, QuantMethod, QuantScheme};
use crate::error::CheckpointError;
use crate::shards::ShardSet;
use std::collections::{BTreeMap, BTreeSet};
use w4a16_reference::formats::Producer;

w4a16_reference::named_enum! {
    /// A projection as Hugging Face model code names it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Proj {
        Q = "q_proj",
        K = "k_proj",
        V = "v_proj",
        O = "o_proj",
        Gate = "gate_proj",
        Up = "up_proj",
        Down = "down_proj",
    }
}

/// What a linear is in the architecture, which decides the shape it must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinearRole {
    Attention(Proj),
    /// The dense MLP (`mlp.gate_proj` …).
    Mlp(Proj),
    /// A shared expert beside routed ones (Qwen-MoE `shared_expert`, DeepSeek `shared_experts`).
    SharedExpert(Proj),
    /// Routed expert `expert` (`experts.<e>.gate_proj`, Mixtral `experts.<e>.w1`).
    Expert {
        expert: usize,
        proj: Proj,
    },
    Other,
}

impl LinearRole {
    pub fn parse(module: &str) -> LinearRole {
        let parts: Vec<&str> = module.split('.').collect();
        let Some((&last, parents)) = parts.split_last() else {
            return LinearRole::Other;
        };
        let expert = match parents {
            [.., "experts", e] => e.parse::<usize>().ok(),
            _ => None,
        };
        let proj = match (Proj::parse(last), last) {
            (Some(proj), _) => proj,
            // Mixtral's expert naming.
            (None, "w1") if expert.is_some() => Proj::Gate,
            (None, "w3") if expert.is_some() => Proj::Up,
            (None, "w2") if expert.is_some() => Proj::Down,
            _ => return LinearRole::Other,
        };
        match proj {
            Proj::Q | Proj::K | Proj::V | Proj::O => LinearRole::Attention(proj),
            _ => match expert {
                Some(expert) => LinearRole::Expert { expert, proj },
                None if parents
                    .iter()
                    .any(|p| *p == "shared_expert" || *p == "shared_experts") =>
                {
                    LinearRole::SharedExpert(proj)
                }
                None => LinearRole::Mlp(proj),
            },
        }
    }
}

/// One quantized linear of the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearEntry {
    /// The module name, e.g. `model.layers.0.self_attn.q_proj`.
    pub module: String,
    pub method: QuantMethod,
    pub producer: Producer,
    pub scheme: QuantScheme,
    pub role: LinearRole,
    /// Suffix (`qweight`) → full tensor name.
    pub tensors: BTreeMap<String, String>,
}

/// Parts an engine fuses into one GEMM (q|k|v, gate|up), all quantized alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedGroup {
    /// e.g. `model.layers.0.self_attn.qkv_proj`.
    pub name: String,
    pub parts: Vec<String>,
}

/// The experts of one MoE layer for one projection, in expert order, as the `moe` kernel stacks
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpertGroup {
    /// e.g. `model.layers.0.mlp.experts`.
    pub prefix: String,
    pub proj: Proj,
    pub experts: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Detection {
    pub linears: Vec<LinearEntry>,
    /// Linears stored as a plain `weight` (lm_head, routers, ignored modules).
    pub unquantized: Vec<String>,
    pub fused: Vec<FusedGroup>,
    pub experts: Vec<ExpertGroup>,
    pub refusals: Vec<CheckpointError>,
}

struct Suffixes {
    /// Always present in a quantized module of this method.
    required: &'static [&'static str],
    /// Required for asymmetric schemes.
    zero_points: &'static str,
    optional: &'static [&'static str],
}

fn suffixes(method: QuantMethod) -> Suffixes {
    match method {
        QuantMethod::CompressedTensors => Suffixes {
            required: &["weight_packed", "weight_scale", "weight_shape"],
            zero_points: "weight_zero_point",
            optional: &["weight_g_idx", "bias"],
        },
        QuantMethod::Gptq(_) => Suffixes {
            required: &["qweight", "scales"],
            zero_points: "qzeros",
            optional: &["g_idx", "bias"],
        },
        QuantMethod::Awq => Suffixes {
            required: &["qweight", "scales"],
            zero_points: "qzeros",
            optional: &["bias"],
        },
    }
}

fn method_rule(method: QuantMethod) -> &'static str {
    match method {
        QuantMethod::CompressedTensors => {
            "a compressed-tensors pack-quantized linear has weight_packed, weight_scale, weight_shape, weight_zero_point (asymmetric), weight_g_idx and bias (optional)"
        }
        QuantMethod::Gptq(_) => {
            "a GPTQ linear has qweight, scales, qzeros (required when asymmetric), g_idx and bias (optional)"
        }
        QuantMethod::Awq => {
            "an AWQ linear has qweight, scales, qzeros (required with zero_point), bias (optional)"
        }
    }
}

/// Groups the shards' tensors into linears for `config`'s method. A refusal for one module
/// is recorded and the others go on.
pub fn detect(config: &ModelConfig, shards: &ShardSet) -> Detection {
    let q = &config.quantization;
    let method = q.method;
    let sfx = suffixes(method);
    let mut modules: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    for name in shards.names() {
        if let Some((module, suffix)) = name.rsplit_once('.') {
            modules.entry(module).or_default().insert(suffix, name);
        }
    }
    let mut out = Detection::default();
    let is_marker = |s: &str| {
        sfx.required.contains(&s)
            || s == sfx.zero_points
            || (s != "bias" && sfx.optional.contains(&s))
    };
    for (module, tensors) in &modules {
        let quantized = tensors.keys().any(|s| is_marker(s));
        if !quantized {
            if tensors.contains_key("weight") {
                let rank2 = shards
                    .meta(tensors["weight"])
                    .is_some_and(|m| m.shape.len() == 2);
                let linear_name = LinearRole::parse(module) != LinearRole::Other
                    || module.ends_with("lm_head")
                    || q.is_ignored(module);
                if rank2 && linear_name {
                    out.unquantized.push(module.to_string());
                }
            }
            continue;
        }
        let first = tensors.values().next().copied().unwrap_or_default();
        let shard = shards.shard_name(first);
        let scheme = match q.scheme_for(module) {
            Some(s) => s.clone(),
            None => {
                out.refusals.push(CheckpointError::Detection {
                    file: shard,
                    module: module.to_string(),
                    rule: format!(
                        "stored quantized, but no {} config group targets it",
                        q.file
                    ),
                });
                continue;
            }
        };
        if q.is_ignored(module) {
            out.refusals.push(CheckpointError::Detection {
                file: shard,
                module: module.to_string(),
                rule: format!(
                    "listed in {}'s ignore list (expected an unquantized `weight`), but stored quantized",
                    q.file
                ),
            });
            continue;
        }
        let mut required: Vec<&str> = sfx.required.to_vec();
        if !scheme.symmetric {
            required.push(sfx.zero_points);
        }
        if let Some(missing) = required.iter().find(|s| !tensors.contains_key(*s)) {
            let why = if *missing == sfx.zero_points {
                format!("the config is asymmetric, {}", method_rule(method))
            } else {
                method_rule(method).to_string()
            };
            out.refusals.push(CheckpointError::MissingTensor {
                shard,
                module: module.to_string(),
                tensor: format!("{module}.{missing}"),
                rule: why,
            });
            continue;
        }
        let allowed =
            |s: &str| required.contains(&s) || s == sfx.zero_points || sfx.optional.contains(&s);
        if let Some((_, extra)) = tensors.iter().find(|(s, _)| !allowed(s)) {
            out.refusals.push(CheckpointError::ExtraTensor {
                shard: shards.shard_name(extra),
                tensor: extra.to_string(),
                rule: method_rule(method).to_string(),
            });
            continue;
        }
        out.linears.push(LinearEntry {
            module: module.to_string(),
            method,
            producer: method.producer(),
            scheme,
            role: LinearRole::parse(module),
            tensors: tensors
                .iter()
                .map(|(s, n)| (s.to_string(), n.to_string()))
                .collect(),
        });
    }
    out.fused = fused_groups(&out.linears);
    let (experts, refusals) = expert_groups(config, &out.linears, shards);
    out.experts = experts;
    out.refusals.extend(refusals);
    out
}

fn parent(module: &str) -> &str {
    module.rsplit_once('.').map_or("", |(p, _)| p)
}

/// q|k|v and gate|up siblings quantized alike (same producer, group size and symmetry).
fn fused_groups(linears: &[LinearEntry]) -> Vec<FusedGroup> {
    let mut by_parent: BTreeMap<&str, BTreeMap<Proj, &LinearEntry>> = BTreeMap::new();
    for l in linears {
        let proj = match l.role {
            LinearRole::Attention(p) | LinearRole::Mlp(p) | LinearRole::SharedExpert(p) => p,
            _ => continue,
        };
        by_parent
            .entry(parent(&l.module))
            .or_default()
            .insert(proj, l);
    }
    let mut out = Vec::new();
    for (parent, projs) in by_parent {
        for (fused, parts) in [
            ("qkv_proj", &[Proj::Q, Proj::K, Proj::V][..]),
            ("gate_up_proj", &[Proj::Gate, Proj::Up][..]),
        ] {
            let entries: Option<Vec<&LinearEntry>> =
                parts.iter().map(|p| projs.get(p).copied()).collect();
            let Some(entries) = entries else { continue };
            let alike = entries.windows(2).all(|w| {
                w[0].producer == w[1].producer
                    && w[0].scheme.group_size == w[1].scheme.group_size
                    && w[0].scheme.symmetric == w[1].scheme.symmetric
            });
            if alike {
                out.push(FusedGroup {
                    name: format!("{parent}.{fused}"),
                    parts: entries.iter().map(|e| e.module.clone()).collect(),
                });
            }
        }
    }
    out
}

/// Experts grouped per (layer prefix, projection), checked to be 0..E−1 with E from config.json
/// when it states one.
fn expert_groups(
    config: &ModelConfig,
    linears: &[LinearEntry],
    shards: &ShardSet,
) -> (Vec<ExpertGroup>, Vec<CheckpointError>) {
    let mut groups: BTreeMap<(String, Proj), BTreeMap<usize, &LinearEntry>> = BTreeMap::new();
    for l in linears {
        if let LinearRole::Expert { expert, proj } = l.role {
            let prefix = parent(parent(&l.module)).to_string();
            groups.entry((prefix, proj)).or_default().insert(expert, l);
        }
    }
    let mut out = Vec::new();
    let mut refusals = Vec::new();
    for ((prefix, proj), experts) in groups {
        let got: BTreeSet<usize> = experts.keys().copied().collect();
        let count = config.num_experts.unwrap_or(got.len());
        let expected: BTreeSet<usize> = (0..count).collect();
        if got != expected {
            let first = experts.values().next().expect("non-empty group");
            let missing: Vec<usize> = expected.difference(&got).copied().take(8).collect();
            let extra: Vec<usize> = got.difference(&expected).copied().take(8).collect();
            refusals.push(CheckpointError::Detection {
                file: shards.shard_name(first.tensors.values().next().map_or("", |s| s)),
                module: format!("{prefix}.*.{}", proj.name()),
                rule: format!(
                    "expected experts 0..{} (config.json num_experts = {count}); missing {missing:?}, unexpected {extra:?}",
                    count.saturating_sub(1)
                ),
            });
            continue;
        }
        out.push(ExpertGroup {
            prefix,
            proj,
            experts: experts.values().map(|e| e.module.clone()).collect(),
        });
    }
    (out, refusals)
}

#[cfg(test)]
mod tests {
    use super::*;

    w4a16_reference::named_enum_tests! { proj: Proj }

    #[test]
    fn roles_from_standard_names() {
        use LinearRole::*;
        assert_eq!(
            LinearRole::parse("model.layers.0.self_attn.k_proj"),
            Attention(Proj::K)
        );
        assert_eq!(
            LinearRole::parse("model.layers.0.mlp.down_proj"),
            Mlp(Proj::Down)
        );
        assert_eq!(
            LinearRole::parse("model.layers.1.block_sparse_moe.experts.7.w3"),
            Expert {
                expert: 7,
                proj: Proj::Up
            }
        );
        assert_eq!(
            LinearRole::parse("model.layers.1.mlp.experts.12.gate_proj"),
            Expert {
                expert: 12,
                proj: Proj::Gate
            }
        );
        assert_eq!(
            LinearRole::parse("model.layers.1.mlp.shared_expert.up_proj"),
            SharedExpert(Proj::Up)
        );
        assert_eq!(LinearRole::parse("model.layers.1.mlp.w1"), Other);
        assert_eq!(LinearRole::parse("lm_head"), Other);
    }
}
