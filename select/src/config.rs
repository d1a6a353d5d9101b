//! The kernel configuration (docs/contract.md §5): the prefill dequant option, its two command-line forms,
//! the retired flag it replaces, and the startup memory check it brings.
//!
//! The CLI passes its raw arguments through [`parse_args`] before clap sees them: the dotted
//! form (`--kernel-config.<key> <value>`) names keys in the flag itself, which a fixed clap
//! schema cannot express, and the retired flag must be refused with its own message.

use std::fmt;

use serde::Serialize;
use w4a16_kernels::{KernelId, Target};
use w4a16_reference::layer::Symmetry;

use crate::{LayerRequest, dense_min_m, padding, select};
use w4a16_cases::RowPadding;
use w4a16_cases::model::ModelDescription;

/// The one key of `kernel_config`.
pub const PREFILL_DEQUANT_KEY: &str = "rdna_hybrid_w4a16_prefill_dequant";
/// The flag that carries a JSON object of kernel options; `--kernel-config.<key>` is its dotted form.
pub const KERNEL_CONFIG_FLAG: &str = "--kernel-config";
/// The retired flag (values off/soft/hard).
pub const RETIRED_FLAG: &str = "--w4a16-prefill-dequant";
/// Activation headroom the startup memory check keeps free.
pub const ACTIVATION_HEADROOM_BYTES: u64 = 4 << 30;

w4a16_reference::named_enum! {
    /// Whether the hybrid keeps a dense dequantized copy of each weight for prefill (M ≥ 256).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub enum PrefillDequant {
        Enable = "enable",
        #[default]
        Disable = "disable",
    }
}

/// `kernel_config` as the engine takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
pub struct KernelConfig {
    pub prefill_dequant: PrefillDequant,
}

impl KernelConfig {
    pub fn with_prefill_dequant(prefill_dequant: PrefillDequant) -> Self {
        KernelConfig { prefill_dequant }
    }

    /// Whether loading builds the dense prefill cache: exactly when the option is enabled, since
    /// startup refuses an enabled configuration whose cache does not fit
    /// ([`check_startup_memory`]); a layer the hybrid does not take never reads it.
    pub fn builds_dense_cache(&self) -> bool {
        self.prefill_dequant == PrefillDequant::Enable
    }

    /// The JSON form: `{"rdna_hybrid_w4a16_prefill_dequant": "enable"}`.
    pub fn from_json(json: &str) -> Result<KernelConfig, ConfigError> {
        let mut cfg = KernelConfig::default();
        let mut seen = Seen::default();
        apply_json(&mut cfg, &mut seen, json)?;
        Ok(cfg)
    }
}

impl fmt::Display for KernelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{\"{PREFILL_DEQUANT_KEY}\": \"{}\"}}",
            self.prefill_dequant.name()
        )
    }
}

/// A refused kernel configuration.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{flag} needs a value")]
    MissingValue { flag: String },
    #[error(
        "{KERNEL_CONFIG_FLAG}: expected a JSON object such as '{{\"{PREFILL_DEQUANT_KEY}\": \"enable\"}}', got {got:?}: {reason}"
    )]
    NotAnObject { got: String, reason: String },
    #[error(
        "unknown kernel_config key \"{key}\" (in {form}); the only key is \"{PREFILL_DEQUANT_KEY}\""
    )]
    UnknownKey { key: String, form: String },
    #[error(
        "kernel_config key \"{key}\" has value {value} (in {form}); expected \"enable\" or \"disable\""
    )]
    BadValue {
        key: String,
        value: String,
        form: String,
    },
    #[error("kernel_config key \"{key}\" is set twice, to \"{first}\" and to \"{second}\"")]
    Conflict {
        key: String,
        first: String,
        second: String,
    },
    /// The retired flag, with the value it was given: the message names its replacement.
    #[error("{}", retired_message(.value.as_deref()))]
    Retired { value: Option<String> },
}

/// Which values were set, to refuse contradictions between the two forms.
#[derive(Default)]
struct Seen {
    prefill_dequant: Option<PrefillDequant>,
}

fn set_key(
    cfg: &mut KernelConfig,
    seen: &mut Seen,
    key: &str,
    value: &str,
    form: &str,
) -> Result<(), ConfigError> {
    if key != PREFILL_DEQUANT_KEY {
        return Err(ConfigError::UnknownKey {
            key: key.to_owned(),
            form: form.to_owned(),
        });
    }
    let Some(v) = PrefillDequant::parse(value) else {
        return Err(ConfigError::BadValue {
            key: key.to_owned(),
            value: format!("{value:?}"),
            form: form.to_owned(),
        });
    };
    if let Some(first) = seen.prefill_dequant
        && first != v
    {
        return Err(ConfigError::Conflict {
            key: key.to_owned(),
            first: first.name().into(),
            second: v.name().into(),
        });
    }
    seen.prefill_dequant = Some(v);
    cfg.prefill_dequant = v;
    Ok(())
}

