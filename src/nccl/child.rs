//! The GPU side of the NCCL backend: one child process runs one job
//! (`ChildSpec`) and reports each size on stdout (`ChildEvent` lines).
//!
//! Per size: warm-up calls, then `repeats` timed loops of `iters`
//! back-to-back out-of-place calls between device events on every GPU (the
//! slowest GPU's loop time / iters is the repeat's time), then a checked
//! call: outputs poisoned, one call, the checker kernel counts wrong elements.
//! In a multi-process run each repeat's time is the maximum over all ranks and
//! #wrong the sum, both gathered with NCCL itself.
//!
//! NCCL is driven through cudarc's raw `result` layer, with cudarc's event
//! tracking off, so that a call costs what it costs in nccl-tests.

use super::{
    check_libraries, id_from_hex, multicast_is_off, nccl_result_name, refused_pair, version_string,
    ChildEvent, ChildMode, ChildRanks, ChildSpec, CHILD_SPEC_ENV,
};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::gpu::pattern::{self, CheckArgs, DataKernelArgs, DataPattern, Expectation, FillArgs};
use crate::gpu::{self, cuda_error, nvrtc, CudaResult, DeviceBuffer, GpuId};
use crate::measure::{GpuInfo, RowStatus};
use crate::model::Coll;
use cudarc::driver::{
    sys as cu, CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaStream, DriverError,
};
use cudarc::nccl::{result as nccl, sys as nccl_sys};
use std::ffi::{c_int, c_void, CStr};
use std::io::Write;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Entry point of the hidden subcommand: read the job, run it, report.
pub(crate) fn child_main() -> Result<()> {
    if !multicast_is_off(|k| std::env::var(k).ok()) {
        return Err(Error::runtime(
            "NCCL child refuses to start: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and \
             NVSHMEM_DISABLE_NVLS=1 must all be set (NVLink multicast stays off)",
        ));
    }
    let json = std::env::var(CHILD_SPEC_ENV).map_err(|_| {
        Error::bad_input(format!(
            "{CHILD_SPEC_ENV} is not set: this subcommand is started by `planner verify` only"
        ))
    })?;
    let spec: ChildSpec = serde_json::from_str(&json)
        .map_err(|e| Error::bad_input(format!("{CHILD_SPEC_ENV}: bad job description: {e}")))?;
    let mut emit = |event: ChildEvent| {
        let mut out = std::io::stdout().lock();
        // A closed pipe means the parent is gone; nothing useful to do then.
        let _ = writeln!(out, "{}", event.to_line());
        let _ = out.flush();
    };
    if let Some(fake) = crate::measure::FakeBackend::from_env()? {
        fake_job(&spec, fake, &mut emit);
        emit(ChildEvent::Done);
        return Ok(());
    }
    match run_job(&spec, &mut emit) {
        Ok(()) => {
            emit(ChildEvent::Done);
            Ok(())
        }
        Err(e) => {
            emit(ChildEvent::Fatal {
                message: e.to_string(),
            });
            Err(e)
        }
    }
}

/// The hidden fake backend's child (`PLANNER_FAKE_BACKEND=1`, CPU-only tests): no NCCL, one
/// deterministic size report every `delay_ms`; its faults crash (SIGABRT) or hang this process.
fn fake_job(spec: &ChildSpec, fake: crate::measure::FakeBackend, emit: &mut dyn FnMut(ChildEvent)) {
    use crate::measure::{FakeBackend, FakeFault};
    let world = match &spec.ranks {
        ChildRanks::Local { gpus } => *gpus,
        ChildRanks::Rank { world, .. } => *world,
    };
    emit(ChildEvent::Init {
        nccl_version: "fake".into(),
        cuda_version: "fake".into(),
        world_size: world,
        gpus: Vec::new(),
    });
    let label = match spec.mode {
        ChildMode::Pinned { pair } => format!("nccl {pair}"),
        _ if spec.symmetric => "nccl symm".to_string(),
        _ => "nccl auto".to_string(),
    };
    for (done, &bytes) in spec.sizes.iter().enumerate() {
        match fake.fault {
            Some(FakeFault::Crash { after }) if done == after => std::process::abort(),
            Some(FakeFault::Hang { after }) if done == after => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_millis(fake.delay_ms));
        let timed = spec.mode != ChildMode::Choices;
        emit(ChildEvent::Size {
            bytes,
            status: RowStatus::Ok,
            note: None,
            iters: spec.plan.iters_at(bytes),
            repeats: if timed { spec.plan.repeats } else { 0 },
            times_us: if timed {
                FakeBackend::times_us(&label, bytes, spec.plan.repeats)
            } else {
                Vec::new()
            },
            wrong: Some(0),
        });
    }
}

/// Element counts of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// The count NCCL is called with (per-rank share for all-gather and
    /// reduce-scatter, as their APIs take).
    call: u64,
    /// One rank's share (all-gather input, reduce-scatter output).
    per_rank: u64,
    send_elems: u64,
    recv_elems: u64,
}

fn counts(collective: Coll, dtype: Dtype, bytes: u64, world: usize) -> Counts {
    let elems = bytes / dtype.size();
    let world = world.max(1) as u64;
    match collective {
        Coll::AllGather => {
            let per_rank = elems / world;
            Counts {
                call: per_rank,
                per_rank,
                send_elems: per_rank,
                recv_elems: per_rank * world,
            }
        }
        Coll::ReduceScatter => {
            let per_rank = elems / world;
            Counts {
                call: per_rank,
                per_rank,
                send_elems: per_rank * world,
                recv_elems: per_rank,
            }
        }
        _ => Counts {
            call: elems,
            per_rank: elems,
            send_elems: elems,
            recv_elems: elems,
        },
    }
}

fn nccl_dtype(dtype: Dtype) -> nccl_sys::ncclDataType_t {
    match dtype {
        Dtype::F32 => nccl_sys::ncclDataType_t::ncclFloat32,
        Dtype::Bf16 => nccl_sys::ncclDataType_t::ncclBfloat16,
        Dtype::F16 => nccl_sys::ncclDataType_t::ncclFloat16,
    }
}

/// One GPU of this process.
struct LocalRank {
    ordinal: usize,
    rank: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    // Kept alive for the raw pointers below (dropped after the communicators).
    _buffers: Vec<DeviceBuffer>,
    _nccl_memory: Vec<NcclMemory>,
    send: u64,
    recv: u64,
    /// The checker's two u64: the wrong count, then the first wrong index.
    wrong: u64,
    scratch: u64,
    scratch_len: usize,
    recv_bytes: u64,
    fill: CudaFunction,
    check: CudaFunction,
    start: CudaEvent,
    end: CudaEvent,
    /// The other rank threads of this process (None: one rank per process).
    gate: Option<Arc<Gate>>,
}

impl LocalRank {
    /// Make this GPU's context current on the calling thread (raw driver
    /// calls act on the current context).
    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .on_gpu(GpuId(self.ordinal), "cuCtxSetCurrent")
    }

    /// Launch a data kernel (`function`: `args`' kernel of this rank's
    /// module) over `n` elements on this rank's stream.
    ///
    /// # Safety
    /// The addresses in `args` must lie in this GPU's buffers, large enough
    /// for `n` elements of the job's type (and, for the checker, two u64).
    unsafe fn launch_data<A: DataKernelArgs>(
        &self,
        function: &CudaFunction,
        n: u64,
        args: &mut A,
    ) -> Result<()> {
        self.bind()?;
        // SAFETY: the module was compiled for the job's type in this context,
        // the stream belongs to it and the caller vouches for the memory.
        unsafe {
            pattern::launch(
                function.cu_function(),
                self.stream.cu_stream(),
                n,
                args,
                GpuId(self.ordinal),
            )
        }
    }
}

