//! `Executor::open`: GPUs, kernel, connections and buffers of one plan shape,
//! one phase per function.

use super::*;

/// The bytes `open` lays out for one plan shape.
struct Sizes {
    /// One FIFO (`buff_bytes` of the protocol).
    fifo: usize,
    /// Per GPU: FIFOs, heads and tails of its connections.
    conn: Vec<usize>,
    send: usize,
    recv: usize,
    /// Per rank, for the kernels beyond NCCL (0 for Ring and Tree).
    peer_area: usize,
}

/// Connection memory per GPU and where each connection's pieces live in it.
struct Connections {
    mem: Vec<DeviceBuffer>,
    edges: HashMap<(usize, usize, usize), Edge>,
}

/// Per rank: (send, recv) pointers, and the allocations behind them.
struct RankBuffers {
    pointers: Vec<(u64, u64)>,
    mem: Vec<DeviceBuffer>,
}

impl Executor {
    /// Open the GPUs, compile the kernel, set up the connections and buffers
    /// for `template` (the largest size and channel count any later `run`
    /// uses; later plans may have fewer channels and smaller sizes).
    pub(crate) fn open(template: &ExecPlan, opts: &RunOptions) -> Result<Executor> {
        let n_ranks = template.n_ranks;
        let gpus = open_gpus(template, opts)?;
        let info = device_info(&gpus, opts)?;
        let edges_list = plan_edges(template);
        let beyond = template.algorithm.is_beyond_nccl();
        if opts.virtual_ranks.is_none() {
            enable_peers(&gpus, &edges_list, beyond.then_some(n_ranks))?;
        }
        let modules = compile_modules(template, opts, &info.arch, &gpus)?;
        let ctas_per_gpu = check_residency(template, opts, &gpus, &modules)?;
        let sizes = Sizes::of(template, opts, gpus.len(), &edges_list);
        check_memory(template, opts, &gpus, &sizes)?;
        // Fault injection `oom`: hold every chunk of at least 1 MiB the driver gives on GPU 0
        // (freed when `open` returns), so the allocations below meet a full GPU.
        let hoard = if opts.fault == Some(Fault::Oom) {
            hoard_memory(&gpus[0])
        } else {
            Vec::new()
        };
        let connections = alloc_connections(&gpus, opts, &edges_list, &sizes)?;
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
        let buffers = alloc_buffers(template, opts, &gpus, &sizes)?;
        let (peer_areas, peer_mem) = if beyond {
            alloc_peer_areas(n_ranks, opts, &gpus, sizes.peer_area)?
        } else {
            (Vec::new(), Vec::new())
        };
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
            conn_mem: connections.mem,
            status_mem,
            edges: connections.edges,
            buffers: buffers.pointers,
            _buffer_mem: buffers.mem,
            desc_mem,
            peer_areas,
            peer_mem,
            template: template.clone(),
            info,
            poisoned: std::cell::Cell::new(false),
        })
    }
}

/// The GPUs the plan's ranks run on: one per rank, or one for virtual ranks.
fn open_gpus(template: &ExecPlan, opts: &RunOptions) -> Result<Vec<Gpu>> {
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
    (0..n_gpus).map(open_gpu).collect()
}

/// Driver, NVRTC and architecture; every GPU must have the same compute capability.
fn device_info(gpus: &[Gpu], opts: &RunOptions) -> Result<DeviceInfo> {
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
    Ok(DeviceInfo {
        gpus: gpus.iter().map(|g| g.label()).collect(),
        driver_version: format!("{}.{}", driver / 1000, (driver % 1000) / 10),
        nvrtc_version: format!("{nv_major}.{nv_minor}"),
        arch: nvrtc::arch_of(cc),
        virtual_ranks: opts.virtual_ranks,
    })
}

/// Peer access between every pair that talks (the kernels beyond NCCL, with
/// `all_of` ranks: every pair; it maps all of each GPU's allocations, user
/// buffers too).
fn enable_peers(
    gpus: &[Gpu],
    edges_list: &[(usize, usize, usize)],
    all_of: Option<usize>,
) -> Result<()> {
    let mut pairs: Vec<(usize, usize)> = edges_list
        .iter()
        .flat_map(|&(_, a, b)| [(a, b), (b, a)])
        .filter(|(a, b)| a != b)
        .collect();
    if let Some(n_ranks) = all_of {
        for a in 0..n_ranks {
            pairs.extend((0..n_ranks).filter(|&b| b != a).map(|b| (a, b)));
        }
    }
    pairs.sort();
    pairs.dedup();
    for (a, b) in pairs {
        enable_peer(&gpus[a], &gpus[b])?;
    }
    Ok(())
}

/// The plan's kernel variant, compiled once and loaded on every GPU.
fn compile_modules(
    template: &ExecPlan,
    opts: &RunOptions,
    arch: &str,
    gpus: &[Gpu],
) -> Result<Vec<Module>> {
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
    let cubin = kernels::compile_with(&variant, arch, extra)?;
    gpus.iter()
        .map(|gpu| load_module(gpu, &cubin.image))
        .collect()
}

