//! Link tests as nvbandwidth runs them (`planner doctor`): one copy of `bytes` per repeat between CUDA events, on
//! pinned host memory and plain device memory, through the copy engines (`cuMemcpy*Async`, issued on the stream of
//! the GPU whose engine should do it) or through SM kernels (`kernels/copy.cu`, a grid-stride 16-byte copy on
//! the issuing GPU, reading or writing its peer's memory over the P2P mapping). One warm-up copy first; the times
//! are per repeat in ms, for the caller to take the median.
//!
//! GPUs are named by NVML index (the doctor's numbering) and matched to CUDA ordinals by PCI location, so
//! `CUDA_VISIBLE_DEVICES` and CUDA's fastest-first order change nothing.

use crate::error::{Error, Result};
use crate::gpu::error::CudaResult;
use crate::gpu::nvrtc;
use crate::units::format_size;
use cudarc::driver::{result, sys};
use std::ffi::{c_void, CString};

/// Threads per block of the SM copy kernel.
const COPY_THREADS: u32 = 512;
/// Blocks per SM of the SM copy kernel (enough in flight to cover the latency of a peer read).
const COPY_BLOCKS_PER_SM: u32 = 4;

struct Gpu {
    index: u32,
    ctx: sys::CUcontext,
    dev: sys::CUdevice,
    /// Two streams: a bidirectional test runs one direction on each.
    streams: [sys::CUstream; 2],
    sm_count: u32,
    cc: (i32, i32),
    /// Loaded on first use: the SM copy kernel's module and function.
    copy_kernel: Option<(sys::CUmodule, sys::CUfunction)>,
    /// Device memory for the tests: two buffers of the test size (source and destination).
    buffers: Vec<u64>,
    buffer_bytes: usize,
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GPU {}", self.index)
    }
}

/// How a copy is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    CopyEngine,
    Sm,
}

/// A copy between two GPUs: `from` -> `to`, issued by the reader (`read`: `to` pulls) or the writer, both ways
/// at once when `bidirectional`, through `engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerCopy {
    pub(crate) from: u32,
    pub(crate) to: u32,
    pub(crate) read: bool,
    pub(crate) bidirectional: bool,
    pub(crate) engine: Engine,
}

/// One direction of a copy: on `issuer`'s stream `lane`, from `src` to `dst` (UVA addresses).
#[derive(Debug, Clone, Copy)]
struct Copy {
    issuer: usize,
    lane: usize,
    src: u64,
    dst: u64,
}

/// The GPUs, their buffers and pinned host memory.
pub(crate) struct CopyTester {
    gpus: Vec<Option<Gpu>>,
    /// Pinned host buffers (two, of `host_bytes`), portable to every context.
    host: Vec<*mut c_void>,
    host_bytes: usize,
    /// Peer access already enabled, as (from, to) NVML indices.
    peers: Vec<(u32, u32)>,
}

impl CopyTester {
    /// Open the GPUs whose NVML PCI bus ids are `bus_ids` (in NVML order). A GPU CUDA does not show stays
    /// closed: its tests fail naming it.
    pub(crate) fn open(bus_ids: &[String]) -> Result<CopyTester> {
        crate::gpu::require_driver()?;
        result::init().on_gpu("CUDA driver", "cuInit")?;
        let count = result::device::get_count().on_gpu("CUDA driver", "cuDeviceGetCount")?;
        let mut by_location = Vec::new();
        for ordinal in 0..count {
            let dev = result::device::get(ordinal).on_gpu("CUDA driver", "cuDeviceGet")?;
            // SAFETY: dev was just returned by cuDeviceGet for a valid ordinal.
            let attr = |a| unsafe { result::device::get_attribute(dev, a) }.unwrap_or(-1);
            let location = format!(
                "{:04x}:{:02x}:{:02x}",
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
                attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
            );
            by_location.push((location, dev));
        }
        let mut gpus = Vec::new();
        for (index, bus) in bus_ids.iter().enumerate() {
            // NVML writes 00000000:18:00.0; CUDA's location is 0000:18:00.
            let short = nccl_style(bus);
            let dev = by_location
                .iter()
                .find(|(loc, _)| short.starts_with(loc.as_str()))
                .map(|(_, d)| *d);
            gpus.push(match dev {
                Some(dev) => Some(open_gpu(index as u32, dev)?),
                None => None,
            });
        }
        Ok(CopyTester {
            gpus,
            host: Vec::new(),
            host_bytes: 0,
            peers: Vec::new(),
        })
    }