fn apply_json(cfg: &mut KernelConfig, seen: &mut Seen, json: &str) -> Result<(), ConfigError> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| ConfigError::NotAnObject {
            got: json.to_owned(),
            reason: e.to_string(),
        })?;
    let serde_json::Value::Object(map) = value else {
        return Err(ConfigError::NotAnObject {
            got: json.to_owned(),
            reason: "not an object".into(),
        });
    };
    let form = format!("{KERNEL_CONFIG_FLAG} '{json}'");
    for (key, v) in &map {
        match v {
            serde_json::Value::String(s) => set_key(cfg, seen, key, s, &form)?,
            other if key == PREFILL_DEQUANT_KEY => {
                return Err(ConfigError::BadValue {
                    key: key.clone(),
                    value: other.to_string(),
                    form,
                });
            }
            _ => {
                return Err(ConfigError::UnknownKey {
                    key: key.clone(),
                    form,
                });
            }
        }
    }
    Ok(())
}

/// The message for the retired flag, per old value.
pub fn retired_message(value: Option<&str>) -> String {
    let new = format!("{KERNEL_CONFIG_FLAG}.{PREFILL_DEQUANT_KEY} enable");
    let head = format!("{RETIRED_FLAG} was retired");
    match value {
        Some("hard") => format!(
            "{head}; `hard` is now `{new}` (or {KERNEL_CONFIG_FLAG} '{{\"{PREFILL_DEQUANT_KEY}\": \"enable\"}}'): \
             startup fails when the dense cache does not fit"
        ),
        Some("off") => format!(
            "{head}; `off` needs nothing: {PREFILL_DEQUANT_KEY} is \"disable\" by default, drop the flag"
        ),
        Some("soft") => format!(
            "{head}; `soft` has no equivalent: the dense cache is either enabled for every layer (`{new}`, \
             startup fails when it does not fit) or disabled (the default, drop the flag)"
        ),
        other => format!(
            "{head}{}; use `{new}` (hard → enable, off → nothing, soft → no equivalent)",
            other
                .map(|v| format!(" (and {v:?} was never one of its values)"))
                .unwrap_or_default()
        ),
    }
}

/// The configuration found in an argument list, and the arguments left for the CLI parser.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedArgs {
    pub config: KernelConfig,
    pub rest: Vec<String>,
}

/// Takes `--kernel-config <json>`, `--kernel-config=<json>`, `--kernel-config.<key> <value>`
/// and `--kernel-config.<key>=<value>` out of `args`; refuses the retired flag. Arguments after
/// `--` are passed through untouched.
pub fn parse_args<S: AsRef<str>>(args: &[S]) -> Result<ParsedArgs, ConfigError> {
    let mut cfg = KernelConfig::default();
    let mut seen = Seen::default();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        if arg == "--" {
            rest.extend(args[i..].iter().map(|a| a.as_ref().to_owned()));
            break;
        }
        // `--flag=value` or `--flag value`; returns the value and how many args it used.
        let value_of = |flag: &str| -> Result<(String, usize), ConfigError> {
            match arg.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                Some(v) => Ok((v.to_owned(), 1)),
                None => match args.get(i + 1).map(|a| a.as_ref()) {
                    Some(v) if !v.starts_with("--") => Ok((v.to_owned(), 2)),
                    _ => Err(ConfigError::MissingValue {
                        flag: flag.to_owned(),
                    }),
                },
            }
        };
        if arg == RETIRED_FLAG || arg.starts_with(&format!("{RETIRED_FLAG}=")) {
            let value = value_of(RETIRED_FLAG).ok().map(|(v, _)| v);
            return Err(ConfigError::Retired { value });
        }
        if arg == KERNEL_CONFIG_FLAG || arg.starts_with(&format!("{KERNEL_CONFIG_FLAG}=")) {
            let (json, used) = value_of(KERNEL_CONFIG_FLAG)?;
            apply_json(&mut cfg, &mut seen, &json)?;
            i += used;
            continue;
        }
        if let Some(dotted) = arg.strip_prefix(&format!("{KERNEL_CONFIG_FLAG}.")) {
            let key = dotted.split_once('=').map_or(dotted, |(k, _)| k);
            let flag = format!("{KERNEL_CONFIG_FLAG}.{key}");
            let (value, used) = value_of(&flag)?;
            set_key(&mut cfg, &mut seen, key, &value, &flag)?;
            i += used;
            continue;
        }
        rest.push(arg.to_owned());
        i += 1;
    }
    Ok(ParsedArgs { config: cfg, rest })
}

/// What the engine is started with, for the startup memory check.
#[derive(Clone, Copy, Debug)]
pub struct StartupRequest<'a> {
    pub model: &'a ModelDescription,
    pub target: Target,
    pub device_memory_bytes: u64,
    /// Fraction of device memory the engine may use, in (0, 1].
    pub gpu_memory_utilization: f64,
    /// Tokens of the longest request; the model's default when `None`.
    pub max_model_len: Option<u64>,
}

