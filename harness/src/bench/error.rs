//! Why a benchmark stops: one error type for the GEMM and MoE benchmarks, each variant naming
//! the measurement it was taking.

use w4a16_reference::data::DataError;
use w4a16_reference::formats::LayoutError;

use w4a16_device::DeviceFault;
use w4a16_device::validate::ContractError;

/// Why a benchmark run stopped; each names the measurement it was taking.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{during}: {fault}")]
    Device { during: String, fault: DeviceFault },
    #[error("{during}: the launch was refused: {error}")]
    Contract {
        during: String,
        error: ContractError,
    },
    #[error("generating the data of {case}: {error}")]
    Data { case: String, error: DataError },
    #[error("laying out the weights of {case}: {error}")]
    Layout { case: String, error: LayoutError },
    #[error("the suite has no {what}; the report needs it")]
    EmptySuite { what: &'static str },
    #[error("the MoE layer of {case}: {error}")]
    MoeLayer {
        case: String,
        error: w4a16_reference::moe::MoeLayerError,
    },
    #[error("the routing of {case}: {error}")]
    Routing {
        case: String,
        error: w4a16_reference::moe::RoutingError,
    },
}

pub(super) fn dev(during: impl FnOnce() -> String) -> impl FnOnce(DeviceFault) -> BenchError {
    move |fault| BenchError::Device {
        during: during(),
        fault,
    }
}