    fn gpu(&self, index: u32) -> Result<&Gpu> {
        self.gpus
            .get(index as usize)
            .and_then(|g| g.as_ref())
            .ok_or_else(|| {
                Error::runtime(format!(
                    "GPU {index}: not visible to CUDA (CUDA_VISIBLE_DEVICES?)"
                ))
            })
    }

    fn gpu_mut(&mut self, index: u32) -> Result<&mut Gpu> {
        self.gpu(index)?;
        Ok(self.gpus[index as usize].as_mut().expect("checked above"))
    }

    /// Two device buffers of at least `bytes` on GPU `index`.
    fn ensure_buffers(&mut self, index: u32, bytes: usize) -> Result<[u64; 2]> {
        let g = self.gpu_mut(index)?;
        if g.buffer_bytes < bytes {
            bind(g)?;
            for ptr in g.buffers.drain(..) {
                // SAFETY: allocated below in this context; no copy is in flight (every test synchronises).
                unsafe {
                    let _ = result::free_sync(ptr);
                }
            }
            g.buffer_bytes = 0;
            for what in ["source", "destination"] {
                // SAFETY: a plain allocation in the current context, freed in drop or above.
                let ptr = unsafe { result::malloc_sync(bytes) }.on_gpu(
                    &*g,
                    format_args!("cuMemAlloc ({what}, {})", format_size(bytes as u64)),
                )?;
                g.buffers.push(ptr);
            }
            g.buffer_bytes = bytes;
            for &ptr in &g.buffers {
                // SAFETY: the range is exactly the allocation.
                unsafe { result::memset_d8_sync(ptr, 0x5a, bytes) }.on_gpu(&*g, "cuMemsetD8")?;
            }
        }
        Ok([g.buffers[0], g.buffers[1]])
    }

