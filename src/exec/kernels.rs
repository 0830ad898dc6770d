//! The executor's kernel variants: one module per (collective, algorithm,
//! protocol, type) holding `planner_collective` and the data kernels
//! `planner_fill` and `planner_check` (`kernels/pattern.cu`), compiled by the
//! one NVRTC path to CUBIN (`crate::gpu::nvrtc`).

use crate::error::{Error, Result};
use crate::exec::plan::{coll_name, kernel_algo_id, kernel_coll_id};
use crate::gpu::nvrtc::{self, Cubin};
use crate::gpu::pattern::dtype_defines;
use crate::measure::Dtype;
use crate::model::{Algo, Coll, Proto};

/// The files of an all-reduce variant beyond NCCL (OneShot, TwoShot): their
/// own kernel (`planner_collective` taking `PeerArgs`) instead of the ring
/// and tree collectives.
pub const BEYOND_FILES: &[&str] = &["types.cuh", "common.cuh", "beyond.cu", "pattern.cu"];

/// The files of a variant, in the order they are concatenated.
pub const VARIANT_FILES: &[&str] = &[
    "types.cuh",
    "common.cuh",
    "proto_simple.cuh",
    "proto_ll.cuh",
    "proto_ll128.cuh",
    "collectives.cu",
    "pattern.cu",
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

    /// Every variant the executor can run (all-reduce with every pair, and
    /// the pairs beyond NCCL; the other collectives Ring/Simple), each type.
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
            for pair in crate::model::beyond::pairs() {
                out.push(Variant {
                    collective: Coll::AllReduce,
                    algorithm: pair.algo,
                    protocol: pair.proto,
                    dtype,
                });
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

/// The full source of one variant: its defines, then every file.
pub fn source(variant: &Variant) -> Result<String> {
    let unsupported = || Error::runtime(format!("the executor has no kernel {}", variant.name()));
    let coll = kernel_coll_id(variant.collective).ok_or_else(unsupported)?;
    let algo = kernel_algo_id(variant.algorithm).ok_or_else(unsupported)?;
    if variant.algorithm.is_beyond_nccl()
        && (variant.collective != Coll::AllReduce
            || crate::exec::beyond::kernel_algo_id(variant.algorithm, variant.protocol).is_none())
    {
        return Err(unsupported());
    }
    let mut defines = dtype_defines(variant.dtype);
    defines.extend([
        ("PLANNER_COLL", coll.to_string()),
        ("PLANNER_ALGO", algo.to_string()),
        ("PLANNER_PROTO", (variant.protocol as usize).to_string()),
    ]);
    let files = if variant.algorithm.is_beyond_nccl() {
        BEYOND_FILES
    } else {
        VARIANT_FILES
    };
    nvrtc::program_source(&format!("variant {}", variant.name()), &defines, files)
}

/// Compile one variant to CUBIN for `arch` (e.g. "sm_90"). On a compile error
/// the message carries NVRTC's log.
pub fn compile(variant: &Variant, arch: &str) -> Result<Cubin> {
    compile_with(variant, arch, &[])
}

/// `compile` with extra NVRTC options (e.g. "--ptxas-options=--verbose").
pub fn compile_with(variant: &Variant, arch: &str, extra: &[&str]) -> Result<Cubin> {
    nvrtc::compile(&variant.name(), &source(variant)?, arch, extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_beyond_nccl_is_its_own_kernel() {
        let v = Variant {
            collective: Coll::AllReduce,
            algorithm: Algo::TwoShot,
            protocol: Proto::Simple,
            dtype: Dtype::Bf16,
        };
        assert_eq!(v.name(), "all_reduce_TwoShot_Simple_bfloat16");
        let text = source(&v).unwrap();
        assert!(text.contains("#define PLANNER_ALGO 3\n"));
        assert!(text.contains("#line 1 \"beyond.cu\""));
        assert!(!text.contains("#line 1 \"collectives.cu\""));
        // A OneShot variant with another protocol does not exist.
        let bad = Variant {
            protocol: Proto::Simple,
            algorithm: Algo::OneShot,
            ..v
        };
        assert!(!Variant::all().contains(&bad));
        assert!(source(&bad).is_err());
    }

    #[test]
    fn every_file_of_a_variant_is_a_kernel_source() {
        for file in VARIANT_FILES.iter().chain(BEYOND_FILES) {
            assert!(
                nvrtc::SOURCE_FILES.iter().any(|(name, _)| name == file),
                "{file}"
            );
        }
        let v = Variant {
            collective: Coll::ReduceScatter,
            algorithm: Algo::Ring,
            protocol: Proto::Simple,
            dtype: Dtype::F16,
        };
        let text = source(&v).unwrap();
        for define in [
            "#define PLANNER_T planner_f16\n",
            "#define PLANNER_DTYPE_BF16 0\n",
            "#define PLANNER_COLL 2\n",
            "#define PLANNER_ALGO 0\n",
            "#define PLANNER_PROTO 2\n",
        ] {
            assert!(text.contains(define), "{define} missing");
        }
        // The element types come before the code that uses them.
        assert!(text.find("#line 1 \"types.cuh\"") < text.find("#line 1 \"common.cuh\""));
    }
}
