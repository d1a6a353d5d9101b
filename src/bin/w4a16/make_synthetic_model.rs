//! `w4a16 make-synthetic-model DIR`: the command-line face of
//! [`w4a16_checkpoint::synthetic`], a model directory of a real model's shapes for measuring
//! check-model at scale.

use super::args;
use super::exit::{CliError, Status};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::path::PathBuf;
use std::time::Instant;
use w4a16_checkpoint::synthetic::{SyntheticError, SyntheticModel, SyntheticShape};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;

/// `w4a16 make-synthetic-model`'s options.
#[derive(clap::Args)]
pub struct MakeSyntheticModelArgs {
    /// The model directory to write (created; refused unless empty).
    dir: PathBuf,
    /// The decoder's dimensions: llama-70b (hidden 8192, intermediate 28672, 64/8 heads of
    /// 128), llama-8b, llama-1b, or tiny (hidden 512) for tests.
    #[arg(long, default_value = "tiny", value_parser = shape())]
    shape: SyntheticShape,
    /// How many decoder layers to write (each is one shard).
    #[arg(long, default_value_t = 1)]
    layers: usize,
    /// The format of the shards and of config.json's quantization_config (an asymmetric
    /// gptq-v1 model's zero points of 0 read as possible AutoGPTQ overflow cells: see
    /// docs/check-model.md).
    #[arg(long, default_value = "compressed-tensors", value_parser = args::named::<Producer>())]
    format: Producer,
    /// Weights per scale (and zero point) along K.
    #[arg(long, default_value_t = 128)]
    group: usize,
    /// Symmetric quantization (no zero points).
    #[arg(long)]
    symmetric: bool,
    /// The activation dtype (scales and torch_dtype).
    #[arg(long, default_value = "bf16", value_parser = args::named::<ActDtype>())]
    dtype: ActDtype,
    /// Every weight follows from it: the same seed writes the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// `--shape`: a [`SyntheticShape`] by name; a wrong one is clap's error listing the choices.
fn shape() -> impl TypedValueParser<Value = SyntheticShape> {
    PossibleValuesParser::new(SyntheticShape::ALL.map(|s| s.name()))
        .try_map(|s: String| SyntheticShape::parse(&s))
}

pub fn make_synthetic_model(args: MakeSyntheticModelArgs) -> Result<Status, CliError> {
    let model = SyntheticModel {
        shape: args.shape,
        layers: args.layers,
        producer: args.format,
        group: args.group,
        symmetric: args.symmetric,
        dtype: args.dtype,
        seed: args.seed,
    };
    let start = Instant::now();
    let mut on_layer = |w: &w4a16_checkpoint::synthetic::LayerWritten| {
        eprintln!(
            "layer {}/{}: {} ({:.1} MiB, {:.1} s)",
            w.layer + 1,
            model.layers,
            w.shard.display(),
            w.bytes as f64 / (1u64 << 20) as f64,
            start.elapsed().as_secs_f64()
        );
    };
    let bytes = model
        .write(&args.dir, &mut on_layer)
        .map_err(CliError::from)?;
    println!(
        "{} × {} decoder layers ({} g{} {} {}): {:.1} MiB of tensors in {} in {:.1} s",
        model.shape.name(),
        model.layers,
        model.producer,
        model.group,
        if model.symmetric { "sym" } else { "asym" },
        model.dtype.name(),
        bytes as f64 / (1u64 << 20) as f64,
        args.dir.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(Status::Passed)
}

impl From<SyntheticError> for CliError {
    fn from(e: SyntheticError) -> Self {
        CliError::Synthetic(Box::new(e))
    }
}