    /// Two pinned host buffers of at least `bytes`.
    fn ensure_host(&mut self, bytes: usize, gpu: u32) -> Result<[u64; 2]> {
        if self.host_bytes < bytes {
            bind(self.gpu(gpu)?)?;
            for p in self.host.drain(..) {
                // SAFETY: allocated below by cuMemHostAlloc; no copy is in flight.
                unsafe {
                    let _ = result::free_host(p);
                }
            }
            self.host_bytes = 0;
            for _ in 0..2 {
                // SAFETY: pinned host memory, portable to every context; freed in drop or above.
                let p = unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }
                    .on_gpu(
                        format_args!("GPU {gpu}"),
                        format_args!("cuMemHostAlloc (pinned, {})", format_size(bytes as u64)),
                    )?;
                // SAFETY: p points to `bytes` writable bytes just allocated.
                unsafe { std::ptr::write_bytes(p as *mut u8, 0x5a, bytes) };
                self.host.push(p);
            }
            self.host_bytes = bytes;
        }
        // With unified addressing (every 64-bit Linux CUDA context) a pinned host pointer is its own UVA address.
        Ok([self.host[0] as u64, self.host[1] as u64])
    }

    /// Host to GPU (`to_device`) or back, through GPU `gpu`'s copy engine: ms per repeat.
    pub(crate) fn host_copy(
        &mut self,
        gpu: u32,
        to_device: bool,
        bytes: usize,
        repeats: u32,
    ) -> Result<Vec<f64>> {
        let [h0, _] = self.ensure_host(bytes, gpu)?;
        let [d0, _] = self.ensure_buffers(gpu, bytes)?;
        let (src, dst) = if to_device { (h0, d0) } else { (d0, h0) };
        let copy = Copy {
            issuer: gpu as usize,
            lane: 0,
            src,
            dst,
        };
        Ok(self
            .timed(&[copy], Engine::CopyEngine, bytes, repeats)?
            .remove(0))
    }

    /// Host to GPU and GPU to host at once: (to the device, to the host) ms per repeat.
    pub(crate) fn host_bidirectional(
        &mut self,
        gpu: u32,
        bytes: usize,
        repeats: u32,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let [h0, h1] = self.ensure_host(bytes, gpu)?;
        let [d0, d1] = self.ensure_buffers(gpu, bytes)?;
        let i = gpu as usize;
        let copies = [
            Copy {
                issuer: i,
                lane: 0,
                src: h0,
                dst: d0,
            },
            Copy {
                issuer: i,
                lane: 1,
                src: d1,
                dst: h1,
            },
        ];
        let mut t = self.timed(&copies, Engine::CopyEngine, bytes, repeats)?;
        let back = t.remove(1);
        Ok((t.remove(0), back))
    }

    /// Enable peer access from `a` to `b` (a's work may touch b's memory); Err(reason) when the driver refuses.
    pub(crate) fn enable_peer(&mut self, a: u32, b: u32) -> std::result::Result<(), String> {
        if self.peers.contains(&(a, b)) {
            return Ok(());
        }
        let ga = self.gpu(a).map_err(|e| e.to_string())?;
        let gb = self.gpu(b).map_err(|e| e.to_string())?;
        let mut can = 0;
        // SAFETY: both devices come from cuDeviceGet; `can` is a valid out pointer.
        let rc = unsafe { sys::cuDeviceCanAccessPeer(&mut can, ga.dev, gb.dev) };
        if rc != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuDeviceCanAccessPeer failed: {rc:?}"));
        }
        if can == 0 {
            return Err(format!(
                "cuDeviceCanAccessPeer: GPU {a} cannot access GPU {b} (no P2P path: ACS/IOMMU, a VM, or P2P off across the CPU sockets)"
            ));
        }
        bind(ga).map_err(|e| e.to_string())?;
        // SAFETY: both contexts are retained primary contexts of live devices.
        let rc = unsafe { sys::cuCtxEnablePeerAccess(gb.ctx, 0) };
        if rc != sys::CUresult::CUDA_SUCCESS
            && rc != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        {
            return Err(format!(
                "cuCtxEnablePeerAccess (GPU {a} to GPU {b}) failed: {}",
                crate::gpu::describe(&cudarc::driver::DriverError(rc))
            ));
        }
        self.peers.push((a, b));
        Ok(())
    }

    /// GPU `from` to GPU `to`: issued by the reader (`read`: `to` pulls) or the writer (`from` pushes), through
    /// `engine`. Bidirectional: both ways at once, each issued the same way; the second list is `to` -> `from`.
    /// Peer access must be enabled both ways.
    pub(crate) fn peer_copy(
        &mut self,
        p: PeerCopy,
        bytes: usize,
        repeats: u32,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let PeerCopy {
            from,
            to,
            read,
            bidirectional,
            engine,
        } = p;
        let [f0, f1] = self.ensure_buffers(from, bytes)?;
        let [t0, t1] = self.ensure_buffers(to, bytes)?;
        let issuer = |src_gpu: u32, dst_gpu: u32| if read { dst_gpu } else { src_gpu } as usize;
        let mut copies = vec![Copy {
            issuer: issuer(from, to),
            lane: 0,
            src: f0,
            dst: t1,
        }];
        if bidirectional {
            copies.push(Copy {
                issuer: issuer(to, from),
                lane: 1,
                src: t0,
                dst: f1,
            });
        }
        let mut t = self.timed(&copies, engine, bytes, repeats)?;
        let back = if bidirectional {
            t.remove(1)
        } else {
            Vec::new()
        };
        Ok((t.remove(0), back))
    }

    /// Run `copies` at once, one warm-up then `repeats` timed rounds: per copy, ms per round.
    fn timed(
        &mut self,
        copies: &[Copy],
        engine: Engine,
        bytes: usize,
        repeats: u32,
    ) -> Result<Vec<Vec<f64>>> {
        if engine == Engine::Sm {
            for c in copies {
                self.ensure_copy_kernel(c.issuer as u32)?;
            }
        }
        let mut events = Vec::new();
        for c in copies {
            let g = self.gpu(c.issuer as u32)?;
            bind(g)?;
            let start = Event::new(g)?;
            let end = Event::new(g)?;
            events.push((start, end));
        }
        let mut times = vec![Vec::new(); copies.len()];
        for round in 0..=repeats {
            for (c, (start, end)) in copies.iter().zip(&events) {
                let g = self.gpu(c.issuer as u32)?;
                bind(g)?;
                let stream = g.streams[c.lane];
                // SAFETY: events and stream belong to this context.
                unsafe { result::event::record(start.0, stream) }.on_gpu(g, "cuEventRecord")?;
                issue(g, stream, *c, engine, bytes)?;
                // SAFETY: as above.
                unsafe { result::event::record(end.0, stream) }.on_gpu(g, "cuEventRecord")?;
            }
            for (i, (c, (start, end))) in copies.iter().zip(&events).enumerate() {
                let g = self.gpu(c.issuer as u32)?;
                bind(g)?;
                // SAFETY: a recorded event of this context. A hung copy blocks here: the doctor's watchdog (another
                // thread) gives up on this one.
                unsafe { result::event::synchronize(end.0) }
                    .on_gpu(g, "waiting for the copy (cuEventSynchronize)")?;
                // SAFETY: both events recorded and complete.
                let ms = unsafe { result::event::elapsed(start.0, end.0) }
                    .on_gpu(g, "cuEventElapsedTime")?;
                if round > 0 {
                    times[i].push(f64::from(ms));
                }
            }
        }
        Ok(times)
    }

    fn ensure_copy_kernel(&mut self, index: u32) -> Result<()> {
        let g = self.gpu_mut(index)?;
        if g.copy_kernel.is_some() {
            return Ok(());
        }
        let cubin = compile_copy_kernel(&nvrtc::arch_of(g.cc))?;
        bind(g)?;
        // SAFETY: a complete CUBIN NVRTC produced for this GPU's architecture.
        let module = unsafe { result::module::load_data(cubin.image.as_ptr() as *const c_void) }
            .on_gpu(&*g, "cuModuleLoadData (planner_copy)")?;
        // SAFETY: module is loaded; the name is a NUL-free literal.
        let function = unsafe {
            result::module::get_function(module, CString::new("planner_copy").expect("literal"))
        }
        .on_gpu(&*g, "cuModuleGetFunction (planner_copy)")?;
        g.copy_kernel = Some((module, function));
        Ok(())
    }
}

