//! Device memory from plain `cuMemAlloc`, freed on drop. Plain allocations,
//! not a stream-ordered pool: peers map them after `cuCtxEnablePeerAccess`
//! (the executor's FIFOs) and NCCL may register them (its CUDA-graph mode),
//! which pool memory does not allow.

use crate::error::Result;
use crate::gpu::error::CudaResult;
use crate::units::format_size;
use cudarc::driver::{result, sys, CudaContext};
use std::fmt::Display;
use std::sync::Arc;

/// The smallest allocation (a zero-byte request still gets a valid pointer).
const MIN_BYTES: usize = 256;

/// Device memory of one GPU, freed on drop in the context it came from.
pub struct DeviceBuffer {
    ptr: u64,
    bytes: usize,
    ctx: sys::CUcontext,
    /// Keeps a cudarc context retained until the memory is freed (None: the
    /// owner keeps the context alive, see `in_raw_context`).
    _context: Option<Arc<CudaContext>>,
}

impl DeviceBuffer {
    /// `bytes` (at least 256) in `ctx`, which the buffer keeps alive. `gpu`
    /// and `what` name the allocation in an error.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        gpu: impl Display,
        bytes: usize,
        what: &str,
    ) -> Result<DeviceBuffer> {
        // SAFETY: the Arc stored in the buffer keeps the context alive until
        // the buffer is dropped.
        let mut buffer = unsafe { DeviceBuffer::in_raw_context(ctx.cu_ctx(), gpu, bytes, what)? };
        buffer._context = Some(ctx.clone());
        Ok(buffer)
    }

    /// `bytes` (at least 256) in a context the caller manages.
    ///
    /// # Safety
    /// `ctx` must be a valid context that stays alive (retained) until this
    /// buffer is dropped or leaked.
    pub(crate) unsafe fn in_raw_context(
        ctx: sys::CUcontext,
        gpu: impl Display,
        bytes: usize,
        what: &str,
    ) -> Result<DeviceBuffer> {
        let bytes = bytes.max(MIN_BYTES);
        // SAFETY: the caller guarantees `ctx` is valid.
        unsafe { result::ctx::set_current(ctx) }.on_gpu(&gpu, "cuCtxSetCurrent")?;
        // SAFETY: a plain allocation in the current context; freed once, in
        // drop, with the same context current.
        let ptr = unsafe { result::malloc_sync(bytes) }.on_gpu(
            &gpu,
            format_args!("cuMemAlloc ({what}, {})", format_size(bytes as u64)),
        )?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            ctx,
            _context: None,
        })
    }

    /// The device address.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The allocated size (at least 256 bytes).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Set every byte to zero (synchronous).
    pub(crate) fn zero(&self, gpu: impl Display) -> Result<()> {
        // SAFETY: the context is alive while the buffer is (see the constructors).
        unsafe { result::ctx::set_current(self.ctx) }.on_gpu(&gpu, "cuCtxSetCurrent")?;
        // SAFETY: the range is exactly this allocation.
        unsafe { result::memset_d8_sync(self.ptr, 0, self.bytes) }
            .on_gpu(&gpu, "cuMemsetD8 (clearing)")
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAlloc in `ctx`, which is still alive
        // (see the constructors), and is freed exactly once; the owners
        // synchronise all work using it before dropping it (or leak it).
        unsafe {
            if result::ctx::set_current(self.ctx).is_ok() {
                let _ = result::free_sync(self.ptr);
            }
        }
    }
}
