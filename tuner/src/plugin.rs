//! The C entry points NCCL calls, and the exported plugin tables `ncclTunerPlugin_v5` and `ncclTunerPlugin_v6`.
//!
//! Every entry point returns `ncclSuccess`: NCCL wraps `init` and `getCollInfo` in `NCCLCHECK`, so any other value
//! fails the communicator or the collective (`src/init.cc:1309`, `src/enqueue.cc:1925` at v2.28.3-1) although the
//! header comment promises a fallback. Every entry point catches panics, so none unwinds into NCCL.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use crate::abi::{
    NcclDebugLogger, NcclNvlDomainInfoV5, NcclResult, NcclTunerConstantsV5, NcclTunerV5,
    NcclTunerV6, NCCL_SUCCESS,
};
use crate::context::{decode_nccl_version_code, InitSettings, TunerContext};

/// The plugin's name as NCCL logs it ("TUNER/Plugin: Using planner (v5)").
pub const PLUGIN_NAME: &CStr = c"planner";

/// Looked up by NCCL 2.28 and 2.29 (`src/plugin/tuner/tuner_v5.cc:15` at v2.28.3-1), and by 2.30 when `_v6` is
/// missing.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static ncclTunerPlugin_v5: NcclTunerV5 = NcclTunerV5 {
    name: PLUGIN_NAME.as_ptr(),
    init: Some(tuner_init),
    get_coll_info: Some(tuner_get_coll_info),
    finalize: Some(tuner_finalize),
};

/// Looked up first by NCCL 2.30 (`src/plugin/tuner.cc:73` at v2.30.7-1).
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static ncclTunerPlugin_v6: NcclTunerV6 = NcclTunerV6 {
    name: PLUGIN_NAME.as_ptr(),
    init: Some(tuner_init),
    get_coll_info: Some(tuner_get_coll_info),
    finalize: Some(tuner_finalize),
    get_chunk_size: Some(tuner_get_chunk_size),
};

/// Stores a new context in `*context` (null first, so a panic leaves NCCL a null context that every other entry
/// point treats as "no plan"). `commId`, `nvlDomainInfo` and `constants` are not used: the plugin writes none of
/// NCCL's constants.
unsafe extern "C" fn tuner_init(
    context: *mut *mut c_void,
    _comm_id: u64,
    n_ranks: usize,
    n_nodes: usize,
    log_function: NcclDebugLogger,
    _nvl_domain_info: *mut NcclNvlDomainInfoV5,
    _constants: *mut NcclTunerConstantsV5,
) -> NcclResult {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let settings = InitSettings::from_environment(log_function);
        // SAFETY: NCCL passes `&comm->tunerContext` (`src/init.cc:1309` at v2.28.3-1), valid for a write.
        unsafe { store_context(context, n_ranks, n_nodes, log_function, &settings) };
    }));
    NCCL_SUCCESS
}

/// # Safety
/// `context` null or valid for a write of a pointer.
unsafe fn store_context(
    context: *mut *mut c_void,
    n_ranks: usize,
    n_nodes: usize,
    log_function: NcclDebugLogger,
    settings: &InitSettings,
) {
    if context.is_null() {
        return;
    }
    // SAFETY: non-null and valid for writes by the caller's guarantee.
    unsafe { context.write(std::ptr::null_mut()) };
    let tuner = Box::new(TunerContext::new(n_ranks, n_nodes, log_function, settings));
    // SAFETY: as above; ownership of the box passes to NCCL until `finalize`.
    unsafe { context.write(Box::into_raw(tuner).cast()) };
}

unsafe extern "C" fn tuner_get_coll_info(
    context: *mut c_void,
    coll_type: c_int,
    n_bytes: usize,
    _num_pipe_ops: c_int,
    coll_cost_table: *mut *mut f32,
    num_algo: c_int,
    num_proto: c_int,
    _reg_buff: c_int,
    n_channels: *mut c_int,
) -> NcclResult {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if context.is_null() {
            return;
        }
        // SAFETY: a non-null context is the box `init` stored, alive until `finalize` (NCCL never calls
        // getCollInfo after finalize); the context is immutable, so shared use from many threads is sound.
        let tuner = unsafe { &*context.cast::<TunerContext>() };
        // SAFETY: NCCL passes its contiguous `float[numAlgo][numProto]` cost table cast to `float**`
        // (`src/enqueue.cc:1916-1928` at v2.28.3-1) and `&nMaxChannels`; get_coll_info checks both for null.
        unsafe {
            tuner.get_coll_info(
                coll_type,
                n_bytes,
                coll_cost_table.cast::<f32>(),
                num_algo,
                num_proto,
                n_channels,
            )
        };
    }));
    NCCL_SUCCESS
}

unsafe extern "C" fn tuner_finalize(context: *mut c_void) -> NcclResult {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if context.is_null() {
            return;
        }
        // SAFETY: a non-null context is the box `init` created with Box::into_raw; NCCL finalizes it once.
        drop(unsafe { Box::from_raw(context.cast::<TunerContext>()) });
    }));
    NCCL_SUCCESS
}

/// v6 `getChunkSize`: leaves NCCL's chunk size as it is.
unsafe extern "C" fn tuner_get_chunk_size(
    _context: *mut c_void,
    _coll_type: c_int,
    _n_bytes: usize,
    _algo: c_int,
    _proto: c_int,
    _n_channels: c_int,
    _chunk_size: *mut usize,
) -> NcclResult {
    NCCL_SUCCESS
}

/// Test and debugging hook (not called by NCCL): `init` with the plan path, NCCL version and decision logging
/// given instead of read from the environment, so tests can drive the built library without touching the
/// process-global `PLANNER_TUNER_PLAN`. `plan_path` null = variable not set; `nccl_version_code` as
/// `ncclGetVersion` returns it, <= 0 = cannot tell; `log_decisions` non-zero = log one line per decision.
///
/// # Safety
/// `context` null or valid for a write of a pointer; `plan_path` null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn planner_tuner_init_with_plan(
    context: *mut *mut c_void,
    n_ranks: usize,
    n_nodes: usize,
    log_function: NcclDebugLogger,
    plan_path: *const c_char,
    nccl_version_code: c_int,
    log_decisions: c_int,
) -> NcclResult {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let plan_path = if plan_path.is_null() {
            None
        } else {
            // SAFETY: non-null and NUL-terminated by the caller's guarantee.
            let bytes = unsafe { CStr::from_ptr(plan_path) }.to_bytes();
            Some(path_from_bytes(bytes))
        };
        let settings = InitSettings {
            plan_path,
            nccl_version: decode_nccl_version_code(nccl_version_code),
            log_decisions: log_decisions != 0,
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { store_context(context, n_ranks, n_nodes, log_function, &settings) };
    }));
    NCCL_SUCCESS
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}
