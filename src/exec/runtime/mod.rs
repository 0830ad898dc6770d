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
use crate::model::{Algo, AnyAlgo, Coll};
use crate::units::format_size;
use cudarc::driver::{result, sys, DriverError};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::time::{Duration, Instant};

mod device;
mod launch;
mod layout;
mod open;

pub(crate) use device::device_count;
use device::*;
pub use launch::LaunchShape;
use launch::*;
use layout::*;
pub use layout::{
    ChannelDesc, Conn, KernelArgs, PeerArgs, CHANNEL_DESC_BYTES, KERNEL_ARGS_BYTES, PEER_ARGS_BYTES,
};

// ------------------------------------------------------------ options, results

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Timed iterations per size.
    pub(crate) iters: usize,
    /// Untimed iterations before timing.
    pub(crate) warmup: usize,
    /// Capture the timed iterations in a CUDA graph (nccl-tests -G).
    pub graph: bool,
    /// A collective that takes longer is aborted.
    pub(crate) timeout: Duration,
    /// Run N ranks as N buffers on GPU 0.
    pub(crate) virtual_ranks: Option<usize>,
    /// Use only the first N GPUs (real mode).
    pub(crate) gpus: Option<usize>,
    /// Seed of the input pattern.
    pub(crate) seed: u32,
    /// Also compare on the CPU when one rank's output is at most this many bytes.
    pub(crate) cpu_check_bytes: u64,
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
    pub(crate) const NAMES: &'static str = "wrong-element, hang, oom";

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
pub(crate) struct SizeResult {
    pub(crate) bytes: u64,
    /// Elements per call (per rank for all-gather / reduce-scatter), as nccl-tests prints.
    pub(crate) count: u64,
    pub(crate) n_channels: usize,
    pub(crate) n_threads: usize,
    /// Mean over ranks of the time per iteration, µs.
    pub(crate) time_us: f64,
    /// Per GPU (real mode) or the one GPU (virtual), µs per iteration.
    pub(crate) gpu_time_us: Vec<f64>,
    pub(crate) algbw_gbs: f64,
    pub(crate) busbw_gbs: f64,
    /// Wrong output elements over all ranks.
    pub(crate) wrong: u64,
    /// First wrong element: (rank, index).
    pub(crate) first_wrong: Option<(usize, u64)>,
    /// Whether the CPU also compared the output.
    pub(crate) cpu_checked: bool,
}

/// A whole `planner run`: the plan (at its largest size), the machine, the
/// timing mode and one result per size.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunReport {
    pub(crate) plan: ExecPlan,
    pub(crate) device: DeviceInfo,
    pub(crate) graph: bool,
    pub(crate) iters: usize,
    pub(crate) warmup: usize,
    pub(crate) results: Vec<SizeResult>,
}

/// What the runtime ran on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DeviceInfo {
    pub(crate) gpus: Vec<String>,
    pub(crate) driver_version: String,
    pub(crate) nvrtc_version: String,
    pub(crate) arch: String,
    pub(crate) virtual_ranks: Option<usize>,
}

/// Wrong elements over all ranks, the first one (rank, index), and whether the CPU compared too.
type CheckOutcome = (u64, Option<(usize, u64)>, bool);

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

impl Executor {
    /// How many ranks `open` would give for these options, without allocating.
    pub(crate) fn ranks_available(opts: &RunOptions) -> Result<usize> {
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

    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
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
    pub(crate) fn read_output(&self, plan: &ExecPlan, r: usize) -> Result<Vec<u32>> {
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
    pub(crate) fn run(&self, plan: &ExecPlan, opts: &RunOptions) -> Result<SizeResult> {
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
