//! One detected linear read into the reference's checkpoint types: every tensor's dtype and
//! shape checked (naming shard and tensor), N and K cross-checked against the architecture,
//! g_idx accepted only when trivial, and the GPTQ v1 packer defect reported.

use crate::config::ModelConfig;
use crate::detect::{LinearEntry, LinearRole, Proj};
use crate::error::CheckpointError;
use crate::shards::ShardSet;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use w4a16_reference::formats::{
    AwqConfig, AwqLayer, Checkpoint, CompressedTensorsConfig, CompressedTensorsLayer, ConvertError,
    GptqConfig, GptqLayer, GptqVersion, LoadTarget, StoredDtype, Tensor, TensorData,
};

use crate::config::QuantMethod;

/// A linear ready for the converters.
#[derive(Debug)]
pub struct LoadedLinear {
    pub entry: LinearEntry,
    pub checkpoint: Box<dyn Checkpoint>,
    /// (N, K) from the tensors, checked against the architecture; dtype from config.json.
    pub target: LoadTarget,
    /// The group size resolved for this layer (channelwise = K).
    pub group_size: usize,
    /// The shard holding the module's main tensor (weight_packed / qweight).
    pub shard: PathBuf,
    pub defects: Vec<CheckpointDefect>,
    /// What was accepted but not taken at face value (trivial g_idx, …).
    pub notes: Vec<String>,
}

/// Something wrong in a checkpoint that still loads: the values read are not what was
/// quantized. Reported; the harness decides whether it refuses (`--strict`).
#[derive(Clone, Debug, PartialEq)]
pub enum CheckpointDefect {
    GptqV1ZeroOverflow(GptqV1Overflow),
}

/// AutoGPTQ ≤ 0.7.1's v1 packer stores `z − 1` per nibble and ORs each row's value, as a
/// sign-extended int32, into the qzeros word of its 8 rows: for z = 0 the −1 is 0xFFFFFFFF and
/// sets nibbles j..7 of that word to 15. Our reading is `z = (stored + 1) mod 16`, so:
///
/// - the lowest 15 of such a word (the *carrier*, row `8w + j`) is its own z = 0, and reads 0:
///   right, never counted (a nibble holds 15 only for z = 0 or above a z = 0);
/// - every higher nibble (rows `8w + j + 1 ..= 8w + 7`) reads 0 whatever was quantized: wrong
///   when its true z was not 0, right when it was. The file cannot tell the two apart (both
///   are stored as 15), so from the file alone these cells are *possibly wrong* and their
///   count is an upper bound; the oracle's `intended_dequantized` (what was quantized, where the
///   fixture script records it) tells which are *certainly wrong* ([`GptqV1Overflow::resolve`]).
///
/// docs/check-model.md ("A known producer defect") says the same.
#[derive(Clone, Debug, PartialEq)]
pub struct GptqV1Overflow {
    pub shard: String,
    pub module: String,
    pub tensor: String,
    /// Possibly wrong cells (`certain: false`), or after [`GptqV1Overflow::resolve`] exactly the
    /// wrong ones (`certain: true`); ordered by group, then row.
    pub cells: Vec<OverflowCell>,
    /// qzeros words carrying the signature.
    pub words: usize,
    /// Distinct rows and groups among `cells`.
    pub rows: usize,
    pub groups: usize,
    /// Share of the layer's weights in `cells`: an upper bound until resolved, exact after.
    pub fraction: f64,
    /// Set by [`GptqV1Overflow::resolve`]: how many possibly wrong cells read right (their true
    /// z was 0).
    pub read_right: Option<usize>,
    /// `[N, K]` and the group size, for the share.
    pub n: usize,
    pub k: usize,
    pub group_size: usize,
}

/// One zero point the overflow may have changed: `(row, group)` of qzeros, the nibble stored
/// there (15) and the z it decodes to (0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverflowCell {
    pub row: usize,
    pub group: usize,
    pub stored_nibble: u8,
    pub decoded_z: u8,
    /// Known wrong (checked against what was quantized), not merely possible.
    pub certain: bool,
}

