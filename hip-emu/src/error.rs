//! HIP's status codes as a typed error: inside the crate every operation returns
//! `Result<_, HipError>`, and only the exported C functions turn it into the `int` HIP returns
//! (`hipError_t` of hip_runtime_api.h, whose numbers these are).

/// Why a call failed, each variant carrying what a person needs to see in a log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HipError {
    /// A null out-parameter, a bad size, a pointer outside every allocation.
    #[error("hipErrorInvalidValue: {0}")]
    InvalidValue(String),
    /// The emulated device's memory bound is spent.
    #[error("hipErrorOutOfMemory: {0}")]
    OutOfMemory(String),
    /// A grid or block the device cannot run at all (a zero dimension, past the device's limits).
    #[error("hipErrorInvalidConfiguration: {0}")]
    InvalidConfiguration(String),
    /// hipFree of an address hipMalloc did not return.
    #[error("hipErrorInvalidDevicePointer: {0}")]
    InvalidDevicePointer(String),
    /// A `hipMemcpyKind` outside 0..=4.
    #[error("hipErrorInvalidMemcpyDirection: {0}")]
    InvalidMemcpyDirection(String),
    /// The target named by `W4A16_HIP_EMU_TARGET` is not one the emulator runs.
    #[error("hipErrorNoDevice: {0}")]
    NoDevice(String),
    /// A device ordinal other than 0.
    #[error("hipErrorInvalidDevice: {0}")]
    InvalidDevice(String),
    /// Bytes that are not an AMDGPU ELF code object the emulator can read.
    #[error("hipErrorInvalidImage: {0}")]
    InvalidImage(String),
    /// A code object built for another gfx target than the emulated device's.
    #[error("hipErrorNoBinaryForGpu: {0}")]
    NoBinaryForGpu(String),
    /// A stream, event, module or function handle this runtime did not hand out (or destroyed).
    #[error("hipErrorInvalidHandle: {0}")]
    InvalidHandle(String),
    /// No kernel of that name in the module.
    #[error("hipErrorNotFound: {0}")]
    NotFound(String),
    /// A kernel stopped on an access outside every allocation (sticky, as on a GPU).
    #[error("hipErrorIllegalAddress: {0}")]
    IllegalAddress(String),
    /// A launch asking more of the kernel or device than it has: threads past the kernel's
    /// `max_flat_workgroup_size`, LDS past 64 KiB, registers past the register file.
    #[error("hipErrorLaunchOutOfResources: {0}")]
    LaunchOutOfResources(String),
    /// A wave ran past the emulator's instruction limit (a hang; sticky).
    #[error("hipErrorLaunchTimeOut: {0}")]
    LaunchTimeOut(String),
    /// Any other fault of the machine code (sticky).
    #[error("hipErrorLaunchFailure: {0}")]
    LaunchFailure(String),
    /// What the emulated runtime cannot do here (no disassembler to read a code object).
    #[error("hipErrorNotSupported: {0}")]
    NotSupported(String),
}

impl HipError {
    /// The `hipError_t` value (hip_runtime_api.h).
    pub fn code(&self) -> i32 {
        match self {
            HipError::InvalidValue(_) => 1,
            HipError::OutOfMemory(_) => 2,
            HipError::InvalidConfiguration(_) => 9,
            HipError::InvalidDevicePointer(_) => 17,
            HipError::InvalidMemcpyDirection(_) => 21,
            HipError::NoDevice(_) => 100,
            HipError::InvalidDevice(_) => 101,
            HipError::InvalidImage(_) => 200,
            HipError::NoBinaryForGpu(_) => 209,
            HipError::InvalidHandle(_) => 400,
            HipError::NotFound(_) => 500,
            HipError::IllegalAddress(_) => 700,
            HipError::LaunchOutOfResources(_) => 701,
            HipError::LaunchTimeOut(_) => 702,
            HipError::LaunchFailure(_) => 719,
            HipError::NotSupported(_) => 801,
        }
    }

    /// Errors of a kernel's execution: once one happened the device is unusable and every later
    /// call that touches it returns it (HIP's sticky errors, as after a GPU page fault).
    pub fn is_sticky(&self) -> bool {
        matches!(
            self,
            HipError::IllegalAddress(_) | HipError::LaunchTimeOut(_) | HipError::LaunchFailure(_)
        )
    }
}

/// A kernel fault of the ISA emulator as the HIP status a GPU would report.
pub fn from_fault(fault: &w4a16_emu::fault::Fault) -> HipError {
    use w4a16_emu::fault::FaultKind;
    let text = fault.to_string();
    match fault.kind {
        FaultKind::OutOfBounds { .. } => HipError::IllegalAddress(text),
        FaultKind::Hang { .. } => HipError::LaunchTimeOut(text),
        _ => HipError::LaunchFailure(text),
    }
}

pub type HipResult<T> = Result<T, HipError>;
