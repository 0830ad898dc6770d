//! The CUDA sources in `kernels/` and their compilation with NVRTC to CUBIN
//! for the GPU's own architecture (sm_90 on H100/H200). CUBIN, not PTX: a PTX
//! from a newer NVRTC than the driver is refused (rust-crates.md §2.4).
//!
//! The sources are built into the binary; `PLANNER_KERNEL_DIR` points at a
//! directory with edited copies to use instead (no rebuild needed), and
//! `PLANNER_NVRTC_OPTS` adds compiler options.

use crate::error::{Error, Result};
use crate::exec::cuda;
use crate::exec::plan::{coll_name, kernel_algo_id, kernel_coll_id};
use crate::measure::Dtype;
use crate::model::{Algo, Coll, Proto};
use std::ffi::CString;

const COMMON: &str = include_str!("../../kernels/common.cuh");
const PROTO_SIMPLE: &str = include_str!("../../kernels/proto_simple.cuh");
const PROTO_LL: &str = include_str!("../../kernels/proto_ll.cuh");
const PROTO_LL128: &str = include_str!("../../kernels/proto_ll128.cuh");
const COLLECTIVES: &str = include_str!("../../kernels/collectives.cu");
const CHECK: &str = include_str!("../../kernels/check.cu");

/// The files, in the order they are concatenated.
pub const SOURCE_FILES: &[(&str, &str)] = &[
    ("common.cuh", COMMON),
    ("proto_simple.cuh", PROTO_SIMPLE),
    ("proto_ll.cuh", PROTO_LL),
    ("proto_ll128.cuh", PROTO_LL128),
    ("collectives.cu", COLLECTIVES),
    ("check.cu", CHECK),
];

/// One kernel variant: a module holding `planner_collective`, `planner_fill`
/// and `planner_check` for one (collective, algorithm, protocol, type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    pub collective: Coll,
    pub algorithm: Algo,
    pub protocol: Proto,
    pub dtype: Dtype,
}

impl Variant {
    pub fn name(&self) -> String {
        format!(
            "{}_{}_{}_{}",
            coll_name(self.collective),
            self.algorithm.nccl_name(),
            self.protocol.nccl_name(),
            self.dtype.nccl_tests_name()
        )
    }

    /// Every variant the executor can run (all-reduce with every pair; the
    /// other collectives Ring/Simple), each type.
    pub fn all() -> Vec<Variant> {
        let mut out = Vec::new();
        for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
            for algorithm in [Algo::Ring, Algo::Tree] {
                for protocol in [Proto::Ll, Proto::Ll128, Proto::Simple] {
                    out.push(Variant {
                        collective: Coll::AllReduce,
                        algorithm,
                        protocol,
                        dtype,
                    });
                }
            }
            for collective in [Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast] {
                out.push(Variant {
                    collective,
                    algorithm: Algo::Ring,
                    protocol: Proto::Simple,
                    dtype,
                });
            }
        }
        out
    }
}

fn read_sources() -> Result<Vec<(String, String)>> {
    match std::env::var("PLANNER_KERNEL_DIR") {
        Ok(dir) if !dir.is_empty() => SOURCE_FILES
            .iter()
            .map(|(name, _)| {
                let path = std::path::Path::new(&dir).join(name);
                std::fs::read_to_string(&path)
                    .map(|text| (name.to_string(), text))
                    .map_err(|e| {
                        Error::bad_input(format!(
                            "PLANNER_KERNEL_DIR: cannot read {}: {e}",
                            path.display()
                        ))
                    })
            })
            .collect(),
        _ => Ok(SOURCE_FILES
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()),
    }
}