/// The SM copy kernel (`kernels/copy.cu`, `planner_copy`) compiled for `arch` ("sm_90").
pub fn compile_copy_kernel(arch: &str) -> Result<nvrtc::Cubin> {
    let source = nvrtc::program_source("planner_copy", &[], &[nvrtc::COPY_CU])?;
    nvrtc::compile("planner_copy", &source, arch, &[])
}

/// NVML's `00000000:18:00.0` as `0000:18:00.0`, lower case.
fn nccl_style(bus: &str) -> String {
    let lower = bus.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => lower,
    }
}

fn bind(g: &Gpu) -> Result<()> {
    // SAFETY: the context is retained for the tester's lifetime.
    unsafe { result::ctx::set_current(g.ctx) }.on_gpu(g, "cuCtxSetCurrent")
}

/// One copy on `stream` of `g` (whose context is current).
fn issue(g: &Gpu, stream: sys::CUstream, c: Copy, engine: Engine, bytes: usize) -> Result<()> {
    match engine {
        Engine::CopyEngine => {
            // SAFETY: src and dst are UVA addresses of live allocations of at least `bytes` (device buffers or
            // pinned host memory), reachable from this context (peer access enabled by the caller).
            unsafe { sys::cuMemcpyAsync(c.dst, c.src, bytes, stream) }
                .result()
                .on_gpu(
                    g,
                    format_args!("cuMemcpyAsync ({})", format_size(bytes as u64)),
                )
        }
        Engine::Sm => {
            let (_, function) = g
                .copy_kernel
                .ok_or_else(|| Error::runtime("copy kernel not loaded"))?;
            let mut src = c.src;
            let mut dst = c.dst;
            let mut n16 = (bytes / 16) as u64;
            let mut params: Vec<*mut c_void> = vec![
                (&mut src as *mut u64).cast(),
                (&mut dst as *mut u64).cast(),
                (&mut n16 as *mut u64).cast(),
            ];
            let blocks = g.sm_count.max(1) * COPY_BLOCKS_PER_SM;
            // SAFETY: `function` is planner_copy(const uint4*, uint4*, unsigned long long) of this context's
            // module; src and dst hold at least n16 x 16 bytes reachable from this GPU; params point to locals
            // alive during the call (the driver copies them).
            unsafe {
                result::launch_kernel(
                    function,
                    (blocks, 1, 1),
                    (COPY_THREADS, 1, 1),
                    0,
                    stream,
                    &mut params,
                )
            }
            .on_gpu(g, "cuLaunchKernel (planner_copy)")
        }
    }
}