impl GptqV1Overflow {
    /// Keeps exactly the cells whose weights differ between `intended` (what was quantized) and
    /// `read` (the file's reading), both `[N, K]` bits; each kept cell becomes certain.
    pub fn resolve(&mut self, intended: &[u16], read: &[u16]) {
        let (k, g) = (self.k, self.group_size);
        if intended.len() != self.n * k || read.len() != intended.len() {
            return;
        }
        let before = self.cells.len();
        self.cells.retain(|c| {
            let at = c.row * k + c.group * g;
            intended[at..at + g] != read[at..at + g]
        });
        for c in &mut self.cells {
            c.certain = true;
        }
        self.read_right = Some(before - self.cells.len());
        self.recount();
    }

    fn recount(&mut self) {
        let rows: BTreeSet<usize> = self.cells.iter().map(|c| c.row).collect();
        let groups: BTreeSet<usize> = self.cells.iter().map(|c| c.group).collect();
        self.rows = rows.len();
        self.groups = groups.len();
        self.fraction = (self.cells.len() * self.group_size) as f64 / (self.n * self.k) as f64;
    }
}

impl fmt::Display for CheckpointDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointDefect::GptqV1ZeroOverflow(d) => {
                let first: Vec<String> = d
                    .cells
                    .iter()
                    .take(4)
                    .map(|c| format!("(n = {}, g = {})", c.row, c.group))
                    .collect();
                write!(
                    f,
                    "{}: {}: GPTQ v1 zero-point overflow signature in {} qzeros words (AutoGPTQ's v1 packer ORs a sign-extended z − 1 = −1 into the word for z = 0, setting every higher nibble to 15; those read z = 0): ",
                    d.shard, d.tensor, d.words,
                )?;
                let (n, rows, groups) = (d.cells.len(), d.rows, d.groups);
                match d.read_right {
                    Some(right) => write!(
                        f,
                        "{n} zero points in {rows} rows and {groups} groups certainly wrong (against what was quantized, w4a16-oracle.safetensors; {right} more read 15 and were truly 0), first {}; {:.2}% of the weights of {}",
                        first.join(", "),
                        100.0 * d.fraction,
                        d.module
                    )?,
                    None => write!(
                        f,
                        "at most {n} zero points in {rows} rows and {groups} groups may be wrong (a true z of 0 reads right and cannot be told apart in the file), first {}; at most {:.2}% of the weights of {}",
                        first.join(", "),
                        100.0 * d.fraction,
                        d.module
                    )?,
                }
                write!(f, "; re-export with checkpoint_format gptq_v2")
            }
        }
    }
}

/// The overflow signature in v1 qzeros words `[groups, n/8]`: the lowest nibble j < 7 with
/// nibbles j..=7 all 15 (the carrier, read right). Returns the words hit and the possibly wrong
/// cells `8w + j + 1 ..= 8w + 7` of each, by group then row.
pub fn gptq_v1_overflow_cells(
    words: &[u32],
    groups: usize,
    n_words: usize,
) -> (usize, Vec<OverflowCell>) {
    let mut hit = 0;
    let mut cells = Vec::new();
    for g in 0..groups {
        for w in 0..n_words {
            let word = words[g * n_words + w];
            // Lowest j such that every nibble from j up is 15.
            let j = (0..8)
                .find(|&j| (word >> (4 * j)) == (0xFFFF_FFFFu32 >> (4 * j)))
                .unwrap_or(8);
            if j < 7 {
                hit += 1;
                cells.extend((j + 1..8).map(|i| OverflowCell {
                    row: 8 * w + i,
                    group: g,
                    stored_nibble: 15,
                    decoded_z: 0,
                    certain: false,
                }));
            }
        }
    }
    (hit, cells)
}