/// The communicators of this process, aborted on drop (abort needs no
/// coordination with other ranks, unlike destroy), and the symmetric windows
/// registered on them, deregistered first.
struct Comms(Vec<nccl_sys::ncclComm_t>, Windows);

/// Windows registered with `ncclCommWindowRegister`: (communicator, window).
#[derive(Default)]
struct Windows {
    registered: Vec<(nccl_sys::ncclComm_t, *mut c_void)>,
    deregister: Option<WindowDeregisterFn>,
}

impl Drop for Comms {
    fn drop(&mut self) {
        if let Some(deregister) = self.1.deregister {
            for (comm, window) in self.1.registered.drain(..) {
                // SAFETY: each window came from a successful
                // ncclCommWindowRegister on this live communicator and is
                // deregistered exactly once, before the communicator goes.
                let _ = unsafe { deregister(comm, window) };
            }
        }
        for comm in self.0.drain(..) {
            if !comm.is_null() {
                // SAFETY: each handle came from a successful init and is
                // aborted exactly once; nothing uses it afterwards.
                let _ = unsafe { nccl::comm_abort(comm) };
            }
        }
    }
}

/// An NCCL failure with NCCL's own last message.
#[derive(Debug)]
struct NcclFailure {
    code: u32,
    message: String,
}

impl NcclFailure {
    fn from(err: nccl::NcclError, comm: nccl_sys::ncclComm_t) -> NcclFailure {
        let code = err.0 as u32;
        // SAFETY: ncclGetLastError returns a pointer to a NUL-terminated
        // string owned by NCCL (static or per communicator), valid until the
        // next NCCL call on this thread; we copy it at once. A null comm asks
        // for the last global error, which NCCL allows.
        let text = unsafe {
            let ptr = nccl_sys::ncclGetLastError(comm);
            if ptr.is_null() {
                String::new()
            } else {
                CStr::from_ptr(ptr).to_string_lossy().trim().to_string()
            }
        };
        NcclFailure {
            code,
            message: text,
        }
    }
    /// NCCL refuses an unavailable algorithm/protocol with "invalid usage".
    fn is_unavailable(&self) -> bool {
        self.code == nccl_sys::ncclResult_t::ncclInvalidUsage as u32
    }
    fn describe(&self) -> String {
        if self.message.is_empty() {
            nccl_result_name(self.code).to_string()
        } else {
            format!("{}: {}", nccl_result_name(self.code), self.message)
        }
    }
}

// ---------------------------------------------------------------------------
// Symmetric windows (the nccl-symm backend).
//
// Declarations written from `src/nccl.h.in` at v2.28.3-1 (the same text at
// v2.27.3-1 and v2.30.7-1): `ncclMemAlloc(void** ptr, size_t size)` :138,
// `ncclMemFree(void* ptr)` :141, `ncclCommWindowRegister(ncclComm_t comm,
// void* buff, size_t size, ncclWindow_t* win, int winFlags)` :261,
// `ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)` :265, with
// `ncclWindow_t` an opaque pointer :35 and `NCCL_WIN_COLL_SYMMETRIC 0x01` :59.
// `ncclResult_t` is a C enum, read as a C int. They are looked up with dlsym
// in the libnccl cudarc loaded, so an older NCCL (< 2.27, no windows) is a
// row marked unavailable, not a crash. nccl-tests `-R 2` does the same:
// `src/common.cu` AllocateBuffs (ncclMemAlloc) and the ncclCommWindowRegister
// calls with NCCL_WIN_COLL_SYMMETRIC on both buffers of maxBytes.
// NVLS stays off (MULTICAST_OFF): NCCL then asks no multicast team for its
// symmetric kernels (`reqs.lsaMultimem = comm->nvlsSupport`,
// `src/sym_kernels.cc:210` v2.28.3-1), so no multicast object is created.

type MemAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type MemFreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type WindowRegisterFn = unsafe extern "C" fn(
    nccl_sys::ncclComm_t,
    *mut c_void,
    usize,
    *mut *mut c_void,
    c_int,
) -> c_int;
type WindowDeregisterFn = unsafe extern "C" fn(nccl_sys::ncclComm_t, *mut c_void) -> c_int;

/// `NCCL_WIN_COLL_SYMMETRIC` (`src/nccl.h.in:59` v2.28.3-1).
const NCCL_WIN_COLL_SYMMETRIC: c_int = 0x01;

/// The four entry points of symmetric windows, from the loaded libnccl.
#[derive(Clone, Copy)]
struct SymmetricApi {
    mem_alloc: MemAllocFn,
    mem_free: MemFreeFn,
    window_register: WindowRegisterFn,
    window_deregister: WindowDeregisterFn,
}

impl SymmetricApi {
    /// Look the symbols up; Err says which one the library lacks.
    fn load() -> std::result::Result<SymmetricApi, String> {
        Ok(SymmetricApi {
            mem_alloc: nccl_symbol::<MemAllocFn>("ncclMemAlloc")?,
            mem_free: nccl_symbol::<MemFreeFn>("ncclMemFree")?,
            window_register: nccl_symbol::<WindowRegisterFn>("ncclCommWindowRegister")?,
            window_deregister: nccl_symbol::<WindowDeregisterFn>("ncclCommWindowDeregister")?,
        })
    }
}

/// One function of the libnccl cudarc loaded (`check_libraries` ran first).
/// `T` must be the function's exact C signature.
fn nccl_symbol<T: Copy>(name: &str) -> std::result::Result<T, String> {
    // SAFETY: culib() returns the 'static library cudarc opened (present:
    // check_libraries succeeded); get() is a dlsym that reports a missing
    // symbol as an error. Every caller names a function whose C signature is
    // `T` (the declarations above), and the library stays loaded for the
    // life of the process, so the copied pointer stays valid.
    unsafe {
        nccl_sys::culib()
            .get::<T>(name)
            .map(|symbol| *symbol)
            .map_err(|_| {
                let version = nccl::get_nccl_version()
                    .map(version_string)
                    .unwrap_or_else(|_| "unknown".into());
                format!(
                    "libnccl {version} has no {name}: symmetric windows need NCCL 2.27 or newer"
                )
            })
    }
}

/// Device memory from `ncclMemAlloc` (cuMem, mapped for the peers), freed
/// with `ncclMemFree` on drop, after the communicators (`Comms` is dropped
/// first: it is made later and `run_rank` drops it explicitly).
struct NcclMemory {
    ptr: u64,
    free: MemFreeFn,
    ctx: Arc<CudaContext>,
}