/// The numbers of the startup memory check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StartupMemoryReport {
    pub model: String,
    pub target: Target,
    /// Whether the check applied (the option is enabled); the numbers are filled either way.
    pub checked: bool,
    /// int4 weights (padded rows), scales and zero points of every layer.
    pub resident_bytes: u64,
    /// The dense prefill cache, padding included; 0 when disabled or when no layer takes the hybrid.
    pub dense_cache_bytes: u64,
    pub headroom_bytes: u64,
    pub kv_bytes: u64,
    pub max_model_len: u64,
    pub needed_bytes: u64,
    pub allowed_bytes: u64,
    pub device_memory_bytes: u64,
    /// Utilization in thousandths (exact in snapshots and JSON).
    pub gpu_memory_utilization_milli: u32,
}

impl StartupMemoryReport {
    pub fn fits(&self) -> bool {
        self.needed_bytes <= self.allowed_bytes
    }
}

/// Why startup refuses the configuration.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StartupMemoryError {
    #[error("gpu_memory_utilization must be in (0, 1]; got {0}")]
    Utilization(f64),
    #[error("max_model_len must be positive")]
    MaxModelLen,
    #[error("{}", does_not_fit(.0))]
    DoesNotFit(Box<StartupMemoryReport>),
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn does_not_fit(r: &StartupMemoryReport) -> String {
    format!(
        "{PREFILL_DEQUANT_KEY} = enable does not fit {} on {}: it needs {} ({} bytes) = int4 weights {} + dense cache {} \
         + activation headroom {} + KV cache for one {}-token request {}, but gpu_memory_utilization {} × device memory {} \
         = {} ({} bytes). Raise gpu_memory_utilization or lower max_model_len (or set {PREFILL_DEQUANT_KEY} to disable).",
        r.model,
        r.target,
        gib(r.needed_bytes),
        r.needed_bytes,
        gib(r.resident_bytes),
        gib(r.dense_cache_bytes),
        gib(r.headroom_bytes),
        r.max_model_len,
        gib(r.kv_bytes),
        r.gpu_memory_utilization_milli as f64 / 1000.0,
        gib(r.device_memory_bytes),
        gib(r.allowed_bytes),
        r.allowed_bytes,
    )
}

/// The startup memory check of docs/contract.md §5.3: with the dense cache enabled, `gpu_memory_utilization ×
/// device memory` must cover the resident int4 weights, the dense cache (padding included),
/// 4 GiB of activation headroom and the KV cache of one `max_model_len` request.
pub fn check_startup_memory(
    config: &KernelConfig,
    req: &StartupRequest,
) -> Result<StartupMemoryReport, StartupMemoryError> {
    let u = req.gpu_memory_utilization;
    if !(u > 0.0 && u <= 1.0) {
        return Err(StartupMemoryError::Utilization(u));
    }
    let max_model_len = req.max_model_len.unwrap_or(req.model.max_model_len);
    if max_model_len == 0 {
        return Err(StartupMemoryError::MaxModelLen);
    }
    let model = req.model;
    let mut resident = 0u64;
    let mut dense = 0u64;
    for l in &model.linears {
        let s = l.shape;
        let (n, groups) = (s.n as u64, s.groups() as u64);
        let weights =
            n * padding::weight_row_stride_bytes(req.target, s.k, RowPadding::CacheCliff) as u64;
        let scales = n * groups * model.dtype.size_bytes() as u64;
        let zeros = if model.symmetry == Symmetry::Asym {
            n.div_ceil(8) * groups * 4
        } else {
            0
        };
        resident += (weights + scales + zeros) * model.layers;
        // The cache exists only for layers whose prefill would use it: ask selection.
        let mut probe = LayerRequest::new(s, dense_min_m(req.target), model.dtype, model.symmetry);
        probe.dense_cache_built = config.builds_dense_cache();
        let sel = select(req.target, &probe, config);
        if sel.path.contains(&KernelId::Dense)
            && let Some(stride) = sel.strides.dense_row_stride
        {
            dense += n * stride as u64 * model.dtype.size_bytes() as u64 * model.layers;
        }
    }
    let kv = model.kv_bytes(max_model_len);
    let needed = resident + dense + ACTIVATION_HEADROOM_BYTES + kv;
    let allowed = (u * req.device_memory_bytes as f64).floor() as u64;
    let report = StartupMemoryReport {
        model: model.name.clone(),
        target: req.target,
        checked: config.builds_dense_cache(),
        resident_bytes: resident,
        dense_cache_bytes: dense,
        headroom_bytes: ACTIVATION_HEADROOM_BYTES,
        kv_bytes: kv,
        max_model_len,
        needed_bytes: needed,
        allowed_bytes: allowed,
        device_memory_bytes: req.device_memory_bytes,
        gpu_memory_utilization_milli: (u * 1000.0).round() as u32,
    };
    if report.checked && !report.fits() {
        return Err(StartupMemoryError::DoesNotFit(Box::new(report)));
    }
    Ok(report)
}
