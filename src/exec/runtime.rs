//! Runs plans on the local GPUs: one process drives every GPU (a primary
//! context, a stream and, while launching, a host thread each), peer access
//! between neighbours, the FIFOs on the receiving GPU, CUDA events for timing,
//! an optional CUDA graph of the timed iterations, in-place or out-of-place
//! buffers, and a virtual-ranks mode that runs N ranks as N buffers on one GPU
//! in one launch with co-resident CTAs.
//!
//! Every run is checked before it is timed: deterministic inputs, one launch,
//! every output element compared on the GPU (and on the CPU for small sizes).
//! A collective that does not finish in time is aborted through a host-mapped
//! flag the kernels poll, and reported with the pair, size and GPU.

use crate::error::{Error, Result};
use crate::exec::kernels::{self, Variant};
use crate::exec::plan::{
    coll_name, kernel_coll_id, ExecPlan, MAX_CHANNELS, MAX_RANKS, MAX_TREE_ARITY,
};
use crate::exec::schedule::{self, buff_bytes};
use crate::gpu::pattern::{self, CheckArgs, DataKernelArgs, FillArgs};
use crate::gpu::{self, nvrtc, CudaResult, DeviceBuffer, GpuId};
use crate::model::{Algo, Coll};
use crate::units::format_size;
use cudarc::driver::{result, sys, DriverError};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::time::{Duration, Instant};

// ------------------------------------------------------------ device layouts

/// `struct Conn` in kernels/common.cuh: device addresses.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conn {
    pub buff: u64,
    pub tail: u64,
    pub head: u64,
    pub step: u64,
}

/// `struct ChannelDesc` in kernels/common.cuh.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelDesc {
    pub ring_recv: Conn,
    pub ring_send: Conn,
    pub tree_recv_up: Conn,
    pub tree_send_up: Conn,
    pub tree_recv_down: [Conn; MAX_TREE_ARITY],
    pub tree_send_down: [Conn; MAX_TREE_ARITY],
    pub user_ranks: [i32; MAX_RANKS],
    pub ring_index: i32,
    pub tree_has_up: i32,
    pub tree_n_down: i32,
    pub rank: i32,
    pub local_rank: i32,
    pub channel: i32,
    pub pad0: i32,
    pub pad1: i32,
}

/// `struct KernelArgs` in kernels/common.cuh, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelArgs {
    pub desc: u64,
    pub abort_flag: u64,
    pub aborted: u64,
    pub send: [u64; MAX_RANKS],
    pub recv: [u64; MAX_RANKS],
    pub chan_off: [i64; MAX_CHANNELS],
    pub chan_count: [i64; MAX_CHANNELS],
    pub call_count: i64,
    pub chunk_elems: i64,
    pub nranks: i32,
    pub nchannels: i32,
    pub root: i32,
    pub slices_per_chunk: i32,
    pub steps_per_slice: i32,
    pub step_bytes: i32,
    pub tree_up_threads: i32,
    pub pad: i32,
}

/// `struct PeerArgs` in kernels/beyond.cu, passed by value to the kernels
/// beyond NCCL (OneShot, TwoShot). Arrays are indexed by global rank: every
/// launch sees every rank's buffers and peer area.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PeerArgs {
    pub abort_flag: u64,
    pub aborted: u64,
    pub send: [u64; MAX_RANKS],
    pub recv: [u64; MAX_RANKS],
    pub area: [u64; MAX_RANKS],
    pub count: i64,
    pub nranks: i32,
    pub nchannels: i32,
    pub first_rank: i32,
    pub inbox_stride: i32,
    pub inbox_channels: i32,
    pub pad: i32,
}

/// Sizes the kernels' static_asserts check (kernels/common.cuh, kernels/beyond.cu).
pub const CHANNEL_DESC_BYTES: usize = 416;
pub const KERNEL_ARGS_BYTES: usize = 1352;
pub const PEER_ARGS_BYTES: usize = 432;

/// The one parameter of a variant's `planner_collective`: `KernelArgs` for
/// Ring and Tree, `PeerArgs` for the kernels beyond NCCL. Copied by value
/// into each launch's parameters, so both stay unboxed.
#[derive(Debug, Clone, Copy)]
#[allow(clippy::large_enum_variant)]
enum LaunchArgs {
    Channels(KernelArgs),
    Peers(PeerArgs),
}

// ------------------------------------------------------------ options, results

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Timed iterations per size.
    pub iters: usize,
    /// Untimed iterations before timing.
    pub warmup: usize,
    /// Capture the timed iterations in a CUDA graph (nccl-tests -G).
    pub graph: bool,
    /// A collective that takes longer is aborted.
    pub timeout: Duration,
    /// Run N ranks as N buffers on GPU 0.
    pub virtual_ranks: Option<usize>,
    /// Use only the first N GPUs (real mode).
    pub gpus: Option<usize>,
    /// Seed of the input pattern.
    pub seed: u32,
    /// Also compare on the CPU when one rank's output is at most this many bytes.
    pub cpu_check_bytes: u64,
    /// Fault injection (`planner run --inject-fault`): None in every real run.
    pub fault: Option<Fault>,
}

/// A fault `planner run --inject-fault` injects, to show that the checks catch it (README,
/// "Testing"): each must end the run with exit code 1 and a message naming what broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// One element of the last rank's output is overwritten after the checked call: the
    /// checker must count it (#wrong 1).
    WrongElement,
    /// CTA 0 of every launch spins until the abort flag: the watchdog (--timeout) must abort it.
    Hang,
    /// Device memory is taken in chunks until cuMemAlloc fails, before the executor allocates
    /// its own: the executor's allocation must fail with a clear out-of-memory error.
    Oom,
}

impl Fault {
    pub const NAMES: &'static str = "wrong-element, hang, oom";

    pub fn parse(text: &str) -> Result<Fault> {
        match text.trim().to_ascii_lowercase().as_str() {
            "wrong-element" => Ok(Fault::WrongElement),
            "hang" => Ok(Fault::Hang),
            "oom" => Ok(Fault::Oom),
            _ => Err(Error::bad_input(format!(
                "invalid --inject-fault '{text}': known faults: {}",
                Fault::NAMES
            ))),
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            iters: 20,
            warmup: 5,
            graph: false,
            timeout: Duration::from_secs(30),
            virtual_ranks: None,
            gpus: None,
            seed: pattern::DEFAULT_SEED,
            cpu_check_bytes: 1 << 20,
            fault: None,
        }
    }
}

/// One measured size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub bytes: u64,
    /// Elements per call (per rank for all-gather / reduce-scatter), as nccl-tests prints.
    pub count: u64,
    pub n_channels: usize,
    pub n_threads: usize,
    /// Mean over ranks of the time per iteration, µs.
    pub time_us: f64,
    /// Per GPU (real mode) or the one GPU (virtual), µs per iteration.
    pub gpu_time_us: Vec<f64>,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    /// Wrong output elements over all ranks.
    pub wrong: u64,
    /// First wrong element: (rank, index).
    pub first_wrong: Option<(usize, u64)>,
    /// Whether the CPU also compared the output.
    pub cpu_checked: bool,
}