/// The full source of one variant: its defines, then every file.
pub fn source(variant: &Variant) -> Result<String> {
    let unsupported = || Error::runtime(format!("the executor has no kernel {}", variant.name()));
    let coll = kernel_coll_id(variant.collective).ok_or_else(unsupported)?;
    let algo = kernel_algo_id(variant.algorithm).ok_or_else(unsupported)?;
    let mut text = format!(
        "// variant {}\n#define PLANNER_T {}\n#define PLANNER_DTYPE_BF16 {}\n#define PLANNER_COLL {coll}\n#define PLANNER_ALGO {algo}\n#define PLANNER_PROTO {}\n",
        variant.name(),
        variant.dtype.c_type(),
        u8::from(variant.dtype == Dtype::Bf16),
        variant.protocol as usize,
    );
    for (name, body) in read_sources()? {
        text.push_str(&format!("// ---- {name}\n#line 1 \"{name}\"\n"));
        text.push_str(&body);
        text.push('\n');
    }
    Ok(text)
}

/// A compiled module image and the compiler's messages.
#[derive(Debug, Clone)]
pub struct Cubin {
    pub image: Vec<u8>,
    pub log: String,
    pub arch: String,
}

/// NVRTC's version as (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    cuda::require_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: require_nvrtc checked the library and the symbol; the pointers are valid.
    let rc = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    rc.result()
        .map_err(|e| Error::runtime(format!("nvrtcVersion failed: {e:?}")))?;
    Ok((major, minor))
}

/// Compile one variant to CUBIN for `arch` (e.g. "sm_90"). On a compile error
/// the message carries NVRTC's log.
pub fn compile(variant: &Variant, arch: &str) -> Result<Cubin> {
    compile_with(variant, arch, &[])
}

/// `compile` with extra NVRTC options (e.g. "--ptxas-options=--verbose").
pub fn compile_with(variant: &Variant, arch: &str, extra: &[&str]) -> Result<Cubin> {
    cuda::require_nvrtc()?;
    let text = source(variant)?;
    let src =
        CString::new(text).map_err(|_| Error::runtime("kernel source contains a NUL byte"))?;
    let name = CString::new(format!("{}.cu", variant.name())).expect("no NUL in variant name");
    let prog = cudarc::nvrtc::result::create_program(&src, Some(&name))
        .map_err(|e| Error::runtime(format!("nvrtcCreateProgram failed: {e:?}")))?;
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
    ];
    options.extend(extra.iter().map(|s| s.to_string()));
    // Extra options for investigations, e.g. "--ptxas-options=--verbose".
    if let Ok(env_opts) = std::env::var("PLANNER_NVRTC_OPTS") {
        options.extend(env_opts.split_whitespace().map(str::to_string));
    }
    // SAFETY: `prog` was just created and is destroyed exactly once below.
    let compiled = unsafe { cudarc::nvrtc::result::compile_program(prog, &options) };
    // SAFETY: as above.
    let log = unsafe { cudarc::nvrtc::result::get_program_log(prog) }
        .map(|chars| {
            let bytes: Vec<u8> = chars
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    let result = match compiled {
        Err(e) => Err(Error::runtime(format!(
            "kernel {} failed to compile for {arch} ({e:?}); NVRTC log:\n{}",
            variant.name(),
            log.trim_end()
        ))),
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: prog compiled successfully; size is a valid out-pointer.
            let rc = unsafe { cudarc::nvrtc::sys::nvrtcGetCUBINSize(prog, &mut size) };
            rc.result()
                .map_err(|e| Error::runtime(format!("nvrtcGetCUBINSize failed: {e:?}")))
                .and_then(|()| {
                    let mut image = vec![0u8; size];
                    // SAFETY: `image` has exactly the size NVRTC reported.
                    let rc = unsafe {
                        cudarc::nvrtc::sys::nvrtcGetCUBIN(prog, image.as_mut_ptr() as *mut _)
                    };
                    rc.result()
                        .map_err(|e| Error::runtime(format!("nvrtcGetCUBIN failed: {e:?}")))
                        .map(|()| Cubin {
                            image,
                            log: log.clone(),
                            arch: arch.to_string(),
                        })
                })
        }
    };
    // SAFETY: prog is valid and not used after this.
    let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
    result
}
