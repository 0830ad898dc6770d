//! The executor's kernel registry (as NCCL's `src/device/generate.py` keeps one list of variants): every
//! kernel algorithm with its `PLANNER_ALGO` value, the define that names it and its source files
//! (`KERNEL_ALGOS`), and the (collectives, algorithm, protocols) built from them (`VARIANT_ROWS`). The ids,
//! the variant list and the `#define`s all come from here; the kernels compare `PLANNER_ALGO`,
//! `PLANNER_COLL` and `PLANNER_PROTO` only against the named values this file defines
//! (`PLANNER_ALGO_RING`, `PLANNER_COLL_ALL_REDUCE`, `PLANNER_PROTO_LL`...). One module per (collective,
//! algorithm, protocol, type) holds `planner_collective` and the data kernels `planner_fill` and
//! `planner_check` (`kernels/pattern.cu`), compiled by the one NVRTC path to CUBIN (`crate::gpu::nvrtc`).

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::exec::plan::{coll_name, kernel_coll_id};
use crate::gpu::nvrtc::{self, Cubin, SourceFile};
use crate::gpu::pattern::dtype_defines;
use crate::model::{Algo, AnyAlgo, Coll, OwnAlgo, Proto};

/// One algorithm the executor has a kernel for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KernelAlgo {
    pub(crate) algorithm: AnyAlgo,
    /// `PLANNER_ALGO` of its variants.
    pub(crate) id: i32,
    /// The define that names `id` in the kernels (`#if PLANNER_ALGO == PLANNER_ALGO_RING`).
    pub(crate) define: &'static str,
    /// Its source files, in the order they are concatenated.
    pub(crate) files: &'static [SourceFile],
}

/// The files of a variant of NCCL's algorithms (Ring, Tree): the ring and tree collectives over the three
/// protocols' primitives.
pub(crate) const VARIANT_FILES: &[SourceFile] = &[
    nvrtc::TYPES_CUH,
    nvrtc::COMMON_CUH,
    nvrtc::PROTO_SIMPLE_CUH,
    nvrtc::PROTO_LL_CUH,
    nvrtc::PROTO_LL128_CUH,
    nvrtc::COLLECTIVES_CU,
    nvrtc::PATTERN_CU,
];

/// The files of an all-reduce variant beyond NCCL (OneShot, TwoShot): their own kernel
/// (`planner_collective` taking `PeerArgs`) instead of the ring and tree collectives.
pub(crate) const BEYOND_FILES: &[SourceFile] = &[
    nvrtc::TYPES_CUH,
    nvrtc::COMMON_CUH,
    nvrtc::BEYOND_CU,
    nvrtc::PATTERN_CU,
];

/// Every kernel algorithm, with its id, define and files.
pub(crate) const KERNEL_ALGOS: [KernelAlgo; 4] = [
    KernelAlgo {
        algorithm: AnyAlgo::Nccl(Algo::Ring),
        id: 0,
        define: "PLANNER_ALGO_RING",
        files: VARIANT_FILES,
    },
    KernelAlgo {
        algorithm: AnyAlgo::Nccl(Algo::Tree),
        id: 1,
        define: "PLANNER_ALGO_TREE",
        files: VARIANT_FILES,
    },
    KernelAlgo {
        algorithm: AnyAlgo::Own(OwnAlgo::OneShot),
        id: 2,
        define: "PLANNER_ALGO_ONE_SHOT",
        files: BEYOND_FILES,
    },
    KernelAlgo {
        algorithm: AnyAlgo::Own(OwnAlgo::TwoShot),
        id: 3,
        define: "PLANNER_ALGO_TWO_SHOT",
        files: BEYOND_FILES,
    },
];

/// One row of variants: each collective with the algorithm and each protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VariantRow {
    pub(crate) collectives: &'static [Coll],
    pub(crate) algorithm: AnyAlgo,
    pub(crate) protocols: &'static [Proto],
}