/// A whole `planner run`: the plan (at its largest size), the machine, the
/// timing mode and one result per size.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub plan: ExecPlan,
    pub device: DeviceInfo,
    pub graph: bool,
    pub iters: usize,
    pub warmup: usize,
    pub results: Vec<SizeResult>,
}

/// What the runtime ran on.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub gpus: Vec<String>,
    pub driver_version: String,
    pub nvrtc_version: String,
    pub arch: String,
    pub virtual_ranks: Option<usize>,
}

/// Wrong elements over all ranks, the first one (rank, index), and whether the CPU compared too.
type CheckOutcome = (u64, Option<(usize, u64)>, bool);

// ------------------------------------------------------------ small helpers

/// Calls that concern the driver, not one GPU, name it in errors.
const DRIVER: &str = "CUDA driver";

/// A raw CUDA handle moved into a launching thread; Send only for the
/// handle types below, each of which a launching thread uses.
#[derive(Debug, Clone, Copy)]
struct Sendable<T>(T);
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

/// How the collective kernel is launched on sm_90 and newer, as NCCL does
/// (`enqueue.cc`, ncclLaunchKernel): CTAs in thread-block clusters of 4
/// spread over the GPCs, and the "remote" memory-synchronisation domain, so a
/// system fence waits only for this kernel's kind of traffic. Investigation
/// knobs: `PLANNER_CGA_CLUSTER` (0 or 1: no clusters, 2..8: that size) and
/// `PLANNER_MEM_SYNC_DOMAIN` (0: default domain, 1: remote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    /// CTAs per cluster; 1 means no cluster attribute.
    pub cluster: u32,
    /// CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN value, None: not set.
    pub mem_sync_domain: Option<u32>,
}

impl LaunchShape {
    /// NCCL's default cluster size on sm_90+ (`init.cc`, cgaClusterSize 4).
    pub const NCCL_CLUSTER: u32 = 4;

    /// The shape for `ctas` CTAs on a GPU of compute capability `cc`. Virtual
    /// ranks need every CTA co-resident, so they get no clusters.
    pub fn for_launch(cc: (i32, i32), ctas: usize, virtual_ranks: bool) -> Result<LaunchShape> {
        if cc.0 < 9 {
            return Ok(LaunchShape {
                cluster: 1,
                mem_sync_domain: None,
            });
        }
        let cluster = match env_u32("PLANNER_CGA_CLUSTER", 0..=8)? {
            Some(0) => 1,
            Some(n) => n,
            None => Self::NCCL_CLUSTER,
        };
        // NCCL falls back to no clusters when the grid does not divide.
        let cluster = if virtual_ranks || !ctas.is_multiple_of(cluster as usize) {
            1
        } else {
            cluster
        };
        let domain = env_u32("PLANNER_MEM_SYNC_DOMAIN", 0..=1)?.unwrap_or(1);
        Ok(LaunchShape {
            cluster,
            mem_sync_domain: Some(domain),
        })
    }

    fn attributes(&self) -> Vec<sys::CUlaunchAttribute> {
        let mut attrs = Vec::new();
        if self.cluster > 1 {
            // SAFETY: a zeroed attribute is a valid plain-data value; the id
            // says which union member the driver reads.
            let mut dim: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            dim.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            dim.value.clusterDim.x = self.cluster;
            dim.value.clusterDim.y = 1;
            dim.value.clusterDim.z = 1;
            attrs.push(dim);
            // SAFETY: as above.
            let mut policy: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            policy.id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
            policy.value.clusterSchedulingPolicyPreference =
                sys::CUclusterSchedulingPolicy::CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
            attrs.push(policy);
        }
        if let Some(d) = self.mem_sync_domain {
            // SAFETY: as above.
            let mut dom: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            dom.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
            dom.value.memSyncDomain = if d == 1 {
                sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE
            } else {
                sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT
            };
            attrs.push(dom);
        }
        attrs
    }
}

/// What a launching thread needs to launch the collective on one GPU:
/// handles (Send, see `Sendable`) and plain values, no reference to the
/// executor.
#[derive(Debug, Clone)]
struct CollectiveLauncher {
    /// The GPU as messages name it.
    label: String,
    ctx: Sendable<sys::CUcontext>,
    stream: Sendable<sys::CUstream>,
    function: Sendable<sys::CUfunction>,
    ctas: usize,
    threads: usize,
    shape: LaunchShape,
}

impl CollectiveLauncher {
    /// Make the GPU's context current on this thread.
    fn bind(&self) -> Result<()> {
        // SAFETY: the executor's retained primary context, alive while it is.
        unsafe { result::ctx::set_current(self.ctx.0) }.on_gpu(&self.label, "cuCtxSetCurrent")
    }

    /// Enqueue one collective (`plan` names it in an error).
    fn launch(&self, args: &LaunchArgs, plan: &ExecPlan) -> Result<()> {
        let mut a = *args;
        let mut params = [match &mut a {
            LaunchArgs::Channels(k) => k as *mut KernelArgs as *mut c_void,
            LaunchArgs::Peers(p) => p as *mut PeerArgs as *mut c_void,
        }];
        let mut attrs = self.shape.attributes();
        let config = sys::CUlaunchConfig {
            gridDimX: self.ctas as u32,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: self.threads as u32,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: self.stream.0,
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        // SAFETY: the function takes one argument struct by value: KernelArgs
        // for Ring/Tree variants, PeerArgs for the variants beyond NCCL
        // (`Executor::launch_args` builds the one that matches the plan the
        // module was compiled for); params points at a live copy and config at
        // live attributes for the duration of the call (the driver copies both).
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.function.0,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
            .result()
        }
        .on_gpu(
            &self.label,
            format_args!("cuLaunchKernelEx ({plan}, {:?})", self.shape),
        )
    }
}

/// An optional integer environment variable within `range`.
fn env_u32(name: &str, range: std::ops::RangeInclusive<u32>) -> Result<Option<u32>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u32>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(Error::bad_input(format!(
                "{name}={v}: expected an integer in {}..={}",
                range.start(),
                range.end()
            ))),
        },
        _ => Ok(None),
    }
}

struct Gpu {
    ordinal: usize,
    name: String,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    sm_count: usize,
    cc: (i32, i32),
}