/// Reads the module's tensors, checks them and builds the reference checkpoint. The checks run
/// in a fixed order (tensors present, dimensions, architecture, grouping, each tensor's dtype
/// and shape, g_idx), so a checkpoint with several faults always names the same one first.
pub fn load_linear(
    config: &ModelConfig,
    shards: &ShardSet,
    entry: &LinearEntry,
) -> Result<LoadedLinear, CheckpointError> {
    let mut r = Reader::read(config, shards, entry)?;
    let main = match entry.method {
        QuantMethod::CompressedTensors => "weight_packed",
        _ => "qweight",
    };
    r.require_tensors(main)?;
    let shard = shards
        .shard_of(&r.name(main))
        .map(|s| s.path().to_path_buf())
        .unwrap_or_default();
    let (n, k) = r.dims()?;
    r.architecture(n, k)?;
    let group = r.group_size(main, k)?;
    let groups = k / group;
    let dt: StoredDtype = config.dtype.into();
    r.check_tensors(&expected_tensors(entry.method, dt, n, k, groups), dt)?;
    let notes: Vec<String> = r.check_g_idx(main, k, group)?.into_iter().collect();
    let mut defects = Vec::new();
    let checkpoint: Box<dyn Checkpoint> = match entry.method {
        QuantMethod::CompressedTensors => Box::new(CompressedTensorsLayer {
            config: CompressedTensorsConfig {
                group_size: group,
                symmetric: entry.scheme.symmetric,
            },
            weight_packed: r.take("weight_packed").expect("required"),
            weight_scale: r.take("weight_scale").expect("required"),
            weight_zero_point: r.take("weight_zero_point"),
            bias: r.take("bias"),
        }),
        QuantMethod::Gptq(version) => {
            let qzeros = r.take("qzeros");
            if version == GptqVersion::V1
                && let Some(t) = &qzeros
            {
                defects.extend(r.gptq_v1_defect(t, (n, k), group));
            }
            Box::new(GptqLayer {
                config: GptqConfig {
                    group_size: group,
                    sym: entry.scheme.symmetric,
                    // A trivial g_idx was accepted above: contiguous groups.
                    desc_act: false,
                    version,
                },
                qweight: r.take("qweight").expect("required"),
                qzeros,
                scales: r.take("scales").expect("required"),
                bias: r.take("bias"),
            })
        }
        QuantMethod::Awq => Box::new(AwqLayer {
            config: AwqConfig {
                group_size: group,
                zero_point: !entry.scheme.symmetric,
            },
            qweight: r.take("qweight").expect("required"),
            qzeros: r.take("qzeros"),
            scales: r.take("scales").expect("required"),
            bias: r.take("bias"),
        }),
    };
    Ok(LoadedLinear {
        entry: entry.clone(),
        checkpoint,
        target: LoadTarget {
            n,
            k,
            dtype: config.dtype,
        },
        group_size: group,
        shard,
        defects,
        notes,
    })
}

/// One tensor a method stores: `(suffix, dtype, layout, shape)`.
type ExpectedTensor = (&'static str, StoredDtype, &'static str, Vec<usize>);

/// The tensors `method` stores for an `[N, K]` linear in `groups` groups, in the model's dtype
/// `dt` where they hold values.
fn expected_tensors(
    method: QuantMethod,
    dt: StoredDtype,
    n: usize,
    k: usize,
    groups: usize,
) -> Vec<ExpectedTensor> {
    match method {
        QuantMethod::CompressedTensors => vec![
            (
                "weight_packed",
                StoredDtype::I32,
                "[N, K/8]",
                vec![n, k / 8],
            ),
            ("weight_scale", dt, "[N, K/G]", vec![n, groups]),
            (
                "weight_zero_point",
                StoredDtype::I32,
                "[ceil(N/8), K/G]",
                vec![n.div_ceil(8), groups],
            ),
            ("bias", dt, "[N]", vec![n]),
        ],
        QuantMethod::Gptq(_) => vec![
            ("qweight", StoredDtype::I32, "[K/8, N]", vec![k / 8, n]),
            ("scales", dt, "[K/G, N]", vec![groups, n]),
            (
                "qzeros",
                StoredDtype::I32,
                "[K/G, N/8]",
                vec![groups, n / 8],
            ),
            ("bias", dt, "[N]", vec![n]),
        ],
        QuantMethod::Awq => vec![
            ("qweight", StoredDtype::I32, "[K, N/8]", vec![k, n / 8]),
            ("scales", dt, "[K/G, N]", vec![groups, n]),
            (
                "qzeros",
                StoredDtype::I32,
                "[K/G, N/8]",
                vec![groups, n / 8],
            ),
            ("bias", dt, "[N]", vec![n]),
        ],
    }
}

struct Reader<'a> {
    config: &'a ModelConfig,
    shards: &'a ShardSet,
    entry: &'a LinearEntry,
    tensors: BTreeMap<String, Tensor>,
}

/// The steps of [`load_linear`], in the order it runs them.
impl<'a> Reader<'a> {
    /// Every tensor the entry names, read from its shard.
    fn read(
        config: &'a ModelConfig,
        shards: &'a ShardSet,
        entry: &'a LinearEntry,
    ) -> Result<Self, CheckpointError> {
        let mut r = Reader {
            config,
            shards,
            entry,
            tensors: BTreeMap::new(),
        };
        for (suffix, name) in &entry.tensors {
            r.tensors.insert(suffix.clone(), shards.tensor(name)?);
        }
        Ok(r)
    }

