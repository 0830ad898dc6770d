//! Launches: the launch shape, the per-GPU launcher, modules, events,
//! and the timed launch of every GPU with its wait and abort.

use super::*;

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
    pub(crate) const NCCL_CLUSTER: u32 = 4;

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

    pub(super) fn attributes(&self) -> Vec<sys::CUlaunchAttribute> {
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
pub(super) struct CollectiveLauncher {
    /// The GPU as messages name it.
    pub(super) label: String,
    pub(super) ctx: Sendable<sys::CUcontext>,
    pub(super) stream: Sendable<sys::CUstream>,
    pub(super) function: Sendable<sys::CUfunction>,
    pub(super) ctas: usize,
    pub(super) threads: usize,
    pub(super) shape: LaunchShape,
}

impl CollectiveLauncher {
    /// Make the GPU's context current on this thread.
    pub(super) fn bind(&self) -> Result<()> {
        // SAFETY: the executor's retained primary context, alive while it is.
        unsafe { result::ctx::set_current(self.ctx.0) }.on_gpu(&self.label, "cuCtxSetCurrent")
    }

    /// Enqueue one collective (`plan` names it in an error).
    pub(super) fn launch(&self, args: &LaunchArgs, plan: &ExecPlan) -> Result<()> {
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
pub(super) fn env_u32(name: &str, range: std::ops::RangeInclusive<u32>) -> Result<Option<u32>> {
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

pub(super) struct Module {
    pub(super) module: sys::CUmodule,
    pub(super) collective: sys::CUfunction,
    pub(super) fill: sys::CUfunction,
    pub(super) check: sys::CUfunction,
}

pub(super) struct Event(pub(super) sys::CUevent);

impl Event {
    pub(super) fn new(gpu: &Gpu) -> Result<Event> {
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

impl Executor {
    /// How GPU `g` launches `plan`'s collective.
    pub(super) fn launcher(&self, g: usize, plan: &ExecPlan) -> Result<CollectiveLauncher> {
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
    pub(super) fn launch_all(
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
    pub(super) fn wait(
        &self,
        events: &[sys::CUevent],
        plan: &ExecPlan,
        timeout: Duration,
    ) -> Result<()> {
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
            plan.algorithm.name(),
            plan.protocol.nccl_name(),
            format_size(plan.bytes),
            timeout.as_secs_f64(),
            stuck.join(", "),
            variant.name()
        )))
    }
}

pub(super) fn load_module(gpu: &Gpu, image: &[u8]) -> Result<Module> {
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
