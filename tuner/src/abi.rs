//! NCCL's tuner plugin ABI, declared from reading NCCL's headers (no code copied):
//! `src/include/plugin/tuner/tuner_v5.h` (identical apart from whitespace at v2.28.3-1, v2.28.9-1, v2.29.7-1 and
//! v2.30.7-1), `src/include/plugin/tuner/tuner_v6.h` (v2.30.7-1; not in 2.28/2.29), `src/include/nccl_common.h`
//! (log levels, subsystems, `ncclFunc_t`, `ncclDebugLogger_t`) and `src/include/plugin/nccl_tuner.h` (algorithm and
//! protocol indices). Line numbers below are at v2.28.9-1 unless a tag is named.
//!
//! C enums (`ncclResult_t`, `ncclFunc_t`, `ncclDebugLogLevel`) are passed as `int`: every value fits, and GCC/Clang
//! give these enums a 4-byte integer type, which the x86-64 and AArch64 calling conventions pass like `int`.

use std::ffi::{c_char, c_int, c_ulong, c_void};

/// `ncclResult_t`; the plugin only ever returns `ncclSuccess`.
pub type NcclResult = c_int;
/// `ncclSuccess` (`nccl.h`: `ncclSuccess = 0`).
pub const NCCL_SUCCESS: NcclResult = 0;

/// `ncclDebugLogLevel` (`nccl_common.h:17-24`).
pub const NCCL_LOG_NONE: c_int = 0;
pub const NCCL_LOG_VERSION: c_int = 1;
pub const NCCL_LOG_WARN: c_int = 2;
pub const NCCL_LOG_INFO: c_int = 3;
pub const NCCL_LOG_ABORT: c_int = 4;
pub const NCCL_LOG_TRACE: c_int = 5;

/// `ncclDebugLogSubSys` bits used here (`nccl_common.h:26-44`).
pub const NCCL_INIT: c_ulong = 0x1;
pub const NCCL_TUNING: c_ulong = 0x40;
/// `NCCL_ALL = ~0`: NCCL's own `WARN()` passes it (`src/include/debug.h:30`), so a WARN is never filtered by
/// `NCCL_DEBUG_SUBSYS` (`src/debug.cc`, `ncclDebugLog`: dropped when `(flags & ncclDebugMask) == 0`).
pub const NCCL_ALL: c_ulong = !0;

/// `ncclFunc_t` values (`nccl_common.h:59-72`); 0..=4 are tuned (`NCCL_NUM_FUNCTIONS 5`), the rest never reach
/// the tuner in practice. v2.29 added AllGatherV = 11 .. WaitSignal = 14 (`ncclNumFuncs` 11 -> 15).
pub const NCCL_FUNC_BROADCAST: c_int = 0;
pub const NCCL_FUNC_REDUCE: c_int = 1;
pub const NCCL_FUNC_ALL_GATHER: c_int = 2;
pub const NCCL_FUNC_REDUCE_SCATTER: c_int = 3;
pub const NCCL_FUNC_ALL_REDUCE: c_int = 4;
pub const NCCL_FUNC_SEND_RECV: c_int = 5;

/// `NCCL_NUM_ALGORITHMS_V5`, `NCCL_NUM_PROTOCOLS_V5`, `..._HW_LINKS_V5`, `..._COMPCAPS_V5`, `..._TUNING_SCALES_V5`
/// (`tuner_v5.h:18-22`). Indices: `NCCL_ALGO_TREE 0 .. NCCL_ALGO_PAT 6`, `NCCL_PROTO_LL 0, LL128 1, SIMPLE 2`
/// (`nccl_tuner.h:25-39`) = the discriminants of [`crate::plan::Algo`] and [`crate::plan::Proto`].
pub const NUM_ALGORITHMS: usize = 7;
pub const NUM_PROTOCOLS: usize = 3;
pub const NUM_HW_LINKS: usize = 3;
pub const NUM_COMPCAPS: usize = 4;
pub const NUM_TUNING_SCALES: usize = 3;
/// `NCCL_ALGO_PROTO_IGNORE` (`nccl_tuner.h:41`): a cost-table entry NCCL masked.
pub const ALGO_PROTO_IGNORE: f32 = -1.0;

/// `ncclDebugLogger_t` (`nccl_common.h:46`):
/// `void (*)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)`.
/// NCCL passes its `ncclDebugLog`. The plugin always calls it as `(level, flags, file, line, "%s", message)`.
pub type NcclDebugLogger = Option<
    unsafe extern "C" fn(
        level: c_int,
        flags: c_ulong,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    ),
>;