    /// The tensors the method cannot do without. Detection guarantees these; an entry built by
    /// hand may not.
    fn require_tensors(&self, main: &str) -> Result<(), CheckpointError> {
        let required: &[&str] = match self.entry.method {
            QuantMethod::CompressedTensors => &["weight_packed", "weight_scale", "weight_shape"],
            _ => &["qweight", "scales"],
        };
        match required.iter().find(|s| !self.tensors.contains_key(**s)) {
            Some(missing) => Err(CheckpointError::MissingTensor {
                shard: self.shard(main),
                module: self.entry.module.clone(),
                tensor: self.name(missing),
                rule: format!(
                    "a {} linear needs {}",
                    self.entry.producer,
                    required.join(", ")
                ),
            }),
            None => Ok(()),
        }
    }

    /// The group size resolved for `k`: it divides K, and compressed-tensors packs K by 8.
    fn group_size(&self, main: &str, k: usize) -> Result<usize, CheckpointError> {
        let group = self.entry.scheme.group_size.resolve(k);
        if group == 0 || !k.is_multiple_of(group) {
            return Err(self.convert(main, ConvertError::Group { k, got: group }));
        }
        if self.entry.method == QuantMethod::CompressedTensors && !k.is_multiple_of(8) {
            return Err(self.convert(
                "weight_packed",
                ConvertError::PackedDim {
                    tensor: self.name("weight_packed"),
                    dim: "K",
                    got: k,
                },
            ));
        }
        Ok(group)
    }

    /// Each present tensor of `expect` in its dtype and shape; a tensor held in the model's
    /// dtype `dt` is named against config.json's torch_dtype.
    fn check_tensors(
        &self,
        expect: &[ExpectedTensor],
        dt: StoredDtype,
    ) -> Result<(), CheckpointError> {
        for (suffix, dtype, layout, shape) in expect {
            let Some(t) = self.tensors.get(*suffix) else {
                continue;
            };
            if *dtype == dt && t.dtype() != dt {
                return Err(CheckpointError::Dtype {
                    shard: self.shard(suffix),
                    tensor: t.name.clone(),
                    expected: dt.to_string(),
                    got: t.dtype().to_string(),
                    rule: format!(
                        "{suffix} {layout} is stored in the model's dtype, config.json torch_dtype = {}",
                        match self.config.dtype {
                            w4a16_reference::ActDtype::F16 => "float16",
                            w4a16_reference::ActDtype::Bf16 => "bfloat16",
                        }
                    ),
                });
            }
            if let Err(e) = w4a16_reference::formats::expect_tensor(t, *dtype, layout, shape) {
                return Err(self.convert(suffix, e));
            }
        }
        Ok(())
    }

    /// g_idx accepted only when trivial (`g_idx[k] = k / G`), with a note saying so; act-order
    /// without a g_idx is refused. A permuted group order is not a layout the kernels read.
    fn check_g_idx(
        &self,
        main: &str,
        k: usize,
        group: usize,
    ) -> Result<Option<String>, CheckpointError> {
        let entry = self.entry;
        let g_idx_suffix = match entry.method {
            QuantMethod::CompressedTensors => "weight_g_idx",
            _ => "g_idx",
        };
        let Some(t) = self.tensors.get(g_idx_suffix) else {
            if entry.scheme.act_order {
                return Err(CheckpointError::ActOrder {
                    shard: self.shard(main),
                    tensor: format!("{}.{g_idx_suffix}", entry.module),
                    detail: format!(
                        "{} enables act-order (desc_act / actorder \"group\") but the module has no {g_idx_suffix} to say the group order",
                        self.config.quantization.file
                    ),
                });
            }
            return Ok(None);
        };
        let values: Vec<i64> = match &t.data {
            TensorData::I32(v) if t.shape == [k] => v.iter().map(|&x| i64::from(x)).collect(),
            TensorData::I64(v) if t.shape == [k] => v.clone(),
            _ => {
                return Err(self.convert(
                    g_idx_suffix,
                    ConvertError::Dtype {
                        tensor: t.name.clone(),
                        layout: "[K]",
                        shape: vec![k],
                        expected: StoredDtype::I32,
                        got: t.dtype(),
                        got_shape: t.shape.clone(),
                    },
                ));
            }
        };
        if let Some(i) = (0..k).find(|&i| values[i] != (i / group) as i64) {
            return Err(CheckpointError::ActOrder {
                shard: self.shard(g_idx_suffix),
                tensor: t.name.clone(),
                detail: format!(
                    "g_idx is not trivial: expected g_idx[k] = k / G (G = {group}) for every k, got g_idx[{i}] = {} (a permuted group order; re-quantize without desc_act/actorder)",
                    values[i]
                ),
            });
        }
        Ok(Some(format!(
            "{}: trivial g_idx (g_idx[k] = k / {group}); read as contiguous groups",
            t.name
        )))
    }