fn open_gpu(index: u32, dev: sys::CUdevice) -> Result<Gpu> {
    let id = format!("GPU {index}");
    // SAFETY: dev is a valid device; the retained context is released in drop.
    let ctx =
        unsafe { result::primary_ctx::retain(dev) }.on_gpu(&id, "cuDevicePrimaryCtxRetain")?;
    // SAFETY: valid context.
    unsafe { result::ctx::set_current(ctx) }.on_gpu(&id, "cuCtxSetCurrent")?;
    let mut streams = [std::ptr::null_mut(); 2];
    for s in streams.iter_mut() {
        *s = result::stream::create(result::stream::StreamKind::NonBlocking)
            .on_gpu(&id, "cuStreamCreate")?;
    }
    // SAFETY: valid device and attributes.
    let attr =
        |a| unsafe { result::device::get_attribute(dev, a) }.on_gpu(&id, "cuDeviceGetAttribute");
    let sm_count = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let cc = (
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    Ok(Gpu {
        index,
        ctx,
        dev,
        streams,
        sm_count,
        cc,
        copy_kernel: None,
        buffers: Vec::new(),
        buffer_bytes: 0,
    })
}

struct Event(sys::CUevent);

impl Event {
    fn new(g: &Gpu) -> Result<Event> {
        Ok(Event(
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .on_gpu(g, "cuEventCreate")?,
        ))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed once.
        unsafe {
            let _ = result::event::destroy(self.0);
        }
    }
}

impl Drop for CopyTester {
    fn drop(&mut self) {
        // Every test synchronised its copies before returning, so nothing is in flight here. (After a hang the
        // tester is never dropped: its thread is abandoned.)
        for g in self.gpus.iter_mut().flatten() {
            if bind(g).is_err() {
                continue;
            }
            // SAFETY: each resource was created in this context and is released once.
            unsafe {
                for &ptr in &g.buffers {
                    let _ = result::free_sync(ptr);
                }
                if let Some((module, _)) = g.copy_kernel {
                    let _ = result::module::unload(module);
                }
                for &s in &g.streams {
                    let _ = result::stream::destroy(s);
                }
            }
        }
        for &p in &self.host {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            unsafe {
                let _ = result::free_host(p);
            }
        }
        for g in self.gpus.iter().flatten() {
            // SAFETY: retained in open_gpu, released once.
            unsafe {
                let _ = result::primary_ctx::release(g.dev);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_bus_ids_match_cuda_locations() {
        assert_eq!(nccl_style("00000000:18:00.0"), "0000:18:00.0");
        assert_eq!(nccl_style("0000:AB:00.0"), "0000:ab:00.0");
        assert!(nccl_style("00000001:9A:00.0").starts_with("0001:9a:00"));
    }
}