/// Every variant the executor builds (per type, in this order): all-reduce with Ring and Tree over every
/// protocol, the all-reduce kernels beyond NCCL with their one protocol each, the other collectives
/// Ring/Simple.
pub(crate) const VARIANT_ROWS: &[VariantRow] = &[
    VariantRow {
        collectives: &[Coll::AllReduce],
        algorithm: AnyAlgo::Nccl(Algo::Ring),
        protocols: &Proto::ALL,
    },
    VariantRow {
        collectives: &[Coll::AllReduce],
        algorithm: AnyAlgo::Nccl(Algo::Tree),
        protocols: &Proto::ALL,
    },
    VariantRow {
        collectives: &[Coll::AllReduce],
        algorithm: AnyAlgo::Own(OwnAlgo::OneShot),
        protocols: &[Proto::Ll],
    },
    VariantRow {
        collectives: &[Coll::AllReduce],
        algorithm: AnyAlgo::Own(OwnAlgo::TwoShot),
        protocols: &[Proto::Simple],
    },
    VariantRow {
        collectives: &[Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast],
        algorithm: AnyAlgo::Nccl(Algo::Ring),
        protocols: &[Proto::Simple],
    },
];

/// The executor's collectives with the define naming each `PLANNER_COLL` value.
const COLL_DEFINES: [(Coll, &str); 4] = [
    (Coll::AllReduce, "PLANNER_COLL_ALL_REDUCE"),
    (Coll::AllGather, "PLANNER_COLL_ALL_GATHER"),
    (Coll::ReduceScatter, "PLANNER_COLL_REDUCE_SCATTER"),
    (Coll::Broadcast, "PLANNER_COLL_BROADCAST"),
];

/// The define naming each `PLANNER_PROTO` value (NCCL's protocol index).
const PROTO_DEFINES: [(Proto, &str); 3] = [
    (Proto::Ll, "PLANNER_PROTO_LL"),
    (Proto::Ll128, "PLANNER_PROTO_LL128"),
    (Proto::Simple, "PLANNER_PROTO_SIMPLE"),
];

/// The registry's entry for `algo`; None for algorithms the executor does not run.
pub(crate) fn kernel_algo(algo: AnyAlgo) -> Option<&'static KernelAlgo> {
    KERNEL_ALGOS.iter().find(|k| k.algorithm == algo)
}

/// `PLANNER_ALGO` in the kernels; None for algorithms the executor does not run.
pub(crate) fn kernel_algo_id(algo: AnyAlgo) -> Option<i32> {
    kernel_algo(algo).map(|k| k.id)
}

/// The named values every program is compiled with: one define per kernel algorithm, executor collective
/// and protocol, so the kernels never spell a number.
fn registry_defines() -> Vec<(&'static str, String)> {
    let algos = KERNEL_ALGOS.iter().map(|k| (k.define, k.id.to_string()));
    let colls = COLL_DEFINES
        .iter()
        .filter_map(|&(coll, define)| kernel_coll_id(coll).map(|id| (define, id.to_string())));
    let protos = PROTO_DEFINES
        .iter()
        .map(|&(proto, define)| (define, (proto as usize).to_string()));
    algos.chain(colls).chain(protos).collect()
}

/// One kernel variant: a module holding `planner_collective`, `planner_fill`
/// and `planner_check` for one (collective, algorithm, protocol, type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    pub(crate) collective: Coll,
    pub algorithm: AnyAlgo,
    pub protocol: Proto,
    pub(crate) dtype: Dtype,
}

impl Variant {
    pub fn name(&self) -> String {
        format!(
            "{}_{}_{}_{}",
            coll_name(self.collective),
            self.algorithm.name(),
            self.protocol.nccl_name(),
            self.dtype.nccl_tests_name()
        )
    }

    /// Every variant the executor can run (`VARIANT_ROWS`), each type.
    pub fn all() -> Vec<Variant> {
        let mut out = Vec::new();
        for dtype in [Dtype::F32, Dtype::Bf16, Dtype::F16] {
            for row in VARIANT_ROWS {
                for &collective in row.collectives {
                    for &protocol in row.protocols {
                        out.push(Variant {
                            collective,
                            algorithm: row.algorithm,
                            protocol,
                            dtype,
                        });
                    }
                }
            }
        }
        out
    }

    /// Whether the registry builds this variant (some row holds its collective, algorithm and protocol).
    pub(crate) fn is_built(&self) -> bool {
        VARIANT_ROWS.iter().any(|row| {
            row.algorithm == self.algorithm
                && row.collectives.contains(&self.collective)
                && row.protocols.contains(&self.protocol)
        })
    }
}