    /// Takes a tensor out for the checkpoint being built.
    fn take(&mut self, suffix: &str) -> Option<Tensor> {
        self.tensors.remove(suffix)
    }

    /// The v1 packer defect in `qzeros` of an `[N, K]` layer, where any word shows it.
    fn gptq_v1_defect(
        &self,
        qzeros: &Tensor,
        (n, k): (usize, usize),
        group: usize,
    ) -> Option<CheckpointDefect> {
        let words: Vec<u32> = match &qzeros.data {
            TensorData::I32(v) => v.iter().map(|&x| x as u32).collect(),
            _ => Vec::new(),
        };
        let (hit, cells) = gptq_v1_overflow_cells(&words, k / group, n / 8);
        if hit == 0 {
            return None;
        }
        let mut d = GptqV1Overflow {
            shard: self.shard("qzeros"),
            module: self.entry.module.clone(),
            tensor: qzeros.name.clone(),
            cells,
            words: hit,
            rows: 0,
            groups: 0,
            fraction: 0.0,
            read_right: None,
            n,
            k,
            group_size: group,
        };
        d.recount();
        Some(CheckpointDefect::GptqV1ZeroOverflow(d))
    }
}

impl Reader<'_> {
    fn name(&self, suffix: &str) -> String {
        self.entry
            .tensors
            .get(suffix)
            .cloned()
            .unwrap_or_else(|| format!("{}.{suffix}", self.entry.module))
    }

    fn shard(&self, suffix: &str) -> String {
        self.shards.shard_name(&self.name(suffix))
    }

    fn convert(&self, suffix: &str, source: ConvertError) -> CheckpointError {
        CheckpointError::Convert {
            shard: self.shard(suffix),
            module: self.entry.module.clone(),
            source: Box::new(source),
        }
    }

    fn rank2(&self, suffix: &str, layout: &str) -> Result<(usize, usize), CheckpointError> {
        let t = &self.tensors[suffix];
        match t.shape[..] {
            [a, b] => Ok((a, b)),
            _ => Err(CheckpointError::Rank {
                shard: self.shard(suffix),
                tensor: t.name.clone(),
                expected: format!("a rank-2 tensor {layout}"),
                got: t.shape.clone(),
            }),
        }
    }

    /// (N, K): compressed-tensors states them in `weight_shape`; GPTQ and AWQ imply them by the
    /// packed weight's shape.
    fn dims(&self) -> Result<(usize, usize), CheckpointError> {
        match self.entry.method {
            QuantMethod::CompressedTensors => {
                let t = &self.tensors["weight_shape"];
                let v: Vec<i64> = match &t.data {
                    TensorData::I64(v) => v.clone(),
                    TensorData::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
                    _ => Vec::new(),
                };
                match v[..] {
                    [n, k] if t.shape == [2] && n > 0 && k > 0 => Ok((n as usize, k as usize)),
                    _ => Err(CheckpointError::Rank {
                        shard: self.shard("weight_shape"),
                        tensor: t.name.clone(),
                        expected: format!(
                            "i64 [2] holding [N, K] > 0 (got dtype {}, values {v:?})",
                            t.dtype()
                        ),
                        got: t.shape.clone(),
                    }),
                }
            }
            QuantMethod::Gptq(_) => {
                let (k8, n) = self.rank2("qweight", "[K/8, N]")?;
                Ok((n, 8 * k8))
            }
            QuantMethod::Awq => {
                let (k, n8) = self.rank2("qweight", "[K, N/8]")?;
                Ok((8 * n8, k))
            }
        }
    }

    /// N and K against config.json for the roles whose shapes the architecture fixes.
    fn architecture(&self, n: usize, k: usize) -> Result<(), CheckpointError> {
        let c = self.config;
        let hidden = (c.hidden_size, "config.json hidden_size".to_string());
        let q = (
            c.num_attention_heads * c.head_dim,
            format!(
                "config.json num_attention_heads × head_dim = {} × {}",
                c.num_attention_heads, c.head_dim
            ),
        );
        let kv = (
            c.num_key_value_heads * c.head_dim,
            format!(
                "config.json num_key_value_heads × head_dim = {} × {}",
                c.num_key_value_heads, c.head_dim
            ),
        );
        let inter = |field: &str, v: Option<usize>| v.map(|v| (v, format!("config.json {field}")));
        let mlp = inter("intermediate_size", c.intermediate_size);
        let moe = inter(
            "moe_intermediate_size",
            c.moe_intermediate_size.or(c.intermediate_size),
        );
        let shared = inter(
            "shared_expert_intermediate_size",
            c.shared_expert_intermediate_size,
        );
        let (want_n, want_k) = match self.entry.role {
            // A vision or audio tower's q_proj or mlp follows its own config, not the text one.
            _ if !in_language_model(&self.entry.module) => (None, None),
            LinearRole::Attention(_) if c.latent_attention => (None, None),
            LinearRole::Attention(Proj::Q) => (Some(q), Some(hidden)),
            LinearRole::Attention(Proj::K | Proj::V) => (Some(kv), Some(hidden)),
            LinearRole::Attention(Proj::O) => (Some(hidden), Some(q)),
            LinearRole::Mlp(p) => ffn(p, mlp, hidden),
            LinearRole::SharedExpert(p) => ffn(p, shared, hidden),
            LinearRole::Expert { proj, .. } => ffn(proj, moe, hidden),
            _ => (None, None),
        };
        let main = match self.entry.method {
            QuantMethod::CompressedTensors => "weight_shape",
            _ => "qweight",
        };
        for (dim, got, want) in [("N", n, want_n), ("K", k, want_k)] {
            if let Some((expected, rule)) = want
                && expected != got
            {
                return Err(CheckpointError::ShapeMismatch {
                    shard: self.shard(main),
                    tensor: self.name(main),
                    dim: dim.to_string(),
                    expected,
                    got,
                    rule,
                });
            }
        }
        Ok(())
    }
}