/// `ncclNvlDomainInfo_v5_t` (= `_v6_t`, `tuner_v5.h:12-16`, `tuner_v6.h:16`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NcclNvlDomainInfoV5 {
    pub n_nvl_domains: c_int,
    pub min_ranks_per_nvl_domain: c_int,
    pub max_ranks_per_nvl_domain: c_int,
}

/// `ncclTunerConstants_v5_t` (= `_v6_t`, `tuner_v5.h:24-35`, `tuner_v6.h:15`): the latency and bandwidth-cap tables
/// NCCL's cost model starts from, in/out at `init`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NcclTunerConstantsV5 {
    pub base_latencies: [[f64; NUM_PROTOCOLS]; NUM_ALGORITHMS],
    pub hw_latencies: [[[f64; NUM_PROTOCOLS]; NUM_ALGORITHMS]; NUM_HW_LINKS],
    pub ll_max_bws: [[f64; NUM_TUNING_SCALES]; NUM_COMPCAPS],
    pub per_ch_max_ring_ll128_bws: [[f64; NUM_TUNING_SCALES]; NUM_COMPCAPS],
    pub per_ch_max_tree_ll128_bws: [[f64; NUM_TUNING_SCALES]; NUM_COMPCAPS],
    pub per_ch_max_tree_bws: [[f64; NUM_TUNING_SCALES]; NUM_COMPCAPS],
    pub per_ch_max_nvls_tree_bws: [[f64; NUM_TUNING_SCALES]; NUM_COMPCAPS],
}

/// (21 + 63 + 5 x 12) doubles.
const _: () = assert!(std::mem::size_of::<NcclTunerConstantsV5>() == 144 * 8);
const _: () = assert!(std::mem::size_of::<NcclNvlDomainInfoV5>() == 12);

/// `init` (`tuner_v5.h:53-54`, `tuner_v6.h:34-35`).
pub type InitFn = unsafe extern "C" fn(
    context: *mut *mut c_void,
    comm_id: u64,
    n_ranks: usize,
    n_nodes: usize,
    log_function: NcclDebugLogger,
    nvl_domain_info: *mut NcclNvlDomainInfoV5,
    constants: *mut NcclTunerConstantsV5,
) -> NcclResult;

/// `getCollInfo` (`tuner_v5.h:78-80`, `tuner_v6.h:59-60`). `coll_cost_table` is declared `float**` but NCCL passes
/// a contiguous `float[numAlgo][numProto]` cast to it (`src/enqueue.cc:1916-1928` at v2.28.3-1,
/// `:2137-2148` at v2.30.7-1).
pub type GetCollInfoFn = unsafe extern "C" fn(
    context: *mut c_void,
    coll_type: c_int,
    n_bytes: usize,
    num_pipe_ops: c_int,
    coll_cost_table: *mut *mut f32,
    num_algo: c_int,
    num_proto: c_int,
    reg_buff: c_int,
    n_channels: *mut c_int,
) -> NcclResult;

/// `finalize` (`tuner_v5.h:84`, `tuner_v6.h:64`).
pub type FinalizeFn = unsafe extern "C" fn(context: *mut c_void) -> NcclResult;

/// `getChunkSize` (`tuner_v6.h:79-80`; optional, NCCL 2.30 calls it when non-null, `src/enqueue.cc:2308-2318`).
pub type GetChunkSizeFn = unsafe extern "C" fn(
    context: *mut c_void,
    coll_type: c_int,
    n_bytes: usize,
    algo: c_int,
    proto: c_int,
    n_channels: c_int,
    chunk_size: *mut usize,
) -> NcclResult;

/// `ncclTuner_v5_t` (`tuner_v5.h:38-85`): looked up as `ncclTunerPlugin_v5` by NCCL 2.28 and 2.29 (first) and by
/// 2.30 (after `_v6`).
#[repr(C)]
#[derive(Debug)]
pub struct NcclTunerV5 {
    pub name: *const c_char,
    pub init: Option<InitFn>,
    pub get_coll_info: Option<GetCollInfoFn>,
    pub finalize: Option<FinalizeFn>,
}

/// `ncclTuner_v6_t` (`tuner_v6.h:19-81` at v2.30.7-1): v5 plus `getChunkSize`.
#[repr(C)]
#[derive(Debug)]
pub struct NcclTunerV6 {
    pub name: *const c_char,
    pub init: Option<InitFn>,
    pub get_coll_info: Option<GetCollInfoFn>,
    pub finalize: Option<FinalizeFn>,
    pub get_chunk_size: Option<GetChunkSizeFn>,
}

// SAFETY: the only raw pointer is `name`, which points at a 'static C string literal that nothing writes; the rest
// are function pointers. Sharing the exported tables between threads is therefore sound.
unsafe impl Sync for NcclTunerV5 {}
// SAFETY: as for NcclTunerV5.
unsafe impl Sync for NcclTunerV6 {}
