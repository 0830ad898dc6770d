//! Checks that the CUDA driver and NVRTC libraries can be loaded, and carry
//! the symbols we call, before cudarc touches them: with `dynamic-loading`,
//! cudarc panics on a missing library or symbol instead of returning an error.

use crate::error::{Error, Result};

/// Driver symbols the runtime calls (names as cudarc's `cuda-13000` build loads them).
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceCanAccessPeer",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxSetFlags_v2",
    "cuCtxSetCurrent",
    "cuCtxEnablePeerAccess",
    "cuCtxSynchronize",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemGetInfo_v2",
    "cuMemsetD8_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyAsync",
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuLaunchKernel",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventElapsedTime_v2",
    "cuEventDestroy_v2",
];

/// NVRTC symbols the compiler calls.
const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
];

/// Open the first library cudarc would open for `name` and check `symbols`.
/// Ok(path) names the library; Err says what is missing.
fn check_library(name: &str, symbols: &[&str]) -> std::result::Result<String, String> {
    let candidates = cudarc::get_lib_name_candidates(name);
    for candidate in &candidates {
        // SAFETY: loading a shared library runs its initialisers; these are the
        // same NVIDIA libraries cudarc itself would load in this process.
        let lib = match unsafe { libloading::Library::new(candidate) } {
            Ok(lib) => lib,
            Err(_) => continue,
        };
        let missing: Vec<&str> = symbols
            .iter()
            .copied()
            .filter(|s| {
                // SAFETY: we only look the symbol up and never call it here.
                unsafe { lib.get::<*const ()>(s.as_bytes()) }.is_err()
            })
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{candidate} lacks {} (too old?)",
                missing.join(", ")
            ));
        }
        return Ok(candidate.clone());
    }
    Err(format!(
        "no lib{name} found (looked for {} on the loader path)",
        candidates
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The CUDA driver library is there and complete; otherwise a runtime error
/// naming what is missing ("no GPU driver").
pub fn require_driver() -> Result<()> {
    check_library("cuda", DRIVER_SYMBOLS)
        .map(|_| ())
        .map_err(|why| Error::runtime(format!("no usable CUDA driver: {why}")))
}

/// NVRTC is there and complete.
pub fn require_nvrtc() -> Result<()> {
    check_library("nvrtc", NVRTC_SYMBOLS).map(|_| ()).map_err(|why| {
        Error::runtime(format!(
            "NVRTC (the CUDA run-time compiler) is not usable: {why}; put libnvrtc.so.13 on LD_LIBRARY_PATH"
        ))
    })
}

/// Whether NVRTC can be used (for tests that skip without it).
pub fn nvrtc_available() -> bool {
    check_library("nvrtc", NVRTC_SYMBOLS).is_ok()
}