/// The full source of one variant: its defines, then every file.
pub(crate) fn source(variant: &Variant) -> Result<String> {
    let unsupported = || Error::runtime(format!("the executor has no kernel {}", variant.name()));
    let coll = kernel_coll_id(variant.collective).ok_or_else(unsupported)?;
    let kernel = kernel_algo(variant.algorithm).ok_or_else(unsupported)?;
    if !variant.is_built() {
        return Err(unsupported());
    }
    let mut defines = dtype_defines(variant.dtype);
    defines.extend(registry_defines());
    defines.extend([
        ("PLANNER_COLL", coll.to_string()),
        ("PLANNER_ALGO", kernel.id.to_string()),
        ("PLANNER_PROTO", (variant.protocol as usize).to_string()),
    ]);
    nvrtc::program_source(
        &format!("variant {}", variant.name()),
        &defines,
        kernel.files,
    )
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
            algorithm: AnyAlgo::Own(OwnAlgo::TwoShot),
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
            algorithm: AnyAlgo::Own(OwnAlgo::OneShot),
            ..v
        };
        assert!(!Variant::all().contains(&bad));
        assert!(source(&bad).is_err());
    }

    #[test]
    fn every_file_of_a_variant_is_a_kernel_source() {
        for file in VARIANT_FILES.iter().chain(BEYOND_FILES) {
            assert!(nvrtc::SOURCE_FILES.contains(file), "{}", file.name);
        }
        let v = Variant {
            collective: Coll::ReduceScatter,
            algorithm: AnyAlgo::Nccl(Algo::Ring),
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

    #[test]
    fn the_registry_gives_each_algorithm_one_id_and_define() {
        for (i, a) in KERNEL_ALGOS.iter().enumerate() {
            for b in &KERNEL_ALGOS[i + 1..] {
                assert_ne!(a.id, b.id, "{:?} and {:?}", a.algorithm, b.algorithm);
                assert_ne!(a.define, b.define);
                assert_ne!(a.algorithm, b.algorithm);
            }
        }
        // Every row's algorithm has a kernel; the rows beyond NCCL are model::beyond's pairs, each all-reduce.
        for row in VARIANT_ROWS {
            assert!(kernel_algo(row.algorithm).is_some(), "{:?}", row.algorithm);
        }
        let beyond: Vec<crate::model::Pair> = VARIANT_ROWS
            .iter()
            .filter(|row| row.algorithm.is_beyond_nccl())
            .flat_map(|row| {
                assert_eq!(row.collectives, &[Coll::AllReduce]);
                row.protocols
                    .iter()
                    .map(|&p| crate::model::Pair::new(row.algorithm, p))
            })
            .collect();
        assert_eq!(beyond, crate::model::beyond::pairs());
        assert_eq!(kernel_algo_id(Algo::Nvls.into()), None);
    }

    #[test]
    fn the_kernels_compare_only_against_the_registrys_names() {
        let names: Vec<&str> = registry_defines().iter().map(|(name, _)| *name).collect();
        for file in nvrtc::SOURCE_FILES {
            for line in file.text.lines() {
                let line = line.trim_start();
                if !(line.starts_with("#if") || line.starts_with("#elif")) {
                    continue;
                }
                for part in line.split("&&").flat_map(|p| p.split("||")) {
                    let Some((lhs, rhs)) = part.split_once("==") else {
                        continue;
                    };
                    let lhs = lhs
                        .trim()
                        .trim_start_matches("#elif")
                        .trim_start_matches("#if");
                    let rhs = rhs.trim();
                    if ["PLANNER_ALGO", "PLANNER_COLL", "PLANNER_PROTO"].contains(&lhs.trim()) {
                        assert!(names.contains(&rhs), "{}: {line}", file.name);
                    }
                }
            }
        }
        let v = Variant {
            collective: Coll::AllReduce,
            algorithm: AnyAlgo::Own(OwnAlgo::OneShot),
            protocol: Proto::Ll,
            dtype: Dtype::F32,
        };
        let text = source(&v).unwrap();
        for define in [
            "#define PLANNER_ALGO_ONE_SHOT 2\n",
            "#define PLANNER_ALGO 2\n",
            "#define PLANNER_COLL_ALL_REDUCE 0\n",
            "#define PLANNER_PROTO_LL 0\n",
        ] {
            assert!(text.contains(define), "{define} missing");
        }
    }
}
