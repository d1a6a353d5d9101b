//! `w4a16 select`: the path the selection takes for one layer call, with every rejection's
//! reason.

use super::args;
use super::exit::{CliError, Status};
use w4a16_kernels::RunTarget;
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_select::LayerRequest;
use w4a16_select::config::KernelConfig;

/// `w4a16 select`'s options: one layer call.
#[derive(clap::Args)]
pub struct SelectArgs {
    /// The target whose selection rules apply (an emulated target's are its AMD target's).
    #[arg(long, default_value = "gfx1151", value_parser = args::run_target())]
    target: RunTarget,
    #[arg(long)]
    m: usize,
    #[arg(long)]
    k: usize,
    #[arg(long)]
    n: usize,
    #[arg(long, default_value_t = 128)]
    group: usize,
    #[arg(long, default_value = "f16", value_parser = args::named::<ActDtype>())]
    dtype: ActDtype,
    #[arg(long)]
    asym: bool,
    #[arg(long)]
    bias: bool,
}

pub fn select(args: SelectArgs, config: KernelConfig) -> Result<Status, CliError> {
    // Emulation only changes what runs on a GPU: the host side reads the AMD target.
    let target = args.target.target;
    let symmetry = if args.asym {
        Symmetry::Asym
    } else {
        Symmetry::Sym
    };
    let shape = LayerShape::new(args.n, args.k, args.group);
    let mut req = LayerRequest::new(shape, args.m, args.dtype, symmetry);
    req.bias = args.bias;
    let sel = w4a16_select::select(target, &req, &config);
    println!("{}", w4a16_select::render(&sel));
    Ok(Status::Passed)
}
