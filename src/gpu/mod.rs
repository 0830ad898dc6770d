//! GPU plumbing shared by both backends, our executor (`crate::exec`) and
//! the NCCL reference (`crate::nccl`), which do not import each other, and by `planner doctor`'s link tests.
//! Below the measurement vocabulary (`crate::measure`) in the stage order: it reads only the foundations
//! (errors, units, `crate::dtype`) and the model's `Coll`.
//!
//! - `libs`: checks that the driver and NVRTC libraries exist before any call.
//! - `error`: a failed driver call as an error naming the GPU and the call.
//! - `buffer`: device memory from plain cuMemAlloc, freed on drop.
//! - `nvrtc`: the CUDA files in `kernels/` and their compilation to CUBIN.
//! - `bandwidth`: the link tests of `planner doctor` (copies timed with CUDA events).
//! - `pattern`: the test data (inputs, expected outputs, #wrong) on the CPU,
//!   and the launch of its kernels (`kernels/pattern.cu`).

pub mod bandwidth;
pub(crate) mod buffer;
pub(crate) mod error;
pub mod libs;
pub mod nvrtc;
pub mod pattern;

pub use buffer::DeviceBuffer;
pub use error::{cuda_error, describe, CudaResult, GpuId};
pub use libs::{nvrtc_available, require_driver, require_nvrtc};

use crate::model::Coll;

/// A collective's number in the kernels: `PLANNER_COLL` of the executor's
/// collectives (which have no Reduce) and `coll` of `planner_check`.
pub(crate) fn collective_code(collective: Coll) -> i32 {
    match collective {
        Coll::AllReduce => 0,
        Coll::AllGather => 1,
        Coll::ReduceScatter => 2,
        Coll::Broadcast => 3,
        Coll::Reduce => 4,
    }
}