/// Whether `module` belongs to the language model, whose sizes config.json (or its text config)
/// gives: not under a vision, image or audio tower, a multimodal projector or an encoder.
fn in_language_model(module: &str) -> bool {
    !module.split('.').any(|seg| {
        ["vision", "visual", "image", "audio", "projector"]
            .iter()
            .any(|w| seg.contains(w))
            || seg == "encoder"
    })
}

type Want = Option<(usize, String)>;

/// gate/up: N = intermediate, K = hidden; down the other way round.
fn ffn(p: Proj, inter: Want, hidden: (usize, String)) -> (Want, Want) {
    match p {
        Proj::Gate | Proj::Up => (inter, Some(hidden)),
        Proj::Down => (Some(hidden), inter),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words written by hand: nibble j = 15 with all higher nibbles 15 is the signature (j < 7).
    #[test]
    fn overflow_signature_by_hand() {
        // z − 1 = −1 at nibble 3: bits 12..31 all set; nibbles 0..2 carry 1, 2, 3.
        let hit = 0xFFFF_F321u32;
        // A 15 at nibble 7 alone (z = 0 in the last row) is a clean v1 word.
        let clean_top = 0xF123_4567u32;
        // 15s at nibbles 3, 4, 5 and 7 but nibble 6 is not 15: clean.
        let clean_mid = 0xF2FF_F321u32;
        let (words, cells) = gptq_v1_overflow_cells(&[hit, clean_top, clean_mid], 1, 3);
        assert_eq!(words, 1);
        let at: Vec<(usize, usize)> = cells.iter().map(|c| (c.row, c.group)).collect();
        assert_eq!(at, vec![(4, 0), (5, 0), (6, 0), (7, 0)]);
        assert!(cells.iter().all(|c| !c.certain && c.stored_nibble == 15));
        let (words, cells) = gptq_v1_overflow_cells(&[0xFFFF_FFFF], 1, 1);
        assert_eq!((words, cells.len()), (1, 7));
    }
}