impl Gpu {
    fn bind(&self) -> Result<()> {
        // SAFETY: ctx is this GPU's retained primary context.
        unsafe { result::ctx::set_current(self.ctx) }.on_gpu(self, "cuCtxSetCurrent")
    }
    fn label(&self) -> String {
        self.to_string()
    }
    /// `bytes` of device memory on this GPU (`what` names it in an error).
    fn alloc(&self, bytes: usize, what: &str) -> Result<DeviceBuffer> {
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
struct MappedFlag {
    host: *mut u32,
}

impl MappedFlag {
    fn new(gpu: &Gpu) -> Result<MappedFlag> {
        gpu.bind()?;
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: allocates 4 bytes of pinned, mapped host memory.
        let host = unsafe { result::malloc_host(4, flags) }
            .on_gpu(gpu, "cuMemHostAlloc (the mapped abort flag)")? as *mut u32;
        // SAFETY: freshly allocated, 4 bytes, aligned.
        unsafe { std::ptr::write_volatile(host, 0) };
        Ok(MappedFlag { host })
    }
    fn device_ptr(&self, gpu: &Gpu) -> Result<u64> {
        gpu.bind()?;
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: host is a DEVICEMAP|PORTABLE allocation, valid in every context.
        let rc =
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, self.host as *mut c_void, 0) };
        rc.result()
            .on_gpu(gpu, "cuMemHostGetDevicePointer (the abort flag)")?;
        Ok(dptr)
    }
    fn set(&self, v: u32) {
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

struct Module {
    module: sys::CUmodule,
    collective: sys::CUfunction,
    fill: sys::CUfunction,
    check: sys::CUfunction,
}

struct Event(sys::CUevent);

impl Event {
    fn new(gpu: &Gpu) -> Result<Event> {
        gpu.bind()?;
        let e = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .on_gpu(gpu, "cuEventCreate")?;
        Ok(Event(e))
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

// ------------------------------------------------------------ connections

/// One directed connection (channel, from, to): where its pieces live.
#[derive(Debug, Clone, Copy)]
struct Edge {
    /// On the receiver's GPU: FIFO, tail, receiver step.
    fifo: u64,
    tail: u64,
    recv_step: u64,
    /// On the sender's GPU: head, sender step.
    head: u64,
    send_step: u64,
}

impl Edge {
    fn as_sender(&self) -> Conn {
        Conn {
            buff: self.fifo,
            tail: self.tail,
            head: self.head,
            step: self.send_step,
        }
    }
    fn as_receiver(&self) -> Conn {
        Conn {
            buff: self.fifo,
            tail: self.tail,
            head: self.head,
            step: self.recv_step,
        }
    }
}

/// The directed (channel, from, to) links a plan's algorithm uses.
fn plan_edges(plan: &ExecPlan) -> Vec<(usize, usize, usize)> {
    let mut edges = Vec::new();
    if plan.n_ranks < 2 {
        return edges;
    }
    for c in 0..plan.n_channels {
        match plan.algorithm {
            Algo::Ring => {
                let ring = &plan.rings[c];
                for i in 0..ring.len() {
                    edges.push((c, ring[i], ring[(i + 1) % ring.len()]));
                }
            }
            Algo::Tree => {
                for (r, node) in plan.trees[c].iter().enumerate() {
                    if let Some(u) = node.up {
                        edges.push((c, r, u));
                        edges.push((c, u, r));
                    }
                }
            }
            // ExecPlan::build admits only Ring and Tree.
            _ => {}
        }
    }
    edges
}

// ------------------------------------------------------------ the executor

/// The GPUs, the compiled kernel, the connections and the buffers of one plan
/// shape (collective, algorithm, protocol, type, rings, trees) at its largest
/// size and channel count.
pub struct Executor {
    gpus: Vec<Gpu>,
    virtual_ranks: Option<usize>,
    n_ranks: usize,
    modules: Vec<Module>,
    abort: MappedFlag,
    abort_dev: Vec<u64>,
    /// Per GPU: connection memory, then the aborted word and check counters.
    conn_mem: Vec<DeviceBuffer>,
    status_mem: Vec<DeviceBuffer>,
    edges: HashMap<(usize, usize, usize), Edge>,
    /// Per rank: (send, recv) buffers and their allocation(s).
    buffers: Vec<(u64, u64)>,
    _buffer_mem: Vec<DeviceBuffer>,
    desc_mem: Vec<DeviceBuffer>,
    /// Kernels beyond NCCL: per rank, its peer area (counters, flags, inbox;
    /// `exec::beyond`), zeroed once; empty for Ring and Tree.
    peer_areas: Vec<u64>,
    peer_mem: Vec<DeviceBuffer>,
    template: ExecPlan,
    info: DeviceInfo,
    /// A collective was aborted: kernels may still run, so teardown is skipped.
    poisoned: std::cell::Cell<bool>,
}

/// Which GPU holds rank `r`.
fn gpu_of(virtual_ranks: Option<usize>, r: usize) -> usize {
    if virtual_ranks.is_some() {
        0
    } else {
        r
    }
}

/// How many GPUs there are (after checking that the driver is usable).
pub fn device_count() -> Result<usize> {
    gpu::require_driver()?;
    result::init().on_gpu(DRIVER, "cuInit")?;
    let n = result::device::get_count().on_gpu(DRIVER, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

fn open_gpu(ordinal: usize) -> Result<Gpu> {
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

impl Executor {
    /// How many ranks `open` would give for these options, without allocating.
    pub fn ranks_available(opts: &RunOptions) -> Result<usize> {
        let n = device_count()?;
        if n == 0 {
            return Err(Error::runtime("no GPU: the CUDA driver reports 0 devices"));
        }
        Ok(match (opts.virtual_ranks, opts.gpus) {
            (Some(v), _) => v,
            (None, Some(g)) => g.min(n),
            (None, None) => n,
        })
    }

    /// Open the GPUs, compile the kernel, set up the connections and buffers
    /// for `template` (the largest size and channel count any later `run`
    /// uses; later plans may have fewer channels and smaller sizes).
    pub fn open(template: &ExecPlan, opts: &RunOptions) -> Result<Executor> {
        let n_dev = device_count()?;
        if n_dev == 0 {
            return Err(Error::runtime("no GPU: the CUDA driver reports 0 devices"));
        }
        let n_ranks = template.n_ranks;
        let n_gpus = match opts.virtual_ranks {
            Some(v) => {
                if v != n_ranks {
                    return Err(Error::bad_input(format!(
                        "--virtual-ranks {v} but the plan has {n_ranks} ranks"
                    )));
                }
                1
            }
            None => {
                if n_ranks > n_dev {
                    return Err(Error::bad_input(format!(
                        "the plan has {n_ranks} ranks but this machine has {n_dev} GPU(s); use --virtual-ranks to run more ranks on one GPU"
                    )));
                }
                n_ranks
            }
        };
        let mut gpus = Vec::new();
        for g in 0..n_gpus {
            gpus.push(open_gpu(g)?);
        }
        let mut driver = 0i32;
        // SAFETY: valid out-pointer.
        let _ = unsafe { sys::cuDriverGetVersion(&mut driver) };
        let (nv_major, nv_minor) = nvrtc::nvrtc_version()?;
        let cc = gpus[0].cc;
        if let Some(g) = gpus.iter().find(|g| g.cc != cc) {
            return Err(Error::runtime(format!(
                "{} has compute capability {}.{}, GPU 0 {}.{}: mixed GPUs are not supported",
                g.label(),
                g.cc.0,
                g.cc.1,
                cc.0,
                cc.1
            )));
        }
        let arch = nvrtc::arch_of(cc);
        let info = DeviceInfo {
            gpus: gpus.iter().map(|g| g.label()).collect(),
            driver_version: format!("{}.{}", driver / 1000, (driver % 1000) / 10),
            nvrtc_version: format!("{nv_major}.{nv_minor}"),
            arch: arch.clone(),
            virtual_ranks: opts.virtual_ranks,
        };

        // Peer access between every pair that talks (the kernels beyond NCCL:
        // every pair; it maps all of each GPU's allocations, user buffers too).
        let edges_list = plan_edges(template);
        let beyond = template.algorithm.is_beyond_nccl();
        if opts.virtual_ranks.is_none() {
            let mut pairs: Vec<(usize, usize)> = edges_list
                .iter()
                .flat_map(|&(_, a, b)| [(a, b), (b, a)])
                .filter(|(a, b)| a != b)
                .collect();
            if beyond {
                for a in 0..n_ranks {
                    pairs.extend((0..n_ranks).filter(|&b| b != a).map(|b| (a, b)));
                }
            }
            pairs.sort();
            pairs.dedup();
            for (a, b) in pairs {
                enable_peer(&gpus[a], &gpus[b])?;
            }
        }

        // Kernel.
        let variant = Variant {
            collective: template.collective,
            algorithm: template.algorithm,
            protocol: template.protocol,
            dtype: template.dtype,
        };
        // Fault injection `hang`: the kernels' own hook (kernels/collectives.cu, beyond.cu).
        let extra: &[&str] = if opts.fault == Some(Fault::Hang) {
            &["-DPLANNER_INJECT_HANG=1"]
        } else {
            &[]
        };
        let cubin = kernels::compile_with(&variant, &arch, extra)?;
        let mut modules = Vec::new();
        for gpu in &gpus {
            modules.push(load_module(gpu, &cubin.image)?);
        }

        // Co-residency: every CTA of a launch must be on the GPU at once.
        let ctas_per_gpu = match opts.virtual_ranks {
            Some(v) => v * template.n_channels,
            None => template.n_channels,
        };
        for (gpu, m) in gpus.iter().zip(&modules) {
            gpu.bind()?;
            // SAFETY: valid function handle.
            let per_sm = unsafe {
                result::occupancy::max_active_block_per_multiprocessor(
                    m.collective,
                    template.n_threads as i32,
                    0,
                )
            }
            .on_gpu(gpu, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?
                as usize;
            if per_sm * gpu.sm_count < ctas_per_gpu {
                return Err(Error::bad_input(format!(
                    "{ctas_per_gpu} CTAs of {} threads cannot all be resident on {} ({} SMs x {per_sm}); use fewer --channels or --virtual-ranks",
                    template.n_threads,
                    gpu.label(),
                    gpu.sm_count
                )));
            }
        }

        // Memory: connections plus buffers must fit.
        let fifo_bytes = buff_bytes(template.protocol);
        let mut conn_bytes = vec![0usize; gpus.len()];
        for &(_, from, to) in &edges_list {
            conn_bytes[gpu_of(opts.virtual_ranks, to)] += fifo_bytes + 256;
            conn_bytes[gpu_of(opts.virtual_ranks, from)] += 256;
        }
        let elem = template.dtype.size() as usize;
        let (send_bytes, recv_bytes) = (template.send_count() * elem, template.recv_count() * elem);
        let per_rank_bytes = if template.in_place {
            send_bytes.max(recv_bytes)
        } else {
            send_bytes + recv_bytes
        } + 512;
        let peer_area_bytes = if beyond {
            crate::exec::beyond::peer_area_bytes(
                template.algorithm,
                n_ranks,
                template.n_channels,
                template.n_threads,
            )
        } else {
            0
        };
        let mut need = conn_bytes.clone();
        for r in 0..n_ranks {
            need[gpu_of(opts.virtual_ranks, r)] += per_rank_bytes + peer_area_bytes;
        }
        for (g, gpu) in gpus.iter().enumerate() {
            gpu.bind()?;
            let (free, _total) = result::mem_get_info().on_gpu(gpu, "cuMemGetInfo")?;
            let want = need[g] + (64 << 20);
            if want > free {
                return Err(Error::runtime(format!(
                    "{} of {} per rank needs {} on {} but only {} is free",
                    coll_name(template.collective),
                    format_size(template.bytes),
                    format_size(want as u64),
                    gpu.label(),
                    format_size(free as u64)
                )));
            }
        }

        // Fault injection `oom`: hold every chunk of at least 1 MiB the driver gives on GPU 0
        // (freed when `open` returns), so the allocations below meet a full GPU.
        let mut hoard: Vec<DeviceBuffer> = Vec::new();
        if opts.fault == Some(Fault::Oom) {
            let mut chunk: usize = 1 << 30;
            while chunk >= 1 << 20 {
                match gpus[0].alloc(chunk, "fault injection: filling the GPU") {
                    Ok(buffer) => hoard.push(buffer),
                    Err(_) => chunk /= 2,
                }
            }
            let held: u64 = hoard.iter().map(|b| b.bytes() as u64).sum();
            eprintln!(
                "planner: fault injection: holding {} of {} before the executor allocates",
                format_size(held),
                gpus[0].label()
            );
        }

        // Connection memory, laid out per GPU.
        let mut conn_mem = Vec::new();
        for (g, gpu) in gpus.iter().enumerate() {
            let mem = gpu.alloc(conn_bytes[g], "FIFOs")?;
            mem.zero(gpu)?;
            conn_mem.push(mem);
        }
        let mut cursor: Vec<u64> = conn_mem.iter().map(|m| m.ptr()).collect();
        let mut edges = HashMap::new();
        for &(c, from, to) in &edges_list {
            let rg = gpu_of(opts.virtual_ranks, to);
            let sg = gpu_of(opts.virtual_ranks, from);
            let fifo = cursor[rg];
            let tail = fifo + fifo_bytes as u64;
            let recv_step = tail + 8;
            cursor[rg] += fifo_bytes as u64 + 256;
            let head = cursor[sg];
            let send_step = head + 8;
            cursor[sg] += 256;
            edges.insert(
                (c, from, to),
                Edge {
                    fifo,
                    tail,
                    recv_step,
                    head,
                    send_step,
                },
            );
        }

        // Status words: [aborted u32 | pad | wrong u64 | first u64].
        let mut status_mem = Vec::new();
        for gpu in &gpus {
            let m = gpu.alloc(256, "status words")?;
            m.zero(gpu)?;
            status_mem.push(m);
        }
        let abort = MappedFlag::new(&gpus[0])?;
        let abort_dev = gpus
            .iter()
            .map(|g| abort.device_ptr(g))
            .collect::<Result<Vec<u64>>>()?;

        // Buffers, per rank.
        let mut buffer_mem = Vec::new();
        let mut buffers = Vec::new();
        for r in 0..n_ranks {
            let gpu = &gpus[gpu_of(opts.virtual_ranks, r)];
            let (send, recv) = if template.in_place {
                let m = gpu.alloc(send_bytes.max(recv_bytes), "the in-place buffer")?;
                let p = m.ptr();
                buffer_mem.push(m);
                (p, p)
            } else {
                let s = gpu.alloc(send_bytes, "the input buffer")?;
                let d = gpu.alloc(recv_bytes, "the output buffer")?;
                let p = (s.ptr(), d.ptr());
                buffer_mem.push(s);
                buffer_mem.push(d);
                p
            };
            buffers.push((send, recv));
        }

        // Peer areas of the kernels beyond NCCL, zeroed: counters start at 0,
        // and no flag of a zeroed inbox or flag word matches a round or call.
        let mut peer_mem = Vec::new();
        let mut peer_areas = Vec::new();
        if beyond {
            for r in 0..n_ranks {
                let gpu = &gpus[gpu_of(opts.virtual_ranks, r)];
                let m = gpu.alloc(peer_area_bytes, "the peer area (flags and LL inbox)")?;
                m.zero(gpu)?;
                peer_areas.push(m.ptr());
                peer_mem.push(m);
            }
        }

        // Descriptor memory (rewritten per channel count).
        let mut desc_mem = Vec::new();
        for gpu in &gpus {
            desc_mem.push(gpu.alloc(
                ctas_per_gpu.max(1) * std::mem::size_of::<ChannelDesc>(),
                "channel descriptors",
            )?);
        }

        if !hoard.is_empty() {
            return Err(Error::runtime(format!(
                "fault injection oom: every allocation of the executor succeeded with {} held on {}",
                format_size(hoard.iter().map(|b| b.bytes() as u64).sum()),
                gpus[0].label()
            )));
        }
        Ok(Executor {
            gpus,
            virtual_ranks: opts.virtual_ranks,
            n_ranks,
            modules,
            abort,
            abort_dev,
            conn_mem,
            status_mem,
            edges,
            buffers,
            _buffer_mem: buffer_mem,
            desc_mem,
            peer_areas,
            peer_mem,
            template: template.clone(),
            info,
            poisoned: std::cell::Cell::new(false),
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Bytes of FIFO memory per GPU.
    pub fn fifo_bytes(&self) -> Vec<usize> {
        self.conn_mem.iter().map(|m| m.bytes()).collect()
    }

    fn check_compatible(&self, plan: &ExecPlan) -> Result<()> {
        let t = &self.template;
        if plan.collective != t.collective
            || plan.algorithm != t.algorithm
            || plan.protocol != t.protocol
            || plan.dtype != t.dtype
            || plan.n_ranks != t.n_ranks
            || plan.in_place != t.in_place
            || plan.n_channels > t.n_channels
            || plan.bytes > t.bytes
            // The OneShot inbox rows are as wide as the template's threads.
            || (t.algorithm.is_beyond_nccl() && plan.n_threads > t.n_threads)
            || plan.rings[..plan.n_channels] != t.rings[..plan.n_channels]
            || plan.trees[..plan.n_channels] != t.trees[..plan.n_channels]
        {
            return Err(Error::runtime(format!(
                "plan ({plan}) does not fit the executor set up for ({t})"
            )));
        }
        Ok(())
    }

    /// Descriptors of every CTA on GPU `g` for `plan`'s channel count.
    fn descriptors(&self, plan: &ExecPlan, g: usize) -> Vec<ChannelDesc> {
        let ranks: Vec<usize> = match self.virtual_ranks {
            Some(_) => (0..self.n_ranks).collect(),
            None => vec![g],
        };
        let mut out = Vec::new();
        for (local, &rank) in ranks.iter().enumerate() {
            for c in 0..plan.n_channels {
                let mut d = ChannelDesc {
                    rank: rank as i32,
                    local_rank: local as i32,
                    channel: c as i32,
                    ..Default::default()
                };
                let n = plan.n_ranks;
                let ring = &plan.rings[c];
                let pos = ring.iter().position(|&r| r == rank).unwrap_or(0);
                let pos0 = ring.iter().position(|&r| r == 0).unwrap_or(0);
                d.ring_index = ((pos + n - pos0) % n) as i32;
                for i in 0..n {
                    d.user_ranks[i] = ring[(pos + i) % n] as i32;
                }
                if n > 1 {
                    let prev = ring[(pos + n - 1) % n];
                    let next = ring[(pos + 1) % n];
                    if let Some(e) = self.edges.get(&(c, prev, rank)) {
                        d.ring_recv = e.as_receiver();
                    }
                    if let Some(e) = self.edges.get(&(c, rank, next)) {
                        d.ring_send = e.as_sender();
                    }
                    let node = &plan.trees[c][rank];
                    if let Some(u) = node.up {
                        d.tree_has_up = 1;
                        if let Some(e) = self.edges.get(&(c, u, rank)) {
                            d.tree_recv_up = e.as_receiver();
                        }
                        if let Some(e) = self.edges.get(&(c, rank, u)) {
                            d.tree_send_up = e.as_sender();
                        }
                    }
                    d.tree_n_down = node.down.len() as i32;
                    for (i, &ch) in node.down.iter().enumerate() {
                        if let Some(e) = self.edges.get(&(c, ch, rank)) {
                            d.tree_recv_down[i] = e.as_receiver();
                        }
                        if let Some(e) = self.edges.get(&(c, rank, ch)) {
                            d.tree_send_down[i] = e.as_sender();
                        }
                    }
                }
                out.push(d);
            }
        }
        out
    }

    /// Buffer addresses of rank r for this plan's size.
    fn rank_buffers(&self, plan: &ExecPlan, r: usize) -> (u64, u64) {
        let (send, recv) = self.buffers[r];
        if !plan.in_place {
            return (send, recv);
        }
        let block = (plan.call_count() * plan.dtype.size() as usize) as u64;
        match plan.collective {
            // The input is rank r's block of the output (nccl-tests' layout).
            Coll::AllGather => (recv + r as u64 * block, recv),
            // The output is rank r's block of the input.
            Coll::ReduceScatter => (send, send + r as u64 * block),
            _ => (send, recv),
        }
    }

    fn kernel_args(&self, plan: &ExecPlan, g: usize) -> KernelArgs {
        let ck = schedule::chunking(plan);
        let mut args = KernelArgs {
            desc: self.desc_mem[g].ptr(),
            abort_flag: self.abort_dev[g],
            aborted: self.status_mem[g].ptr(),
            send: [0; MAX_RANKS],
            recv: [0; MAX_RANKS],
            chan_off: [0; MAX_CHANNELS],
            chan_count: [0; MAX_CHANNELS],
            call_count: plan.call_count() as i64,
            chunk_elems: ck.chunk_elems as i64,
            nranks: plan.n_ranks as i32,
            nchannels: plan.n_channels as i32,
            root: plan.root as i32,
            slices_per_chunk: ck.slices_per_chunk as i32,
            steps_per_slice: ck.steps_per_slice as i32,
            step_bytes: ck.step_bytes as i32,
            tree_up_threads: schedule::group_threads(plan, schedule::Group::TreeUp) as i32,
            pad: 0,
        };
        let ranks: Vec<usize> = match self.virtual_ranks {
            Some(_) => (0..self.n_ranks).collect(),
            None => vec![g],
        };
        for (local, &r) in ranks.iter().enumerate() {
            let (s, d) = self.rank_buffers(plan, r);
            args.send[local] = s;
            args.recv[local] = d;
        }
        for c in 0..plan.n_channels {
            let (off, count) = schedule::channel_part(
                plan.call_count(),
                plan.n_channels,
                plan.dtype.size() as usize,
                c,
            );
            args.chan_off[c] = off as i64;
            args.chan_count[c] = count as i64;
        }
        args
    }

    /// The argument of `plan`'s kernel on GPU `g`.
    fn launch_args(&self, plan: &ExecPlan, g: usize) -> LaunchArgs {
        if plan.algorithm.is_beyond_nccl() {
            LaunchArgs::Peers(self.peer_args(plan, g))
        } else {
            LaunchArgs::Channels(self.kernel_args(plan, g))
        }
    }

    /// The kernels beyond NCCL: every rank's buffers and peer area, by rank.
    fn peer_args(&self, plan: &ExecPlan, g: usize) -> PeerArgs {
        let mut args = PeerArgs {
            abort_flag: self.abort_dev[g],
            aborted: self.status_mem[g].ptr(),
            send: [0; MAX_RANKS],
            recv: [0; MAX_RANKS],
            area: [0; MAX_RANKS],
            count: plan.call_count() as i64,
            nranks: plan.n_ranks as i32,
            nchannels: plan.n_channels as i32,
            first_rank: match self.virtual_ranks {
                Some(_) => 0,
                None => g as i32,
            },
            inbox_stride: self.template.n_threads as i32,
            inbox_channels: self.template.n_channels as i32,
            pad: 0,
        };
        for r in 0..self.n_ranks {
            let (s, d) = self.rank_buffers(plan, r);
            args.send[r] = s;
            args.recv[r] = d;
            args.area[r] = self.peer_areas.get(r).copied().unwrap_or(0);
        }
        args
    }

    /// How GPU `g` launches `plan`'s collective.
    fn launcher(&self, g: usize, plan: &ExecPlan) -> Result<CollectiveLauncher> {
        let gpu = &self.gpus[g];
        let ctas = match self.virtual_ranks {
            Some(v) => v * plan.n_channels,
            None => plan.n_channels,
        };
        Ok(CollectiveLauncher {
            label: gpu.label(),
            ctx: Sendable(gpu.ctx),
            stream: Sendable(gpu.stream),
            function: Sendable(self.modules[g].collective),
            ctas,
            threads: plan.n_threads,
            shape: LaunchShape::for_launch(gpu.cc, ctas, self.virtual_ranks.is_some())?,
        })
    }

    /// Run `plan` once on every GPU, then `iters` more (graph or plain) timed.
    /// Returns per-GPU ms for the timed part (None when iters == 0).
    fn launch_all(
        &self,
        plan: &ExecPlan,
        iters: usize,
        graph: bool,
        timeout: Duration,
    ) -> Result<Option<Vec<f64>>> {
        let args: Vec<LaunchArgs> = (0..self.gpus.len())
            .map(|g| self.launch_args(plan, g))
            .collect();
        // Every launcher before any thread starts: a failure here leaves no
        // thread waiting at the barrier.
        let launchers: Vec<CollectiveLauncher> = (0..self.gpus.len())
            .map(|g| self.launcher(g, plan))
            .collect::<Result<_>>()?;
        // Graphs are captured before anything runs.
        let mut graphs: Vec<Option<(sys::CUgraph, sys::CUgraphExec)>> = Vec::new();
        if graph && iters > 0 {
            for (g, gpu) in self.gpus.iter().enumerate() {
                gpu.bind()?;
                // SAFETY: capture on this GPU's stream from this thread only.
                unsafe {
                    result::stream::begin_capture(
                        gpu.stream,
                        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                    )
                }
                .on_gpu(gpu, "cuStreamBeginCapture")?;
                let mut launched = Ok(());
                for _ in 0..iters {
                    launched = launchers[g].launch(&args[g], plan);
                    if launched.is_err() {
                        break;
                    }
                }
                // SAFETY: capture was begun above on this stream.
                let graph_h = unsafe { result::stream::end_capture(gpu.stream) }
                    .on_gpu(gpu, "cuStreamEndCapture")?;
                launched?;
                // SAFETY: graph_h is a valid captured graph.
                let exec = unsafe {
                    result::graph::instantiate(graph_h, sys::CUgraphInstantiate_flags(0))
                }
                .on_gpu(gpu, "cuGraphInstantiate")?;
                graphs.push(Some((graph_h, exec)));
            }
        }
        let events: Vec<(Event, Event, Event)> = self
            .gpus
            .iter()
            .map(|g| Ok((Event::new(g)?, Event::new(g)?, Event::new(g)?)))
            .collect::<Result<_>>()?;
        // One host thread per GPU launches: the first run (which also lines
        // the GPUs up), then the timed part between two events.
        let barrier = std::sync::Barrier::new(self.gpus.len());
        let outcome: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = launchers
                .iter()
                .enumerate()
                .map(|(g, launcher)| {
                    let launcher = launcher.clone();
                    let start = Sendable(events[g].0 .0);
                    let end = Sendable(events[g].1 .0);
                    let graph_exec = graphs.get(g).copied().flatten().map(|(_, e)| Sendable(e));
                    let args = args[g];
                    let barrier = &barrier;
                    s.spawn(move || -> Result<()> {
                        let (launcher, start, end, graph_exec) = (launcher, start, end, graph_exec);
                        let stream = launcher.stream.0;
                        launcher.bind()?;
                        barrier.wait();
                        launcher.launch(&args, plan)?;
                        // SAFETY: events belong to this GPU's context, recorded on its stream.
                        unsafe { result::event::record(start.0, stream) }
                            .on_gpu(&launcher.label, "cuEventRecord")?;
                        if iters > 0 {
                            match graph_exec {
                                // SAFETY: exec was instantiated in this context.
                                Some(exec) => unsafe { result::graph::launch(exec.0, stream) }
                                    .on_gpu(&launcher.label, "cuGraphLaunch")?,
                                None => {
                                    for _ in 0..iters {
                                        launcher.launch(&args, plan)?;
                                    }
                                }
                            }
                        }
                        // SAFETY: as above.
                        unsafe { result::event::record(end.0, stream) }
                            .on_gpu(&launcher.label, "cuEventRecord")?;
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::runtime("a launching thread panicked")))
                })
                .collect()
        });
        let launch_err = outcome.into_iter().find_map(|r| r.err());
        // Wait for the end events (or abort), even after a launch error, so
        // nothing is left spinning.
        let waited = self.wait(
            &events.iter().map(|e| e.1 .0).collect::<Vec<_>>(),
            plan,
            timeout,
        );
        for (g, gr) in graphs.into_iter().enumerate() {
            if let Some((graph_h, exec)) = gr {
                let _ = self.gpus[g].bind();
                // SAFETY: created above, destroyed once, after the work finished.
                unsafe {
                    let _ = result::graph::exec_destroy(exec);
                    let _ = result::graph::destroy(graph_h);
                }
            }
        }
        if let Some(e) = launch_err {
            return Err(e);
        }
        waited?;
        if iters == 0 {
            return Ok(None);
        }
        let mut ms = Vec::new();
        for (g, e) in events.iter().enumerate() {
            self.gpus[g].bind()?;
            // SAFETY: both events were recorded on this GPU's stream and completed.
            let t = unsafe { result::event::elapsed(e.0 .0, e.1 .0) }
                .on_gpu(&self.gpus[g], "cuEventElapsedTime")?;
            ms.push(f64::from(t));
        }
        Ok(Some(ms))
    }

    /// Wait until every GPU reached its event; on timeout raise the abort
    /// flag, let the kernels run out, and report which GPUs were stuck.
    fn wait(&self, events: &[sys::CUevent], plan: &ExecPlan, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let mut done = vec![false; events.len()];
        loop {
            for (g, &ev) in events.iter().enumerate() {
                if done[g] {
                    continue;
                }
                self.gpus[g].bind()?;
                // SAFETY: a recorded event of this context.
                match unsafe { result::event::query(ev) } {
                    Ok(()) => done[g] = true,
                    Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => {}
                    Err(e) => {
                        return Err(gpu::cuda_error(
                            &self.gpus[g],
                            format_args!("running {plan} (cuEventQuery)"),
                            &e,
                        ))
                    }
                }
            }
            if done.iter().all(|&d| d) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let stuck: Vec<String> = done
            .iter()
            .enumerate()
            .filter(|(_, &d)| !d)
            .map(|(g, _)| self.gpus[g].label())
            .collect();
        self.abort.set(1);
        self.poisoned.set(true);
        let grace = Instant::now();
        for (g, &ev) in events.iter().enumerate() {
            let _ = self.gpus[g].bind();
            while grace.elapsed() < Duration::from_secs(10) {
                // SAFETY: as above.
                if unsafe { result::event::query(ev) }.is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let variant = Variant {
            collective: plan.collective,
            algorithm: plan.algorithm,
            protocol: plan.protocol,
            dtype: plan.dtype,
        };
        Err(Error::runtime(format!(
            "timeout: {} over {} ranks {}/{} of {} did not finish within {:.0} s on {} (kernel planner_collective of variant {}); aborted",
            coll_name(plan.collective),
            plan.n_ranks,
            plan.algorithm.nccl_name(),
            plan.protocol.nccl_name(),
            format_size(plan.bytes),
            timeout.as_secs_f64(),
            stuck.join(", "),
            variant.name()
        )))
    }

    fn upload_descriptors(&self, plan: &ExecPlan) -> Result<()> {
        if plan.algorithm.is_beyond_nccl() {
            // Their kernels take no channel descriptors.
            return Ok(());
        }
        for (g, gpu) in self.gpus.iter().enumerate() {
            let desc = self.descriptors(plan, g);
            gpu.bind()?;
            // SAFETY: desc_mem holds at least this many descriptors (checked at open).
            unsafe { result::memcpy_htod_sync(self.desc_mem[g].ptr(), &desc) }
                .on_gpu(gpu, "cuMemcpyHtoD (channel descriptors)")?;
        }
        Ok(())
    }

    fn sync(&self, g: usize) -> Result<()> {
        let gpu = &self.gpus[g];
        gpu.bind()?;
        // SAFETY: valid stream.
        unsafe { result::stream::synchronize(gpu.stream) }.on_gpu(gpu, "cuStreamSynchronize")
    }

    /// Fill every rank's input with the pattern and poison its output.
    fn prepare_buffers(&self, plan: &ExecPlan, seed: u32) -> Result<()> {
        let elem = plan.dtype.size() as usize;
        let pattern = plan.data_pattern(seed);
        for r in 0..self.n_ranks {
            let g = gpu_of(self.virtual_ranks, r);
            let gpu = &self.gpus[g];
            gpu.bind()?;
            let (send, recv) = self.rank_buffers(plan, r);
            let recv_bytes = plan.recv_count() * elem;
            let rs_in_place = plan.in_place && plan.collective == Coll::ReduceScatter;
            if !rs_in_place && recv_bytes > 0 {
                // SAFETY: inside the rank's output allocation.
                unsafe { result::memset_d8_async(recv, 0xff, recv_bytes, gpu.stream) }
                    .on_gpu(gpu, "cuMemsetD8 (poisoning the output)")?;
            }
            let n = plan.send_count() as u64;
            if n > 0 {
                let mut args = pattern.fill_args(send, n, r as u32);
                // SAFETY: this module's planner_fill, compiled for plan.dtype;
                // it writes n elements of the rank's input buffer, which holds
                // send_count() elements.
                unsafe {
                    pattern::launch(self.modules[g].fill, gpu.stream, n, &mut args, gpu)?;
                }
            }
        }
        for g in 0..self.gpus.len() {
            self.sync(g)?;
        }
        Ok(())
    }

    /// Set every bit of every rank's output (NaN), as before the checked call.
    fn poison_outputs(&self, plan: &ExecPlan) -> Result<()> {
        let bytes = plan.recv_count() * plan.dtype.size() as usize;
        for r in 0..self.n_ranks {
            let g = gpu_of(self.virtual_ranks, r);
            let gpu = &self.gpus[g];
            gpu.bind()?;
            let (_, recv) = self.rank_buffers(plan, r);
            if bytes > 0 {
                // SAFETY: inside the rank's output allocation.
                unsafe { result::memset_d8_async(recv, 0xff, bytes, gpu.stream) }
                    .on_gpu(gpu, "cuMemsetD8 (poisoning the output)")?;
            }
        }
        for g in 0..self.gpus.len() {
            self.sync(g)?;
        }
        Ok(())
    }

    /// Count wrong output elements on the GPU (and on the CPU when small).
    fn check_outputs(&self, plan: &ExecPlan, opts: &RunOptions) -> Result<CheckOutcome> {
        let elem = plan.dtype.size() as usize;
        let mut total = 0u64;
        let mut first: Option<(usize, u64)> = None;
        let cpu = (plan.recv_count() * elem) as u64 <= opts.cpu_check_bytes;
        if kernel_coll_id(plan.collective).is_none() {
            return Err(Error::runtime(format!(
                "the executor has no kernel for {}",
                coll_name(plan.collective)
            )));
        }
        for r in 0..self.n_ranks {
            let g = gpu_of(self.virtual_ranks, r);
            let gpu = &self.gpus[g];
            gpu.bind()?;
            // Status words 8..24: the wrong count and the first wrong index.
            let status = self.status_mem[g].ptr();
            let counters: [u64; 2] = [0, u64::MAX];
            // SAFETY: status words 8..24 of a 256-byte allocation.
            unsafe { result::memcpy_htod_sync(status + 8, &counters) }
                .on_gpu(gpu, "cuMemcpyHtoD (resetting the check counters)")?;
            let (_, recv) = self.rank_buffers(plan, r);
            let n = plan.recv_count() as u64;
            let expectation = plan.expectation(r, opts.seed);
            if n > 0 {
                let mut args = expectation.check_args(recv, n, status + 8, status + 16);
                // SAFETY: this module's planner_check, compiled for plan.dtype;
                // it reads n elements of the rank's output buffer, which holds
                // recv_count() elements, and writes the two status words.
                unsafe {
                    pattern::launch(self.modules[g].check, gpu.stream, n, &mut args, gpu)?;
                }
            }
            self.sync(g)?;
            let mut got = [0u64; 2];
            // SAFETY: reads the two counters written above.
            unsafe { result::memcpy_dtoh_sync(&mut got, status + 8) }
                .on_gpu(gpu, "cuMemcpyDtoH (reading the check counters)")?;
            total += got[0];
            if got[0] > 0 && first.is_none() {
                first = Some((r, got[1]));
            }
            if cpu && n > 0 {
                let host = self.read_output(plan, r)?;
                let (cpu_wrong, cpu_first) = expectation.count_wrong(plan.dtype, &host);
                if cpu_wrong != got[0] {
                    return Err(Error::runtime(format!(
                        "the GPU check counted {} wrong elements on rank {r}, the CPU {cpu_wrong} (first at {cpu_first:?}): the check kernel is broken",
                        got[0]
                    )));
                }
            }
        }
        Ok((total, first, cpu))
    }

    /// Fault injection `wrong-element`: the middle element of the last rank's output becomes
    /// bytes 0x42 (48.56 in f32, 48.5 in bf16, 3.13 in f16), never an expected value: every
    /// expected value of the pattern is an integer.
    fn corrupt_one_element(&self, plan: &ExecPlan) -> Result<()> {
        let n = plan.recv_count();
        if n == 0 {
            return Ok(());
        }
        let r = self.n_ranks - 1;
        let gpu = &self.gpus[gpu_of(self.virtual_ranks, r)];
        gpu.bind()?;
        let (_, recv) = self.rank_buffers(plan, r);
        let elem = plan.dtype.size() as usize;
        let at = (n / 2 * elem) as u64;
        // SAFETY: one element inside rank r's output allocation, which holds n elements.
        unsafe { result::memset_d8_sync(recv + at, 0x42, elem) }
            .on_gpu(gpu, "cuMemsetD8 (fault injection: one wrong element)")
    }

    /// Rank r's output as raw element bits.
    pub fn read_output(&self, plan: &ExecPlan, r: usize) -> Result<Vec<u32>> {
        let g = gpu_of(self.virtual_ranks, r);
        self.gpus[g].bind()?;
        let (_, recv) = self.rank_buffers(plan, r);
        let n = plan.recv_count();
        Ok(match plan.dtype.size() as usize {
            4 => {
                let mut v = vec![0u32; n];
                // SAFETY: n elements of 4 bytes inside the output buffer.
                unsafe { result::memcpy_dtoh_sync(&mut v, recv) }
                    .on_gpu(&self.gpus[g], "cuMemcpyDtoH (reading the output)")?;
                v
            }
            _ => {
                let mut v = vec![0u16; n];
                // SAFETY: n elements of 2 bytes inside the output buffer.
                unsafe { result::memcpy_dtoh_sync(&mut v, recv) }
                    .on_gpu(&self.gpus[g], "cuMemcpyDtoH (reading the output)")?;
                v.into_iter().map(u32::from).collect()
            }
        })
    }

    fn aborted(&self) -> Result<bool> {
        let mut any = false;
        for (g, gpu) in self.gpus.iter().enumerate() {
            gpu.bind()?;
            let mut w = [0u32; 1];
            // SAFETY: first word of the status allocation.
            unsafe { result::memcpy_dtoh_sync(&mut w, self.status_mem[g].ptr()) }
                .on_gpu(gpu, "cuMemcpyDtoH (reading the abort word)")?;
            any |= w[0] != 0;
        }
        Ok(any)
    }

    /// Check `plan` (one run, every element compared), then time it.
    pub fn run(&self, plan: &ExecPlan, opts: &RunOptions) -> Result<SizeResult> {
        self.check_compatible(plan)?;
        self.upload_descriptors(plan)?;
        self.prepare_buffers(plan, opts.seed)?;
        self.launch_all(plan, 0, false, opts.timeout)?;
        if self.aborted()? {
            return Err(Error::runtime(format!("{plan}: a kernel aborted")));
        }
        if opts.fault == Some(Fault::WrongElement) {
            self.corrupt_one_element(plan)?;
        }
        let (mut wrong, mut first_wrong, cpu_checked) = self.check_outputs(plan, opts)?;
        if opts.warmup > 0 {
            self.launch_all(plan, opts.warmup, false, opts.timeout)?;
        }
        // The kernels beyond NCCL keep state across launches (counters, flags,
        // inbox slots): out of place, their outputs are poisoned before the
        // timed calls and checked again after them (graph replays included).
        let recheck = plan.algorithm.is_beyond_nccl() && !plan.in_place;
        if recheck {
            self.poison_outputs(plan)?;
        }
        let ms = self
            .launch_all(plan, opts.iters, opts.graph, opts.timeout)?
            .unwrap_or_default();
        if recheck {
            if self.aborted()? {
                return Err(Error::runtime(format!("{plan}: a kernel aborted")));
            }
            let (again, first_again, _) = self.check_outputs(plan, opts)?;
            wrong += again;
            first_wrong = first_wrong.or(first_again);
        }
        let per_iter_us: Vec<f64> = ms
            .iter()
            .map(|m| m * 1000.0 / opts.iters.max(1) as f64)
            .collect();
        let time_us = if per_iter_us.is_empty() {
            0.0
        } else {
            per_iter_us.iter().sum::<f64>() / per_iter_us.len() as f64
        };
        let algbw = if time_us > 0.0 {
            plan.bytes as f64 / (time_us * 1e3)
        } else {
            0.0
        };
        Ok(SizeResult {
            bytes: plan.bytes,
            count: plan.call_count() as u64,
            n_channels: plan.n_channels,
            n_threads: plan.n_threads,
            time_us,
            gpu_time_us: per_iter_us,
            algbw_gbs: algbw,
            busbw_gbs: algbw * plan.collective.nccl_tests_bus_factor(plan.n_ranks),
            wrong,
            first_wrong,
            cpu_checked,
        })
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        if self.poisoned.get() {
            // Kernels may still be spinning on this memory: leave everything to
            // the driver's cleanup at process exit rather than block here.
            std::mem::forget(std::mem::take(&mut self._buffer_mem));
            std::mem::forget(std::mem::take(&mut self.conn_mem));
            std::mem::forget(std::mem::take(&mut self.status_mem));
            std::mem::forget(std::mem::take(&mut self.desc_mem));
            std::mem::forget(std::mem::take(&mut self.peer_mem));
            return;
        }
        for (g, gpu) in self.gpus.iter().enumerate() {
            let _ = gpu.bind();
            // SAFETY: teardown of handles created in open, each once.
            unsafe {
                let _ = result::stream::synchronize(gpu.stream);
                if let Some(m) = self.modules.get(g) {
                    let _ = result::module::unload(m.module);
                }
            }
        }
        // Buffers and FIFOs free themselves (DeviceBuffer); then streams and contexts.
        self._buffer_mem.clear();
        self.conn_mem.clear();
        self.status_mem.clear();
        self.desc_mem.clear();
        self.peer_mem.clear();
        for gpu in &self.gpus {
            // SAFETY: as above.
            unsafe {
                let _ = result::ctx::set_current(gpu.ctx);
                let _ = result::stream::destroy(gpu.stream);
                let _ = result::primary_ctx::release(gpu.dev);
            }
        }
    }
}

fn enable_peer(a: &Gpu, b: &Gpu) -> Result<()> {
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

fn load_module(gpu: &Gpu, image: &[u8]) -> Result<Module> {
    gpu.bind()?;
    // SAFETY: image is a complete CUBIN produced by NVRTC for this architecture.
    let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
        .on_gpu(gpu, "cuModuleLoadData")?;
    let get = |name: &str| {
        // SAFETY: module is loaded; name is a NUL-free literal.
        unsafe { result::module::get_function(module, CString::new(name).expect("literal")) }
            .on_gpu(gpu, format_args!("cuModuleGetFunction ({name})"))
    };
    Ok(Module {
        module,
        collective: get("planner_collective")?,
        fill: get(FillArgs::KERNEL)?,
        check: get(CheckArgs::KERNEL)?,
    })
}

/// Compile-time layout checks of the shared structs.
const _: () = assert!(std::mem::size_of::<ChannelDesc>() == CHANNEL_DESC_BYTES);
const _: () = assert!(std::mem::size_of::<KernelArgs>() == KERNEL_ARGS_BYTES);
const _: () = assert!(std::mem::size_of::<PeerArgs>() == PEER_ARGS_BYTES);