/// Co-residency: every CTA of a launch must be on the GPU at once. Returns
/// the CTAs per GPU.
fn check_residency(
    template: &ExecPlan,
    opts: &RunOptions,
    gpus: &[Gpu],
    modules: &[Module],
) -> Result<usize> {
    let ctas_per_gpu = match opts.virtual_ranks {
        Some(v) => v * template.n_channels,
        None => template.n_channels,
    };
    for (gpu, m) in gpus.iter().zip(modules) {
        gpu.bind()?;
        // SAFETY: valid function handle.
        let per_sm = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                m.collective,
                template.n_threads as i32,
                0,
            )
        }
        .on_gpu(gpu, "cuOccupancyMaxActiveBlocksPerMultiprocessor")? as usize;
        if per_sm * gpu.sm_count < ctas_per_gpu {
            return Err(Error::bad_input(format!(
                "{ctas_per_gpu} CTAs of {} threads cannot all be resident on {} ({} SMs x {per_sm}); use fewer --channels or --virtual-ranks",
                template.n_threads,
                gpu.label(),
                gpu.sm_count
            )));
        }
    }
    Ok(ctas_per_gpu)
}

impl Sizes {
    fn of(
        template: &ExecPlan,
        opts: &RunOptions,
        n_gpus: usize,
        edges_list: &[(usize, usize, usize)],
    ) -> Sizes {
        let fifo = buff_bytes(template.protocol);
        let mut conn = vec![0usize; n_gpus];
        for &(_, from, to) in edges_list {
            conn[gpu_of(opts.virtual_ranks, to)] += fifo + 256;
            conn[gpu_of(opts.virtual_ranks, from)] += 256;
        }
        let elem = template.dtype.size() as usize;
        let peer_area = template.algorithm.own().map_or(0, |own| {
            crate::exec::beyond::peer_area_bytes(
                own,
                template.n_ranks,
                template.n_channels,
                template.n_threads,
            )
        });
        Sizes {
            fifo,
            conn,
            send: template.send_count() * elem,
            recv: template.recv_count() * elem,
            peer_area,
        }
    }
}

/// Memory: connections plus buffers must fit on every GPU.
fn check_memory(template: &ExecPlan, opts: &RunOptions, gpus: &[Gpu], sizes: &Sizes) -> Result<()> {
    let per_rank_bytes = if template.in_place {
        sizes.send.max(sizes.recv)
    } else {
        sizes.send + sizes.recv
    } + 512;
    let mut need = sizes.conn.clone();
    for r in 0..template.n_ranks {
        need[gpu_of(opts.virtual_ranks, r)] += per_rank_bytes + sizes.peer_area;
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
    Ok(())
}

/// Fault injection `oom`: every chunk of at least 1 MiB the driver gives on `gpu`.
fn hoard_memory(gpu: &Gpu) -> Vec<DeviceBuffer> {
    let mut hoard: Vec<DeviceBuffer> = Vec::new();
    let mut chunk: usize = 1 << 30;
    while chunk >= 1 << 20 {
        match gpu.alloc(chunk, "fault injection: filling the GPU") {
            Ok(buffer) => hoard.push(buffer),
            Err(_) => chunk /= 2,
        }
    }
    let held: u64 = hoard.iter().map(|b| b.bytes() as u64).sum();
    eprintln!(
        "planner: fault injection: holding {} of {} before the executor allocates",
        format_size(held),
        gpu.label()
    );
    hoard
}

/// Connection memory, laid out per GPU: the FIFO and tail on the receiver,
/// the head on the sender.
fn alloc_connections(
    gpus: &[Gpu],
    opts: &RunOptions,
    edges_list: &[(usize, usize, usize)],
    sizes: &Sizes,
) -> Result<Connections> {
    let fifo_bytes = sizes.fifo;
    let mut mem = Vec::new();
    for (g, gpu) in gpus.iter().enumerate() {
        let m = gpu.alloc(sizes.conn[g], "FIFOs")?;
        m.zero(gpu)?;
        mem.push(m);
    }
    let mut cursor: Vec<u64> = mem.iter().map(|m| m.ptr()).collect();
    let mut edges = HashMap::new();
    for &(c, from, to) in edges_list {
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
    Ok(Connections { mem, edges })
}

/// Buffers, per rank: one in place, or an input and an output.
fn alloc_buffers(
    template: &ExecPlan,
    opts: &RunOptions,
    gpus: &[Gpu],
    sizes: &Sizes,
) -> Result<RankBuffers> {
    let mut mem = Vec::new();
    let mut pointers = Vec::new();
    for r in 0..template.n_ranks {
        let gpu = &gpus[gpu_of(opts.virtual_ranks, r)];
        let (send, recv) = if template.in_place {
            let m = gpu.alloc(sizes.send.max(sizes.recv), "the in-place buffer")?;
            let p = m.ptr();
            mem.push(m);
            (p, p)
        } else {
            let s = gpu.alloc(sizes.send, "the input buffer")?;
            let d = gpu.alloc(sizes.recv, "the output buffer")?;
            let p = (s.ptr(), d.ptr());
            mem.push(s);
            mem.push(d);
            p
        };
        pointers.push((send, recv));
    }
    Ok(RankBuffers { pointers, mem })
}

/// Peer areas of the kernels beyond NCCL, zeroed: counters start at 0, and no
/// flag of a zeroed inbox or flag word matches a round or call.
fn alloc_peer_areas(
    n_ranks: usize,
    opts: &RunOptions,
    gpus: &[Gpu],
    bytes: usize,
) -> Result<(Vec<u64>, Vec<DeviceBuffer>)> {
    let mut peer_mem = Vec::new();
    let mut peer_areas = Vec::new();
    for r in 0..n_ranks {
        let gpu = &gpus[gpu_of(opts.virtual_ranks, r)];
        let m = gpu.alloc(bytes, "the peer area (flags and LL inbox)")?;
        m.zero(gpu)?;
        peer_areas.push(m.ptr());
        peer_mem.push(m);
    }
    Ok((peer_areas, peer_mem))
}