impl NcclMemory {
    fn new(
        api: &SymmetricApi,
        ctx: &Arc<CudaContext>,
        ordinal: usize,
        bytes: u64,
        what: &str,
    ) -> Result<NcclMemory> {
        // ncclMemAlloc allocates on the runtime's current device: this GPU's
        // primary context, bound to the thread.
        ctx.bind_to_thread()
            .on_gpu(GpuId(ordinal), "cuCtxSetCurrent")?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; the size is non-zero.
        let code = unsafe { (api.mem_alloc)(&mut ptr, bytes as usize) };
        if code != 0 || ptr.is_null() {
            return Err(Error::runtime(format!(
                "GPU {ordinal}: ncclMemAlloc ({what}, {}) failed: {}",
                crate::units::format_size(bytes),
                nccl_result_name(code as u32)
            )));
        }
        Ok(NcclMemory {
            ptr: ptr as u64,
            free: api.mem_free,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for NcclMemory {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the pointer came from ncclMemAlloc and is freed once; the
        // communicators that mapped it were aborted before (see above).
        let _ = unsafe { (self.free)(self.ptr as *mut c_void) };
    }
}

/// Register both buffers of every local rank as symmetric windows (a
/// collective call: every rank of the communicator registers the same way).
/// A null window means NCCL has no symmetric support on this communicator
/// (`ncclCommWindowRegister` returns at once then, `src/dev_runtime.cc:799`
/// v2.28.3-1): the note says so and the calls run NCCL's classic path.
fn register_windows(
    api: &SymmetricApi,
    ranks: &[LocalRank],
    comms: &mut Comms,
    sizes: (u64, u64),
) -> Result<Option<String>> {
    comms.1.deregister = Some(api.window_deregister);
    sync_point(ranks)?;
    let mut missing = false;
    for (r, &comm) in ranks.iter().zip(comms.0.iter()) {
        r.bind()?;
        for (ptr, bytes, what) in [(r.send, sizes.0, "send"), (r.recv, sizes.1, "recv")] {
            let mut window: *mut c_void = std::ptr::null_mut();
            // SAFETY: the buffer is an ncclMemAlloc allocation of at least
            // `bytes` on this rank's GPU (4096-aligned: cuMem granularity);
            // `window` is a valid out-pointer; `comm` is this rank's.
            let code = unsafe {
                (api.window_register)(
                    comm,
                    ptr as *mut c_void,
                    bytes as usize,
                    &mut window,
                    NCCL_WIN_COLL_SYMMETRIC,
                )
            };
            if code != 0 {
                let failure = NcclFailure {
                    code: code as u32,
                    message: String::new(),
                };
                return Err(Error::runtime(format!(
                    "GPU {}: ncclCommWindowRegister ({what} buffer) failed: {}",
                    r.ordinal,
                    failure.describe()
                )));
            }
            if window.is_null() {
                missing = true;
            } else {
                comms.1.registered.push((comm, window));
            }
        }
    }
    Ok(missing.then(|| {
        "ncclCommWindowRegister gave no window (no symmetric support on this communicator): \
         NCCL ran its classic path"
            .to_string()
    }))
}

fn run_job(spec: &ChildSpec, emit: &mut dyn FnMut(ChildEvent)) -> Result<()> {
    check_libraries()?;
    // The data and checking kernels are compiled at run time.
    gpu::require_nvrtc()?;
    if let ChildMode::Pinned { pair } = spec.mode {
        if let Some(why) = refused_pair(pair) {
            return Err(Error::bad_input(why));
        }
    }
    let device_count = CudaContext::device_count()
        .map_err(|e| Error::runtime(format!("cuDeviceGetCount failed: {e:?}")))?
        as usize;
    if device_count == 0 {
        return Err(Error::runtime("no CUDA GPU visible"));
    }
    match &spec.ranks {
        ChildRanks::Local { gpus } => {
            let gpus = *gpus;
            if gpus == 0 || gpus > device_count {
                return Err(Error::bad_input(format!(
                    "asked for {gpus} GPUs, this machine shows {device_count}"
                )));
            }
            // One id for all local ranks, as rank 0 of a multi-process run makes it.
            let id = nccl::get_uniqueid().map_err(|e| {
                Error::runtime(format!(
                    "ncclGetUniqueId failed: {}",
                    NcclFailure::from(e, std::ptr::null_mut()).describe()
                ))
            })?;
            run_local_ranks(spec, gpus, id, emit)
        }
        ChildRanks::Rank {
            rank,
            world,
            local_rank,
            id_hex,
        } => {
            if *local_rank >= device_count {
                return Err(Error::bad_input(format!(
                    "LOCAL_RANK {local_rank} but this machine shows {device_count} GPUs"
                )));
            }
            let bytes = id_from_hex(id_hex)?;
            let id = nccl_sys::ncclUniqueId {
                internal: bytes.map(|b| b as std::ffi::c_char),
            };
            let place = Place {
                ordinal: *local_rank,
                rank: *rank,
                world: *world,
                id,
            };
            run_rank(spec, place, None, emit)
        }
    }
}

/// Where one rank runs: its GPU, its rank in the communicator, and the id.
#[derive(Clone, Copy)]
struct Place {
    ordinal: usize,
    rank: usize,
    world: usize,
    id: nccl_sys::ncclUniqueId,
}

/// How long the other rank threads get to stop after one failed, before the
/// failure is reported anyway (one stuck inside NCCL cannot be interrupted).
const RELEASE_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Every local GPU driven by its own thread, exactly as one process per GPU
/// would drive it: its own communicator (ncclCommInitRank on the shared id),
/// stream, buffers and timing loops. The threads' reports are merged into
/// those of one process of `gpus` GPUs.
fn run_local_ranks(
    spec: &ChildSpec,
    gpus: usize,
    id: nccl_sys::ncclUniqueId,
    emit: &mut dyn FnMut(ChildEvent),
) -> Result<()> {
    let shared = Arc::new(spec.clone());
    let work = move |rank: usize, gate: &Arc<Gate>, send: &mut dyn FnMut(ChildEvent)| {
        let place = Place {
            ordinal: rank,
            rank,
            world: gpus,
            id,
        };
        run_rank(&shared, place, Some(gate.clone()), send)
    };
    let mut report = LocalReport::new(gpus);
    run_rank_threads(gpus, RELEASE_GRACE, work, &mut |rank, event| {
        report.accept(rank, event, emit)
    })
}

/// One rank (one GPU) from buffers to the last size; reports through `emit`.
/// `gate` joins the other threads of this process (None: one rank per process).
fn run_rank(
    spec: &ChildSpec,
    place: Place,
    gate: Option<Arc<Gate>>,
    emit: &mut dyn FnMut(ChildEvent),
) -> Result<()> {
    let (ordinals, world, first_rank) = (vec![place.ordinal], place.world, place.rank);
    // Largest buffers any size needs.
    let (mut send_max, mut recv_max) = (0u64, 0u64);
    for &bytes in &spec.sizes {
        let c = counts(spec.collective, spec.dtype, bytes, world);
        send_max = send_max.max(c.send_elems * spec.dtype.size());
        recv_max = recv_max.max(c.recv_elems * spec.dtype.size());
    }
    let send_max = send_max.max(spec.dtype.size());
    let recv_max = recv_max.max(spec.dtype.size());
    // Symmetric windows: the library's entry points, or why there are none.
    let symmetric: Option<std::result::Result<SymmetricApi, String>> =
        spec.symmetric.then(SymmetricApi::load);
    let symmetric_api = symmetric.as_ref().and_then(|s| s.as_ref().ok()).copied();

    // Contexts, streams, kernels, buffers.
    let mut ranks = Vec::new();
    let mut cubin = None;
    for (i, &ordinal) in ordinals.iter().enumerate() {
        ranks.push(open_rank(
            spec,
            ordinal,
            first_rank + i,
            (send_max, recv_max),
            symmetric_api.as_ref(),
            gate.as_ref(),
            &mut cubin,
        )?);
    }

    // Inputs: every rank's pattern over the whole send buffer (amplitude
    // from the world size, so sums over all ranks stay exact).
    let data = DataPattern::new(spec.dtype, world, pattern::DEFAULT_SEED);
    for r in &ranks {
        let elems = send_max / spec.dtype.size();
        let mut args = data.fill_args(r.send, elems, r.rank as u32);
        // SAFETY: planner_fill writes `elems` elements inside the send
        // buffer, which holds send_max bytes.
        unsafe { r.launch_data(&r.fill, elems, &mut args)? };
    }
    for r in &ranks {
        wait_stream(r, "fill kernel")?;
    }

    // Communicators.
    let mut comms = init_comm(place, &ranks)?;
    let path_note = match &symmetric_api {
        Some(api) => register_windows(api, &ranks, &mut comms, (send_max, recv_max))?,
        None => None,
    };
    let mut gpus = Vec::new();
    for r in &ranks {
        gpus.push(gpu_info(r)?);
    }
    let nccl_version = nccl::get_nccl_version()
        .map(version_string)
        .unwrap_or_else(|_| "unknown".into());
    emit(ChildEvent::Init {
        nccl_version,
        cuda_version: cuda_version(),
        world_size: world,
        gpus,
    });

    if let Some(Err(why)) = &symmetric {
        // This libnccl has no symmetric windows: every size is unavailable.
        for &bytes in &spec.sizes {
            let mut event = empty_size_event(bytes);
            set_status(&mut event, RowStatus::Unavailable, why.clone());
            emit(event);
        }
        drop(comms);
        return Ok(());
    }

    if spec.mode != ChildMode::Choices {
        warm_clocks(spec, &ranks, &comms, world);
    }
    let outcome = run_sizes(spec, &ranks, &comms, data, world, path_note, emit);
    if outcome.is_err() {
        // Release the other threads before this communicator is aborted.
        if let Some(gate) = &gate {
            gate.abort();
        }
    }
    drop(comms);
    outcome
}

/// One rank's GPU (`ordinal`) opened: its context, stream, kernels (compiled once per process: `cubin`), buffers
/// of `send_max`/`recv_max` bytes (NCCL's allocator for symmetric windows) and timing events.
fn open_rank(
    spec: &ChildSpec,
    ordinal: usize,
    rank: usize,
    (send_max, recv_max): (u64, u64),
    symmetric_api: Option<&SymmetricApi>,
    gate: Option<&Arc<Gate>>,
    cubin: &mut Option<Vec<u8>>,
) -> Result<LocalRank> {
    let scratch_len = spec.plan.repeats as usize + 1;
    let ctx = CudaContext::new(ordinal).on_gpu(GpuId(ordinal), "cuDevicePrimaryCtxRetain")?;
    // SAFETY: we order all work ourselves: every buffer is used on this
    // one stream only, and results are read after explicit synchronisation.
    unsafe { ctx.disable_event_tracking() };
    let (free, _total) = ctx.mem_get_info().on_gpu(GpuId(ordinal), "cuMemGetInfo")?;
    let need = send_max + recv_max + (64 << 20);
    if (free as u64) < need {
        return Err(Error::runtime(format!(
            "GPU {ordinal}: the largest size needs {} of buffers, {} is free",
            crate::units::format_size(need),
            crate::units::format_size(free as u64)
        )));
    }
    let stream = ctx.new_stream().on_gpu(GpuId(ordinal), "cuStreamCreate")?;
    // The data kernels, compiled to CUBIN for this GPU's architecture
    // (the same path and file as the executor's).
    let image = match cubin.take() {
        Some(image) => image,
        None => {
            let cc = ctx
                .compute_capability()
                .on_gpu(GpuId(ordinal), "cuDeviceGetAttribute")?;
            pattern::compile(spec.dtype, &nvrtc::arch_of(cc))?.image
        }
    };
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(image.clone()))
        .on_gpu(GpuId(ordinal), "cuModuleLoadData")?;
    *cubin = Some(image);
    let fill = module
        .load_function(FillArgs::KERNEL)
        .on_gpu(GpuId(ordinal), "cuModuleGetFunction (planner_fill)")?;
    let check = module
        .load_function(CheckArgs::KERNEL)
        .on_gpu(GpuId(ordinal), "cuModuleGetFunction (planner_check)")?;
    // Plain cuMemAlloc (see gpu::buffer): NCCL may register these buffers.
    // Uninitialised memory is fine: the send buffer is filled below and
    // the receive buffer is read only after a collective or the
    // poisoning memset wrote it.
    let id = GpuId(ordinal);
    let mut buffers = Vec::new();
    let mut nccl_memory = Vec::new();
    let (send, recv) = match symmetric_api {
        // Symmetric windows need cuMem memory: NCCL's own allocator.
        Some(api) => {
            let send_mem = NcclMemory::new(api, &ctx, ordinal, send_max, "send")?;
            let recv_mem = NcclMemory::new(api, &ctx, ordinal, recv_max, "recv")?;
            let pointers = (send_mem.ptr, recv_mem.ptr);
            nccl_memory.extend([send_mem, recv_mem]);
            pointers
        }
        None => {
            let send_buf = DeviceBuffer::new(&ctx, id, send_max as usize, "send")?;
            let recv_buf = DeviceBuffer::new(&ctx, id, recv_max as usize, "recv")?;
            let pointers = (send_buf.ptr(), recv_buf.ptr());
            buffers.extend([send_buf, recv_buf]);
            pointers
        }
    };
    let wrong_buf = DeviceBuffer::new(&ctx, id, 16, "check counters")?;
    let scratch_buf = DeviceBuffer::new(&ctx, id, 8 * scratch_len, "scratch")?;
    let (wrong, scratch) = (wrong_buf.ptr(), scratch_buf.ptr());
    buffers.extend([wrong_buf, scratch_buf]);
    let timing = Some(cu::CUevent_flags::CU_EVENT_DEFAULT);
    let start = ctx
        .new_event(timing)
        .on_gpu(GpuId(ordinal), "cuEventCreate")?;
    let end = ctx
        .new_event(timing)
        .on_gpu(GpuId(ordinal), "cuEventCreate")?;
    Ok(LocalRank {
        ordinal,
        rank,
        ctx,
        stream,
        _buffers: buffers,
        _nccl_memory: nccl_memory,
        send,
        recv,
        wrong,
        scratch,
        scratch_len,
        recv_bytes: recv_max,
        fill,
        check,
        start,
        end,
        gate: gate.cloned(),
    })
}

/// The size loop of one rank.
fn run_sizes(
    spec: &ChildSpec,
    ranks: &[LocalRank],
    comms: &Comms,
    data: DataPattern,
    world: usize,
    path_note: Option<String>,
    emit: &mut dyn FnMut(ChildEvent),
) -> Result<()> {
    let distributed = world > 1;
    let mut refused: Option<String> = None;
    for &bytes in &spec.sizes {
        let c = counts(spec.collective, spec.dtype, bytes, world);
        let mut event = empty_size_event(bytes);
        if let Some(why) = &refused {
            set_status(&mut event, RowStatus::Unavailable, why.clone());
            emit(event);
            continue;
        }
        if c.call == 0 {
            set_status(
                &mut event,
                RowStatus::Skipped,
                format!(
                    "smaller than one {} element per rank on {world} ranks",
                    spec.dtype
                ),
            );
            emit(event);
            continue;
        }
        match run_size(spec, ranks, comms, c, data, world, distributed) {
            Ok((times, iters, wrong)) => {
                if let ChildEvent::Size {
                    status,
                    note,
                    iters: it,
                    repeats,
                    times_us,
                    wrong: w,
                    ..
                } = &mut event
                {
                    *status = RowStatus::Ok;
                    note.clone_from(&path_note);
                    *it = iters;
                    *repeats = times.len() as u32;
                    *times_us = times;
                    *w = Some(wrong);
                }
                emit(event);
            }
            Err(SizeError::Nccl(f)) if f.is_unavailable() => {
                let why = format!("NCCL refuses it: {}", f.describe());
                set_status(&mut event, RowStatus::Unavailable, why.clone());
                emit(event);
                // The pair is unavailable for this collective at every size;
                // the communicator may be in an error state, so stop calling it.
                refused = Some(why);
            }
            Err(SizeError::Nccl(f)) => {
                return Err(Error::runtime(format!(
                    "{} B: NCCL call failed: {}",
                    bytes,
                    f.describe()
                )))
            }
            Err(SizeError::Other(e)) => return Err(e),
        }
    }
    Ok(())
}

/// The GPUs idle at low clocks while a child starts: keep them busy for
/// about 200 ms with the job's own collective (at most 64 MiB) before the
/// first timed size, so every child starts at the same clocks. A failing
/// call is left for the size loop to report.
fn warm_clocks(spec: &ChildSpec, ranks: &[LocalRank], comms: &Comms, world: usize) {
    let Some(bytes) = spec
        .sizes
        .iter()
        .copied()
        .filter(|&b| b <= 64 << 20 && counts(spec.collective, spec.dtype, b, world).call > 0)
        .max()
    else {
        return;
    };
    let c = counts(spec.collective, spec.dtype, bytes, world);
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(200) {
        for _ in 0..10 {
            if launch_collective(spec, ranks, comms, c).is_err() {
                return;
            }
        }
        if sync_all(ranks).is_err() {
            return;
        }
    }
}

/// A size not run yet.
fn empty_size_event(bytes: u64) -> ChildEvent {
    ChildEvent::Size {
        bytes,
        status: RowStatus::Skipped,
        note: None,
        iters: 0,
        repeats: 0,
        times_us: Vec::new(),
        wrong: None,
    }
}

fn set_status(event: &mut ChildEvent, new_status: RowStatus, why: String) {
    if let ChildEvent::Size { status, note, .. } = event {
        *status = new_status;
        *note = Some(why);
    }
}

enum SizeError {
    Nccl(NcclFailure),
    Other(Error),
}

impl From<Error> for SizeError {
    fn from(e: Error) -> Self {
        SizeError::Other(e)
    }
}

fn init_comm(place: Place, ranks: &[LocalRank]) -> Result<Comms> {
    let Place {
        ordinal,
        rank,
        world,
        id,
    } = place;
    let r = &ranks[0];
    // ncclCommInitRank works on the calling thread's current device.
    r.bind()?;
    // ncclCommInitRank blocks until every rank has called it: go in only
    // when every local thread got this far, so a thread that failed before
    // cannot leave the others waiting inside NCCL.
    sync_point(ranks)?;
    let mut comm: nccl_sys::ncclComm_t = std::ptr::null_mut();
    // SAFETY: `comm` is a valid out-pointer; the id came from
    // ncclGetUniqueId (this process or rank 0 through the rendezvous).
    unsafe { nccl::comm_init_rank(&mut comm, world as i32, id, rank as i32) }.map_err(|e| {
        Error::runtime(format!(
            "GPU {ordinal}: ncclCommInitRank (rank {rank} of {world}) failed: {}",
            NcclFailure::from(e, std::ptr::null_mut()).describe()
        ))
    })?;
    Ok(Comms(vec![comm], Windows::default()))
}

/// Enqueue one collective on every local rank (grouped when there are several).
fn launch_collective(
    spec: &ChildSpec,
    ranks: &[LocalRank],
    comms: &Comms,
    c: Counts,
) -> std::result::Result<(), NcclFailure> {
    let grouped = ranks.len() > 1;
    if grouped {
        nccl::group_start().map_err(|e| NcclFailure::from(e, std::ptr::null_mut()))?;
    }
    let dtype = nccl_dtype(spec.dtype);
    let sum = nccl_sys::ncclRedOp_t::ncclSum;
    let count = c.call as usize;
    let mut first_error = None;
    for (r, &comm) in ranks.iter().zip(comms.0.iter()) {
        let send = r.send as *const c_void;
        let recv = r.recv as *mut c_void;
        let stream = r.stream.cu_stream() as nccl_sys::cudaStream_t;
        // SAFETY: send/recv are device buffers of this rank's GPU holding at
        // least send_max/recv_max bytes, which covers `count` elements of
        // `dtype` for this collective on `world` ranks (see `counts`); the
        // stream belongs to the same GPU and the communicator to this rank.
        let result = unsafe {
            match spec.collective {
                Coll::AllReduce => nccl::all_reduce(send, recv, count, dtype, sum, comm, stream),
                Coll::AllGather => nccl::all_gather(send, recv, count, dtype, comm, stream),
                Coll::ReduceScatter => {
                    nccl::reduce_scatter(send, recv, count, dtype, sum, comm, stream)
                }
                Coll::Broadcast => nccl::broadcast(send, recv, count, dtype, 0, comm, stream),
                Coll::Reduce => nccl::reduce(send, recv, count, dtype, sum, 0, comm, stream),
            }
        };
        if let Err(e) = result {
            if first_error.is_none() {
                first_error = Some(NcclFailure::from(e, comm));
            }
        }
    }
    if grouped {
        // Always close the group, even after an error inside it.
        if let Err(e) = nccl::group_end() {
            if first_error.is_none() {
                first_error = Some(NcclFailure::from(e, comms.0[0]));
            }
        }
    }
    match first_error {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

fn sync_all(ranks: &[LocalRank]) -> Result<()> {
    for r in ranks {
        wait_stream(r, "cuStreamSynchronize")?;
    }
    Ok(())
}

/// Wait for a rank's stream. With other rank threads in this process, poll
/// instead of blocking, so that a thread whose peer failed (and will never
/// join the collective this stream waits on) stops instead of hanging.
fn wait_stream(r: &LocalRank, what: &str) -> Result<()> {
    let Some(gate) = &r.gate else {
        return r.stream.synchronize().on_gpu(GpuId(r.ordinal), what);
    };
    r.bind()?;
    loop {
        // SAFETY: the stream handle is owned by `r.stream`, alive here.
        match unsafe { cu::cuStreamQuery(r.stream.cu_stream()) } {
            cu::CUresult::CUDA_SUCCESS => return Ok(()),
            cu::CUresult::CUDA_ERROR_NOT_READY => {
                if gate.is_aborted() {
                    return Err(released(r.ordinal));
                }
                std::thread::yield_now();
            }
            other => return Err(cuda_error(GpuId(r.ordinal), what, &DriverError(other))),
        }
    }
}

/// Wait until every rank thread of this process gets here (no-op for one
/// rank per process).
fn sync_point(ranks: &[LocalRank]) -> Result<()> {
    for r in ranks {
        if let Some(gate) = &r.gate {
            gate.wait().map_err(|Released| released(r.ordinal))?;
        }
    }
    Ok(())
}

fn released(ordinal: usize) -> Error {
    Error::runtime(format!(
        "GPU {ordinal}: stopped because another GPU of this process failed"
    ))
}

/// Warm-up, timed repeats and the checked call for one size: (per-repeat µs, iters, #wrong).
fn run_size(
    spec: &ChildSpec,
    ranks: &[LocalRank],
    comms: &Comms,
    c: Counts,
    data: DataPattern,
    world: usize,
    distributed: bool,
) -> std::result::Result<(Vec<f64>, u32, u64), SizeError> {
    let bytes_for_plan = match spec.collective {
        Coll::AllGather | Coll::ReduceScatter => c.per_rank * world as u64,
        _ => c.call,
    } * spec.dtype.size();
    let mut times = Vec::new();
    let mut iters = 0;
    if spec.mode != ChildMode::Choices {
        iters = spec.plan.iters_at(bytes_for_plan);
        let warmup = spec.plan.warmup_at(bytes_for_plan);
        for _ in 0..warmup {
            launch_collective(spec, ranks, comms, c).map_err(SizeError::Nccl)?;
        }
        sync_all(ranks)?;
        times = if spec.graph {
            time_with_graphs(spec, ranks, comms, c, iters)?
        } else {
            time_loops(spec, ranks, comms, c, iters)?
        };
    }

    // The checked call.
    for r in ranks {
        // Raw driver calls act on the thread's current context.
        r.bind()?;
        let stream = r.stream.cu_stream();
        // SAFETY: the ranges lie inside buffers allocated on this stream's
        // GPU (the counters' buffer holds 16 bytes).
        unsafe {
            cudarc::driver::result::memset_d8_async(r.recv, 0xFF, r.recv_bytes as usize, stream)
                .on_gpu(GpuId(r.ordinal), "cuMemsetD8 (poison)")?;
            // The wrong count starts at 0, the first wrong index at u64::MAX.
            cudarc::driver::result::memset_d8_async(r.wrong, 0, 8, stream)
                .on_gpu(GpuId(r.ordinal), "cuMemsetD8 (counter)")?;
            cudarc::driver::result::memset_d8_async(r.wrong + 8, 0xFF, 8, stream)
                .on_gpu(GpuId(r.ordinal), "cuMemsetD8 (first wrong)")?;
        }
    }
    launch_collective(spec, ranks, comms, c).map_err(SizeError::Nccl)?;
    let mut wrong = 0u64;
    for r in ranks {
        let out_elems = match spec.collective {
            Coll::Reduce if r.rank != 0 => 0, // only the root's output is defined
            _ => c.recv_elems,
        };
        if out_elems > 0 {
            // Broadcast and Reduce are called with root 0.
            let expectation = Expectation {
                pattern: data,
                collective: spec.collective,
                n_ranks: world as u32,
                rank: r.rank as u32,
                root: 0,
                count: c.per_rank,
            };
            let mut args = expectation.check_args(r.recv, out_elems, r.wrong, r.wrong + 8);
            // SAFETY: planner_check reads `out_elems` elements inside the
            // receive buffer (recv_elems at most) and writes the two u64 of
            // the counters' buffer (16 bytes).
            unsafe { r.launch_data(&r.check, out_elems, &mut args)? };
        }
        let mut host = [0u64; 1];
        r.bind()?;
        // The collective must be done before the pageable copy below, which
        // would otherwise block where no peer failure can stop it.
        wait_stream(r, "check kernel")?;
        // SAFETY: copies the one u64 of the counter buffer into `host`.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(&mut host, r.wrong, r.stream.cu_stream())
        }
        .on_gpu(GpuId(r.ordinal), "cuMemcpyDtoH (counter)")?;
        wait_stream(r, "check kernel")?;
        wrong += host[0];
    }

    if distributed && spec.mode != ChildMode::Choices {
        // Slowest rank per repeat, and the total of wrong elements.
        times = all_reduce_f64(spec, ranks, comms, &times, nccl_sys::ncclRedOp_t::ncclMax)?;
        let total = all_reduce_f64(
            spec,
            ranks,
            comms,
            &[wrong as f64],
            nccl_sys::ncclRedOp_t::ncclSum,
        )?;
        wrong = total.first().copied().unwrap_or(0.0) as u64;
    }
    Ok((times, iters, wrong))
}

/// Repeats of `iters` back-to-back calls between events on every GPU.
fn time_loops(
    spec: &ChildSpec,
    ranks: &[LocalRank],
    comms: &Comms,
    c: Counts,
    iters: u32,
) -> std::result::Result<Vec<f64>, SizeError> {
    let mut times = Vec::new();
    for _ in 0..spec.plan.repeats {
        // Every rank starts its timed loop together.
        sync_point(ranks)?;
        for r in ranks {
            r.start
                .record(&r.stream)
                .on_gpu(GpuId(r.ordinal), "cuEventRecord")?;
        }
        for _ in 0..iters {
            launch_collective(spec, ranks, comms, c).map_err(SizeError::Nccl)?;
        }
        for r in ranks {
            r.end
                .record(&r.stream)
                .on_gpu(GpuId(r.ordinal), "cuEventRecord")?;
        }
        times.push(slowest_loop_us(ranks, iters)?);
    }
    Ok(times)
}

/// The same, with the loop captured once into a CUDA graph per GPU and replayed.
fn time_with_graphs(
    spec: &ChildSpec,
    ranks: &[LocalRank],
    comms: &Comms,
    c: Counts,
    iters: u32,
) -> std::result::Result<Vec<f64>, SizeError> {
    for r in ranks {
        r.stream
            .begin_capture(cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .on_gpu(GpuId(r.ordinal), "cuStreamBeginCapture")?;
    }
    let mut captured = Ok(());
    for _ in 0..iters {
        if let Err(f) = launch_collective(spec, ranks, comms, c) {
            captured = Err(f);
            break;
        }
    }
    // End every capture, even after a failure, so the streams work again.
    let mut graphs: Vec<CudaGraph> = Vec::new();
    let mut capture_error = None;
    for r in ranks {
        match r.stream.end_capture(cu::CUgraphInstantiate_flags(0)) {
            Ok(Some(g)) => graphs.push(g),
            Ok(None) => {
                capture_error = Some(Error::runtime(format!(
                    "GPU {}: empty CUDA graph",
                    r.ordinal
                )))
            }
            Err(e) => capture_error = Some(cuda_error(GpuId(r.ordinal), "cuStreamEndCapture", &e)),
        }
    }
    captured.map_err(SizeError::Nccl)?;
    if let Some(e) = capture_error {
        return Err(e.into());
    }
    // One untimed replay, then the timed ones.
    for (g, r) in graphs.iter().zip(ranks) {
        g.launch().on_gpu(GpuId(r.ordinal), "cuGraphLaunch")?;
    }
    sync_all(ranks)?;
    let mut times = Vec::new();
    for _ in 0..spec.plan.repeats {
        // Every rank starts its timed replay together.
        sync_point(ranks)?;
        for r in ranks {
            r.start
                .record(&r.stream)
                .on_gpu(GpuId(r.ordinal), "cuEventRecord")?;
        }
        for (g, r) in graphs.iter().zip(ranks) {
            g.launch().on_gpu(GpuId(r.ordinal), "cuGraphLaunch")?;
        }
        for r in ranks {
            r.end
                .record(&r.stream)
                .on_gpu(GpuId(r.ordinal), "cuEventRecord")?;
        }
        times.push(slowest_loop_us(ranks, iters)?);
    }
    Ok(times)
}

fn slowest_loop_us(ranks: &[LocalRank], iters: u32) -> Result<f64> {
    let mut slowest = 0.0f64;
    for r in ranks {
        // The end event is the last work on the stream.
        wait_stream(r, "cuEventSynchronize")?;
        let ms = r
            .start
            .elapsed_ms(&r.end)
            .on_gpu(GpuId(r.ordinal), "cuEventElapsedTime")?;
        slowest = slowest.max(ms as f64);
    }
    Ok(slowest * 1000.0 / iters.max(1) as f64)
}

/// Reduce a few f64 across the processes of a multi-process run with NCCL.
fn all_reduce_f64(
    _spec: &ChildSpec,
    ranks: &[LocalRank],
    comms: &Comms,
    values: &[f64],
    op: nccl_sys::ncclRedOp_t,
) -> std::result::Result<Vec<f64>, SizeError> {
    let r = &ranks[0];
    let n = values.len();
    if n == 0 || n > r.scratch_len {
        return Ok(values.to_vec());
    }
    r.bind()?;
    let stream = r.stream.cu_stream();
    // SAFETY: the scratch buffer holds scratch_len >= n f64 on this GPU; the
    // host slice holds n f64 and the copy is synchronous for pageable memory.
    unsafe {
        cudarc::driver::result::memcpy_htod_async(r.scratch, values, stream)
            .on_gpu(GpuId(r.ordinal), "cuMemcpyHtoD")?;
    }
    let ptr = r.scratch as *mut c_void;
    // SAFETY: in-place all-reduce of n f64 inside the scratch buffer, on this
    // rank's stream and communicator.
    unsafe {
        nccl::all_reduce(
            ptr as *const c_void,
            ptr,
            n,
            nccl_sys::ncclDataType_t::ncclFloat64,
            op,
            comms.0[0],
            stream as nccl_sys::cudaStream_t,
        )
    }
    .map_err(|e| SizeError::Nccl(NcclFailure::from(e, comms.0[0])))?;
    wait_stream(r, "cuStreamSynchronize")?;
    let mut out = vec![0f64; n];
    // SAFETY: reads n f64 from the scratch buffer into `out` (n f64).
    unsafe {
        cudarc::driver::result::memcpy_dtoh_async(&mut out, r.scratch, stream)
            .on_gpu(GpuId(r.ordinal), "cuMemcpyDtoH")?;
    }
    wait_stream(r, "cuStreamSynchronize")?;
    Ok(out)
}

fn gpu_info(r: &LocalRank) -> Result<GpuInfo> {
    let name = r.ctx.name().unwrap_or_else(|_| "unknown".into());
    let (major, minor) = r.ctx.compute_capability().unwrap_or((0, 0));
    let memory = r.ctx.total_mem().unwrap_or(0) as u64;
    let mut buf = [0 as std::ffi::c_char; 32];
    // SAFETY: the buffer has room for 32 characters including the NUL, which
    // covers the 13-character "0000:00:00.0" form.
    let bus_id = unsafe {
        match cu::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, r.ctx.cu_device()) {
            cu::CUresult::CUDA_SUCCESS => {
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            }
            _ => "unknown".into(),
        }
    };
    Ok(GpuInfo {
        rank: r.rank,
        host: crate::measure::hostname(),
        name,
        bus_id,
        compute_capability: format!("{major}.{minor}"),
        memory_bytes: memory,
    })
}

fn cuda_version() -> String {
    let mut version = 0i32;
    // SAFETY: cuDriverGetVersion writes one int.
    match unsafe { cu::cuDriverGetVersion(&mut version) } {
        cu::CUresult::CUDA_SUCCESS => format!("{}.{}", version / 1000, (version % 1000) / 10),
        _ => "unknown".into(),
    }
}

/// A barrier for the rank threads of one process that a failing thread can
/// open for good (std::sync::Barrier cannot be released): `wait` returns
/// `Err(Released)` to everyone once `abort` was called.
struct Gate {
    parties: usize,
    state: Mutex<GateState>,
    turned: Condvar,
}

#[derive(Default)]
struct GateState {
    waiting: usize,
    generation: u64,
    aborted: bool,
}

/// Another thread aborted the gate.
#[derive(Debug, PartialEq, Eq)]
struct Released;

impl Gate {
    fn new(parties: usize) -> Gate {
        Gate {
            parties: parties.max(1),
            state: Mutex::new(GateState::default()),
            turned: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // The state stays consistent even if a holder panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Block until all parties arrive (Ok) or the gate is aborted (Err).
    fn wait(&self) -> std::result::Result<(), Released> {
        let mut state = self.lock();
        if state.aborted {
            return Err(Released);
        }
        state.waiting += 1;
        if state.waiting == self.parties {
            state.waiting = 0;
            state.generation += 1;
            self.turned.notify_all();
            return Ok(());
        }
        let generation = state.generation;
        while state.generation == generation && !state.aborted {
            state = self
                .turned
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.generation != generation {
            Ok(())
        } else {
            Err(Released)
        }
    }

    /// Release every waiter, now and later; true for the first call.
    fn abort(&self) -> bool {
        let mut state = self.lock();
        let first = !state.aborted;
        state.aborted = true;
        self.turned.notify_all();
        first
    }

    fn is_aborted(&self) -> bool {
        self.lock().aborted
    }
}

/// Run `work(rank, gate, send)` on `n` threads sharing one gate; messages a
/// thread sends reach `on_message` on the calling thread, in order. The first
/// failing thread aborts the gate (releasing the others) and its error is
/// returned; if some thread has not stopped `grace` after that failure, the
/// error is returned anyway and that thread is left behind.
fn run_rank_threads<M, W>(
    n: usize,
    grace: std::time::Duration,
    work: W,
    on_message: &mut dyn FnMut(usize, M),
) -> Result<()>
where
    M: Send + 'static,
    W: Fn(usize, &Arc<Gate>, &mut dyn FnMut(M)) -> Result<()> + Send + Sync + 'static,
{
    enum FromRank<M> {
        Message(usize, M),
        /// The outcome, and whether this thread's failure aborted the gate.
        Finished(Result<()>, bool),
    }
    let gate = Arc::new(Gate::new(n));
    let work = Arc::new(work);
    let (tx, rx) = mpsc::channel::<FromRank<M>>();
    let mut started = 0;
    let mut first_error: Option<(Error, bool)> = None;
    let mut deadline = None;
    for rank in 0..n {
        let (thread_gate, work, tx) = (gate.clone(), work.clone(), tx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("nccl-rank-{rank}"))
            .spawn(move || {
                let messages = tx.clone();
                let mut send = |m: M| {
                    let _ = messages.send(FromRank::Message(rank, m));
                };
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    work(rank, &thread_gate, &mut send)
                }))
                .unwrap_or_else(|_| {
                    Err(Error::runtime(format!("rank {rank}: its thread panicked")))
                });
                let aborted_first = outcome.is_err() && thread_gate.abort();
                let _ = tx.send(FromRank::Finished(outcome, aborted_first));
            });
        match spawned {
            Ok(_) => started += 1,
            Err(e) => {
                gate.abort();
                first_error = Some((
                    Error::runtime(format!("cannot start the thread of rank {rank}: {e}")),
                    true,
                ));
                deadline = Some(std::time::Instant::now() + grace);
                break;
            }
        }
    }
    drop(tx);
    let mut finished = 0;
    while finished < started {
        let next = match deadline {
            None => rx.recv().ok(),
            Some(at) => rx
                .recv_timeout(at.saturating_duration_since(std::time::Instant::now()))
                .ok(),
        };
        let Some(next) = next else {
            break; // grace over (or every thread gone)
        };
        match next {
            FromRank::Message(rank, m) => on_message(rank, m),
            FromRank::Finished(Ok(()), _) => finished += 1,
            FromRank::Finished(Err(e), aborted_first) => {
                finished += 1;
                // Prefer the cause over the threads it released.
                let replace = match &first_error {
                    None => true,
                    Some((_, cause)) => aborted_first && !cause,
                };
                if replace {
                    first_error = Some((e, aborted_first));
                }
                deadline.get_or_insert_with(|| std::time::Instant::now() + grace);
            }
        }
    }
    match first_error {
        Some((e, _)) => Err(e),
        None if finished < started => Err(Error::runtime(
            "a GPU thread ended without reporting its result",
        )),
        None => Ok(()),
    }
}

/// Turns the reports of the rank threads into those of one process of
/// `gpus` GPUs: one Init listing every GPU (once all are up), then rank 0's
/// sizes (every rank holds the values combined over all ranks).
struct LocalReport {
    gpus: usize,
    inits: Vec<ChildEvent>,
    init_sent: bool,
    held: Vec<ChildEvent>,
}

impl LocalReport {
    fn new(gpus: usize) -> LocalReport {
        LocalReport {
            gpus,
            inits: Vec::new(),
            init_sent: false,
            held: Vec::new(),
        }
    }

    fn accept(&mut self, rank: usize, event: ChildEvent, emit: &mut dyn FnMut(ChildEvent)) {
        match event {
            ChildEvent::Init { .. } => {
                self.inits.push(event);
                if self.inits.len() == self.gpus {
                    emit(merge_inits(std::mem::take(&mut self.inits)));
                    self.init_sent = true;
                    for held in self.held.drain(..) {
                        emit(held);
                    }
                }
            }
            other if rank == 0 => {
                if self.init_sent {
                    emit(other)
                } else {
                    self.held.push(other)
                }
            }
            _ => {}
        }
    }
}

/// One Init from the ranks' own: the first one's versions, every GPU by rank.
fn merge_inits(inits: Vec<ChildEvent>) -> ChildEvent {
    let mut merged: Option<(String, String, usize)> = None;
    let mut all_gpus = Vec::new();
    for init in inits {
        if let ChildEvent::Init {
            nccl_version,
            cuda_version,
            world_size,
            gpus,
        } = init
        {
            merged.get_or_insert((nccl_version, cuda_version, world_size));
            all_gpus.extend(gpus);
        }
    }
    all_gpus.sort_by_key(|g| g.rank);
    let (nccl_version, cuda_version, world_size) = merged.unwrap_or_default();
    ChildEvent::Init {
        nccl_version,
        cuda_version,
        world_size,
        gpus: all_gpus,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::{Duration, Instant};

    #[test]
    fn rank_threads_pass_the_gate_together_and_deliver_messages() {
        let mut got = Vec::new();
        let outcome = run_rank_threads(
            3,
            Duration::from_secs(5),
            |rank, gate, send: &mut dyn FnMut(usize)| {
                for phase in 0..4 {
                    gate.wait()
                        .map_err(|_| Error::runtime("released".to_string()))?;
                    send(rank * 10 + phase);
                }
                Ok(())
            },
            &mut |rank, m| got.push((rank, m)),
        );
        assert!(outcome.is_ok());
        assert_eq!(got.len(), 12);
        // Each rank's messages arrive in its own order.
        for rank in 0..3 {
            let mine: Vec<usize> = got
                .iter()
                .filter(|(r, _)| *r == rank)
                .map(|p| p.1)
                .collect();
            assert_eq!(
                mine,
                vec![rank * 10, rank * 10 + 1, rank * 10 + 2, rank * 10 + 3]
            );
        }
    }

    #[test]
    fn a_failing_rank_releases_the_others_and_its_error_is_reported() {
        let start = Instant::now();
        let outcome = run_rank_threads(
            2,
            Duration::from_secs(30),
            |rank, gate, _send: &mut dyn FnMut(())| {
                if rank == 1 {
                    // Fails before the first barrier (as a failed cuMemAlloc would).
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(Error::runtime("GPU 1: cuMemAlloc (send, 4 GiB) failed"));
                }
                gate.wait()
                    .map_err(|Released| Error::runtime("GPU 0: released"))?;
                Ok(())
            },
            &mut |_, _| {},
        );
        let message = outcome.unwrap_err().to_string();
        assert!(message.contains("GPU 1: cuMemAlloc"), "{message}");
        // Released at once, not after the grace period.
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_rank_stuck_forever_does_not_hang_the_process() {
        let outcome = run_rank_threads(
            2,
            Duration::from_millis(200),
            |rank, _gate, _send: &mut dyn FnMut(())| {
                if rank == 0 {
                    // Ignores the gate, like a thread blocked inside NCCL.
                    std::thread::sleep(Duration::from_secs(3600));
                    return Ok(());
                }
                Err(Error::runtime("GPU 1: ncclCommInitRank failed"))
            },
            &mut |_, _| {},
        );
        assert!(outcome
            .unwrap_err()
            .to_string()
            .contains("ncclCommInitRank"));
    }

    #[test]
    fn a_panicking_rank_is_an_error_not_a_hang() {
        let outcome = run_rank_threads(
            2,
            Duration::from_secs(30),
            |rank, gate, _send: &mut dyn FnMut(())| {
                if rank == 0 {
                    panic!("boom");
                }
                gate.wait().map_err(|_| Error::runtime("released"))
            },
            &mut |_, _| {},
        );
        assert!(outcome
            .unwrap_err()
            .to_string()
            .contains("rank 0: its thread panicked"));
    }

    #[test]
    fn gate_stays_open_after_abort() {
        let gate = Gate::new(2);
        assert!(!gate.is_aborted());
        assert!(gate.abort());
        assert!(!gate.abort(), "only the first abort is the cause");
        assert_eq!(gate.wait(), Err(Released));
        // A single party never waits.
        assert_eq!(Gate::new(1).wait(), Ok(()));
    }

    fn gpu(rank: usize) -> GpuInfo {
        GpuInfo {
            rank,
            host: "h".into(),
            name: "NVIDIA H200".into(),
            bus_id: format!("0000:0{rank}:00.0"),
            compute_capability: "9.0".into(),
            memory_bytes: 1,
        }
    }

    fn init(rank: usize) -> ChildEvent {
        ChildEvent::Init {
            nccl_version: "2.28.3".into(),
            cuda_version: "13.0".into(),
            world_size: 2,
            gpus: vec![gpu(rank)],
        }
    }

    fn size(bytes: u64) -> ChildEvent {
        ChildEvent::Size {
            bytes,
            status: RowStatus::Ok,
            note: None,
            iters: 20,
            repeats: 1,
            times_us: vec![10.0],
            wrong: Some(0),
        }
    }

    #[test]
    fn thread_reports_read_as_one_process() {
        let mut out = Vec::new();
        let mut report = LocalReport::new(2);
        let mut emit = |e: ChildEvent| out.push(e);
        // Rank 1 comes up last; rank 0's first size waits for the Init.
        report.accept(0, init(0), &mut emit);
        report.accept(0, size(8), &mut emit);
        report.accept(1, size(8), &mut emit); // rank 1's copy is dropped
        report.accept(1, init(1), &mut emit);
        report.accept(0, size(16), &mut emit);
        assert_eq!(out.len(), 3);
        match &out[0] {
            ChildEvent::Init {
                world_size, gpus, ..
            } => {
                assert_eq!(*world_size, 2);
                assert_eq!(gpus.iter().map(|g| g.rank).collect::<Vec<_>>(), vec![0, 1]);
            }
            other => panic!("expected Init, got {other:?}"),
        }
        assert_eq!(out[1], size(8));
        assert_eq!(out[2], size(16));
    }

    #[test]
    fn counts_follow_nccl_tests_sizes() {
        // all-reduce 1 MiB of f32: 262144 elements in and out
        let c = counts(Coll::AllReduce, Dtype::F32, 1 << 20, 2);
        assert_eq!(
            (c.call, c.send_elems, c.recv_elems),
            (262144, 262144, 262144)
        );
        // all-gather 1 MiB on 2 ranks: each sends 131072, receives 262144; NCCL takes the send count
        let c = counts(Coll::AllGather, Dtype::F32, 1 << 20, 2);
        assert_eq!(
            (c.call, c.send_elems, c.recv_elems),
            (131072, 131072, 262144)
        );
        // reduce-scatter 1 MiB of bf16 on 4 ranks: 524288 in, 131072 out
        let c = counts(Coll::ReduceScatter, Dtype::Bf16, 1 << 20, 4);
        assert_eq!(
            (c.call, c.send_elems, c.recv_elems),
            (131072, 524288, 131072)
        );
        // 8 bytes of f32 all-gather on 4 ranks: nothing per rank
        assert_eq!(counts(Coll::AllGather, Dtype::F32, 8, 4).call, 0);
    }
}
