//! One way to turn a failed CUDA driver call into the crate's runtime error:
//! the message names the GPU, the call (with what it was for) and the
//! driver's own name and text of the error, e.g.
//! `GPU 0 (NVIDIA H200): cuMemAlloc (send buffer, 4 GiB) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.

use crate::error::{Error, Result};
use cudarc::driver::DriverError;
use std::fmt::Display;

/// A GPU known only by its ordinal, as messages name it: `GPU 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuId(pub usize);

impl std::fmt::Display for GpuId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GPU {}", self.0)
    }
}

/// A driver error as one readable phrase: `CUDA_ERROR_X (text)`.
pub fn describe(err: &DriverError) -> String {
    // SAFETY: a dlopen probe only; without a driver library cudarc would
    // panic inside cuGetErrorName instead of returning an error.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return format!("{:?}", err.0);
    }
    let name = err
        .error_name()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", err.0));
    match err.error_string() {
        Ok(text) => format!("{name} ({})", text.to_string_lossy()),
        Err(_) => name,
    }
}

/// `call` failed on `gpu` with `err`: `{gpu}: {call} failed: CUDA_ERROR_X (text)`.
pub fn cuda_error(gpu: impl Display, call: impl Display, err: &DriverError) -> Error {
    Error::runtime(format!("{gpu}: {call} failed: {}", describe(err)))
}

/// Naming the GPU and the call on a driver result. Both are formatted only
/// when the call failed, so a launch in a timed loop costs no formatting:
/// pass `format_args!` for a call with details.
pub trait CudaResult<T> {
    /// Ok as it is; an error as [`cuda_error`].
    fn on_gpu(self, gpu: impl Display, call: impl Display) -> Result<T>;
}

impl<T> CudaResult<T> for std::result::Result<T, DriverError> {
    fn on_gpu(self, gpu: impl Display, call: impl Display) -> Result<T> {
        self.map_err(|e| cuda_error(gpu, call, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    #[test]
    fn the_message_names_gpu_call_and_error() {
        let failed: std::result::Result<(), DriverError> =
            Err(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        let size = 4u64 << 30;
        let message = failed
            .on_gpu(
                GpuId(1),
                format_args!("cuMemAlloc (send, {})", crate::units::format_size(size)),
            )
            .unwrap_err()
            .to_string();
        // The driver's name for the error, or (without a driver) the enum's, which is the same.
        assert!(
            message.starts_with("GPU 1: cuMemAlloc (send, 4 GiB) failed: CUDA_ERROR_OUT_OF_MEMORY"),
            "{message}"
        );
        let ok: std::result::Result<u8, DriverError> = Ok(7);
        assert_eq!(ok.on_gpu(GpuId(0), "cuInit").unwrap(), 7);
    }
}
