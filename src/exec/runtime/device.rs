//! The GPUs: contexts, streams, peer access, the host-mapped abort flag.

use super::*;

// ------------------------------------------------------------ small helpers

/// Calls that concern the driver, not one GPU, name it in errors.
pub(super) const DRIVER: &str = "CUDA driver";

/// A raw CUDA handle moved into a launching thread; Send only for the
/// handle types below, each of which a launching thread uses.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sendable<T>(pub(super) T);
// SAFETY (for each impl below): the handle is an opaque pointer owned by the
// driver, not memory Rust reads; the driver API is thread-safe and lets any
// host thread use a handle once the handle's context is current on it, and
// every launching thread makes its GPU's context current first (`bind`).
// The executor creates and destroys these handles on the calling thread,
// before and after the scoped launching threads run.
//
// SAFETY: a context: what the launching thread makes current.
unsafe impl Send for Sendable<sys::CUcontext> {}
// SAFETY: a stream of that context: where the thread launches and records.
unsafe impl Send for Sendable<sys::CUstream> {}
// SAFETY: the collective kernel of a module loaded in that context.
unsafe impl Send for Sendable<sys::CUfunction> {}
// SAFETY: a timing event of that context, recorded on the stream.
unsafe impl Send for Sendable<sys::CUevent> {}
// SAFETY: an instantiated graph of that context, launched on the stream.
unsafe impl Send for Sendable<sys::CUgraphExec> {}

pub(super) struct Gpu {
    pub(super) ordinal: usize,
    pub(super) name: String,
    pub(super) dev: sys::CUdevice,
    pub(super) ctx: sys::CUcontext,
    pub(super) stream: sys::CUstream,
    pub(super) sm_count: usize,
    pub(super) cc: (i32, i32),
}

impl Gpu {
    pub(super) fn bind(&self) -> Result<()> {
        // SAFETY: ctx is this GPU's retained primary context.
        unsafe { result::ctx::set_current(self.ctx) }.on_gpu(self, "cuCtxSetCurrent")
    }
    pub(super) fn label(&self) -> String {
        self.to_string()
    }
    /// `bytes` of device memory on this GPU (`what` names it in an error).
    pub(super) fn alloc(&self, bytes: usize, what: &str) -> Result<DeviceBuffer> {
        // SAFETY: the primary context stays retained until Executor::drop,
        // which frees (or, after an abort, leaks) every buffer before it
        // releases the context.
        unsafe { DeviceBuffer::in_raw_context(self.ctx, self, bytes, what) }
    }
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GPU {} ({})", self.ordinal, self.name)
    }
}

/// Host memory the GPUs can read (the abort flag).
pub(super) struct MappedFlag {
    pub(super) host: *mut u32,
}

impl MappedFlag {
    pub(super) fn new(gpu: &Gpu) -> Result<MappedFlag> {
        gpu.bind()?;
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: allocates 4 bytes of pinned, mapped host memory.
        let host = unsafe { result::malloc_host(4, flags) }
            .on_gpu(gpu, "cuMemHostAlloc (the mapped abort flag)")? as *mut u32;
        // SAFETY: freshly allocated, 4 bytes, aligned.
        unsafe { std::ptr::write_volatile(host, 0) };
        Ok(MappedFlag { host })
    }
    pub(super) fn device_ptr(&self, gpu: &Gpu) -> Result<u64> {
        gpu.bind()?;
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: host is a DEVICEMAP|PORTABLE allocation, valid in every context.
        let rc =
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, self.host as *mut c_void, 0) };
        rc.result()
            .on_gpu(gpu, "cuMemHostGetDevicePointer (the abort flag)")?;
        Ok(dptr)
    }
    pub(super) fn set(&self, v: u32) {
        // SAFETY: valid for the lifetime of self.
        unsafe { std::ptr::write_volatile(self.host, v) };
    }
}

impl Drop for MappedFlag {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        unsafe {
            let _ = result::free_host(self.host as *mut c_void);
        }
    }
}

/// Which GPU holds rank `r`.
pub(super) fn gpu_of(virtual_ranks: Option<usize>, r: usize) -> usize {
    if virtual_ranks.is_some() {
        0
    } else {
        r
    }
}

/// How many GPUs there are (after checking that the driver is usable).
pub(crate) fn device_count() -> Result<usize> {
    gpu::require_driver()?;
    result::init().on_gpu(DRIVER, "cuInit")?;
    let n = result::device::get_count().on_gpu(DRIVER, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

pub(super) fn open_gpu(ordinal: usize) -> Result<Gpu> {
    let id = GpuId(ordinal);
    let dev = result::device::get(ordinal as i32).on_gpu(id, "cuDeviceGet")?;
    let name = result::device::get_name(dev).unwrap_or_else(|_| "unknown GPU".to_string());
    // Mapped host memory (the abort flag) needs CU_CTX_MAP_HOST; this fails
    // harmlessly if the primary context is already active (then UVA maps it).
    // SAFETY: valid device; only sets creation flags.
    let _ = unsafe {
        sys::cuDevicePrimaryCtxSetFlags_v2(dev, sys::CUctx_flags::CU_CTX_MAP_HOST as u32)
    };
    // SAFETY: dev is a valid device; the retained context is released in Executor::drop.
    let ctx = unsafe { result::primary_ctx::retain(dev) }.on_gpu(id, "cuDevicePrimaryCtxRetain")?;
    // SAFETY: valid context.
    unsafe { result::ctx::set_current(ctx) }.on_gpu(id, "cuCtxSetCurrent")?;
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
        .on_gpu(id, "cuStreamCreate")?;
    let attr = |a| {
        // SAFETY: valid device and attribute.
        unsafe { result::device::get_attribute(dev, a) }.on_gpu(id, "cuDeviceGetAttribute")
    };
    let sm_count =
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize;
    let cc = (
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    Ok(Gpu {
        ordinal,
        name,
        dev,
        ctx,
        stream,
        sm_count,
        cc,
    })
}

pub(super) fn enable_peer(a: &Gpu, b: &Gpu) -> Result<()> {
    let mut can = 0i32;
    // SAFETY: valid devices, valid out-pointer.
    let rc = unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.dev, b.dev) };
    rc.result()
        .on_gpu(a, format_args!("cuDeviceCanAccessPeer (to {b})"))?;
    if can == 0 {
        return Err(Error::runtime(format!(
            "peer access from {} to {} is not available: the executor needs the two GPUs to read and write each other's memory (NVLink or a PCIe switch)",
            a.label(),
            b.label()
        )));
    }
    a.bind()?;
    // SAFETY: b's context is a valid primary context.
    let rc = unsafe { sys::cuCtxEnablePeerAccess(b.ctx, 0) };
    match rc {
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
            Ok(())
        }
        other => Err(gpu::cuda_error(
            a,
            format_args!("cuCtxEnablePeerAccess (to {b})"),
            &DriverError(other),
        )),
    }
}
