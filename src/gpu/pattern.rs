//! The test data of both backends: the inputs every rank starts from and the
//! exact result every output element must hold, as `kernels/pattern.cu`
//! computes them on the GPU (`planner_fill`, `planner_check`), here for the
//! CPU, plus the kernels' launch arguments in the order of their CUDA
//! signatures (a test compares the two).
//!
//! Element `index` of rank `rank`'s input is a small integer in `[-amp, amp]`,
//! hashed from (rank, index, seed) so that a misplaced chunk shows. `amp`
//! comes from the rank count (`amplitude`): any sum over the ranks stays
//! within the data type's exact integers, so a correct reduction matches
//! exactly, bit for bit, in f32, bf16 and f16 in any order of additions, up
//! to thousands of ranks. Outputs are poisoned (all bits set: NaN) before the
//! checked call, so an element nobody wrote is wrong too.

use crate::dtype::Dtype;
use crate::error::Result;
use crate::gpu::collective_code;
use crate::gpu::error::CudaResult;
use crate::gpu::nvrtc::{self, Cubin};
use crate::model::Coll;
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::fmt::Display;

/// The seed both backends use unless told otherwise (`planner run --seed`).
pub(crate) const DEFAULT_SEED: u32 = 1;

/// Integer amplitude of the pattern for `n_ranks`: the largest in 1..=5 with
/// `amp * n_ranks` within the exact integers of `dtype`.
pub(crate) fn amplitude(dtype: Dtype, n_ranks: usize) -> u32 {
    let limit = dtype.exact_integer_limit();
    (limit / n_ranks.max(1) as u64).clamp(1, 5) as u32
}

/// The inputs of one run: every rank's values follow from these two numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPattern {
    pub(crate) seed: u32,
    pub amp: u32,
}

impl DataPattern {
    /// The pattern for `n_ranks` ranks of `dtype` (amplitude from both).
    pub fn new(dtype: Dtype, n_ranks: usize, seed: u32) -> DataPattern {
        DataPattern {
            seed,
            amp: amplitude(dtype, n_ranks),
        }
    }

    /// The input value of element `index` on `rank` (`pattern_value` in pattern.cu).
    pub fn value(&self, rank: u32, index: u64) -> i32 {
        let mut x = index
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(u64::from(rank.wrapping_add(1)).wrapping_mul(0xBF58_476D_1CE4_E5B9))
            .wrapping_add(u64::from(self.seed));
        x ^= x >> 31;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 29;
        let period = 2 * self.amp + 1;
        ((x >> 32) as u32 % period) as i32 - self.amp as i32
    }

    /// `planner_fill`'s arguments: `n` elements of `rank`'s input at `buf`.
    pub(crate) fn fill_args(&self, buf: u64, n: u64, rank: u32) -> FillArgs {
        FillArgs {
            buf,
            n,
            rank,
            seed: self.seed,
            amp: self.amp,
        }
    }
}

/// What one rank's output must hold after a collective: the parameters the
/// checker takes, for the GPU (`check_args`) and the CPU (`value`, `count_wrong`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectation {
    pub(crate) pattern: DataPattern,
    pub(crate) collective: Coll,
    pub(crate) n_ranks: u32,
    /// The rank whose output this is.
    pub(crate) rank: u32,
    /// Broadcast's root (Reduce is checked on its root only).
    pub(crate) root: u32,
    /// The call count: one rank's share for all-gather (its input) and
    /// reduce-scatter (its output), the whole buffer otherwise.
    pub(crate) count: u64,
}

impl Expectation {
    /// The value output element `index` must hold (`expected_value` in pattern.cu).
    pub fn value(&self, index: u64) -> i32 {
        let p = &self.pattern;
        match self.collective {
            Coll::AllReduce | Coll::Reduce => (0..self.n_ranks).map(|r| p.value(r, index)).sum(),
            Coll::AllGather => p.value((index / self.count) as u32, index % self.count),
            Coll::ReduceScatter => (0..self.n_ranks)
                .map(|r| p.value(r, u64::from(self.rank) * self.count + index))
                .sum(),
            Coll::Broadcast => p.value(self.root, index),
        }
    }

    /// The elements of `output` (raw element bits, 16-bit types in the low
    /// half) that differ from the expected result, and the first wrong index.
    pub fn count_wrong(&self, dtype: Dtype, output: &[u32]) -> (u64, Option<u64>) {
        let mut wrong = 0;
        let mut first = None;
        for (i, &got) in output.iter().enumerate() {
            if got != bits(dtype, self.value(i as u64)) {
                wrong += 1;
                first.get_or_insert(i as u64);
            }
        }
        (wrong, first)
    }

    /// `planner_check`'s arguments: check `n` elements at `buf`, add the
    /// wrong ones to the u64 at `wrong` and lower the u64 at `first_wrong`
    /// (start it at u64::MAX) to the first wrong index.
    pub(crate) fn check_args(&self, buf: u64, n: u64, wrong: u64, first_wrong: u64) -> CheckArgs {
        CheckArgs {
            buf,
            n,
            coll: collective_code(self.collective),
            nranks: self.n_ranks as i32,
            rank: self.rank as i32,
            root: self.root as i32,
            count: self.count,
            seed: self.pattern.seed,
            amp: self.pattern.amp,
            wrong,
            first_wrong,
        }
    }
}

/// The bits of a small integer in `dtype` (low 16 bits for bf16/f16), as
/// `value_bits` in pattern.cu.
pub fn bits(dtype: Dtype, v: i32) -> u32 {
    let f = v as f32;
    match dtype {
        Dtype::F32 => f.to_bits(),
        // Exact: the value has at most 8 significant bits.
        Dtype::Bf16 => f.to_bits() >> 16,
        Dtype::F16 => f16_bits_of_small_int(v),
    }
}

/// IEEE half bits of an integer with |v| <= 2048 (exact).
fn f16_bits_of_small_int(v: i32) -> u32 {
    if v == 0 {
        return 0;
    }
    let sign = if v < 0 { 0x8000 } else { 0 };
    let m = v.unsigned_abs();
    let e = 31 - m.leading_zeros(); // position of the top bit
    let mantissa = (m << (10 - e)) & 0x3ff;
    sign | ((e + 15) << 10) | mantissa
}

/// The launch arguments of a data kernel: a struct whose fields are the
/// kernel's parameters in signature order (`kernel_args!` writes both).
pub trait DataKernelArgs {
    /// The kernel's name in pattern.cu.
    const KERNEL: &'static str;
    /// (C type, name, bytes of the Rust field) per parameter, in order; a
    /// test compares it with the CUDA signature.
    const SIGNATURE: &'static [(&'static str, &'static str, usize)];
    /// One pointer per parameter, in order, into `self` (which must stay in
    /// place until the launch call returns).
    fn params(&mut self) -> Vec<*mut c_void>;
}

/// Declares a data kernel's argument struct and its `DataKernelArgs`.
macro_rules! kernel_args {
    ($(#[$doc:meta])* $name:ident = $kernel:literal { $($field:ident : $rust:ty => $c:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) struct $name {
            $(pub $field: $rust),*
        }

        impl DataKernelArgs for $name {
            const KERNEL: &'static str = $kernel;
            const SIGNATURE: &'static [(&'static str, &'static str, usize)] =
                &[$(($c, stringify!($field), std::mem::size_of::<$rust>())),*];

            fn params(&mut self) -> Vec<*mut c_void> {
                vec![$(&mut self.$field as *mut $rust as *mut c_void),*]
            }
        }
    };
}

kernel_args! {
    /// `planner_fill`: one rank's input.
    FillArgs = "planner_fill" {
        buf: u64 => "T*",
        n: u64 => "u64",
        rank: u32 => "u32",
        seed: u32 => "u32",
        amp: u32 => "u32",
    }
}

kernel_args! {
    /// `planner_check`: count one rank's wrong output elements.
    CheckArgs = "planner_check" {
        buf: u64 => "const T*",
        n: u64 => "u64",
        coll: i32 => "int",
        nranks: i32 => "int",
        rank: i32 => "int",
        root: i32 => "int",
        count: u64 => "u64",
        seed: u32 => "u32",
        amp: u32 => "u32",
        wrong: u64 => "unsigned long long*",
        first_wrong: u64 => "unsigned long long*",
    }
}

/// The `#define`s that compile the kernels for `dtype` (types.cuh names the types).
pub(crate) fn dtype_defines(dtype: Dtype) -> Vec<(&'static str, String)> {
    vec![
        ("PLANNER_T", dtype.c_type().to_string()),
        (
            "PLANNER_DTYPE_BF16",
            u8::from(dtype == Dtype::Bf16).to_string(),
        ),
    ]
}

/// The files of the stand-alone data-kernel module (the NCCL backend's; the
/// executor compiles pattern.cu into each collective's module instead).
pub(crate) const PATTERN_FILES: &[nvrtc::SourceFile] = &[nvrtc::TYPES_CUH, nvrtc::PATTERN_CU];

/// The data kernels alone, for `dtype`, compiled for `arch`.
pub fn compile(dtype: Dtype, arch: &str) -> Result<Cubin> {
    let name = format!("pattern_{}", dtype.nccl_tests_name());
    let source = nvrtc::program_source(&name, &dtype_defines(dtype), PATTERN_FILES)?;
    nvrtc::compile(&name, &source, arch, &[])
}

/// Threads per block of the data kernels (whole warps: the checker sums per warp).
const BLOCK_THREADS: u32 = 256;
/// Most blocks of one data-kernel launch (grid-stride loops cover the rest).
const MAX_BLOCKS: u64 = 4096;

/// Launch a data kernel over `n` elements on `stream`, with the context of
/// its GPU current on this thread. `gpu` names the GPU in an error.
///
/// # Safety
/// `function` must be `A::KERNEL` from a module of the current context
/// compiled for the element type the addresses in `args` hold, `stream` a
/// stream of that context, and every address in `args` must point to device
/// memory of that GPU large enough for what the kernel reads and writes.
pub(crate) unsafe fn launch<A: DataKernelArgs>(
    function: sys::CUfunction,
    stream: sys::CUstream,
    n: u64,
    args: &mut A,
    gpu: impl Display,
) -> Result<()> {
    let blocks = n.div_ceil(u64::from(BLOCK_THREADS)).clamp(1, MAX_BLOCKS) as u32;
    let mut params = args.params();
    // SAFETY: the caller guarantees function, stream and the memory; params
    // points into `args`, alive and unmoved during the call (the driver
    // copies the values).
    unsafe {
        result::launch_kernel(
            function,
            (blocks, 1, 1),
            (BLOCK_THREADS, 1, 1),
            0,
            stream,
            &mut params,
        )
    }
    .on_gpu(gpu, format_args!("cuLaunchKernel ({})", A::KERNEL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amplitude_keeps_sums_exact() {
        // bf16 holds integers up to 256 exactly: 5 x 51 = 255 fits, 5 x 52 does not
        assert_eq!(amplitude(Dtype::Bf16, 2), 5);
        assert_eq!(amplitude(Dtype::Bf16, 51), 5);
        assert_eq!(amplitude(Dtype::Bf16, 52), 4); // 256 / 52 = 4
        assert_eq!(amplitude(Dtype::Bf16, 1000), 1);
        assert_eq!(amplitude(Dtype::F16, 409), 5); // 2048 / 409 = 5
        assert_eq!(amplitude(Dtype::F32, 4096), 5);
    }

    #[test]
    fn pattern_is_small_varied_and_rank_dependent() {
        let p = DataPattern { seed: 0, amp: 5 };
        let values: Vec<i32> = (0..10_000u64).map(|i| p.value(0, i)).collect();
        assert!(values.iter().all(|v| (-5..=5).contains(v)));
        // every one of the 11 values occurs, none dominates (uniform would be ~909 each)
        for v in -5..=5 {
            let n = values.iter().filter(|x| **x == v).count();
            assert!((600..1300).contains(&n), "value {v} occurs {n} times");
        }
        let other_rank = (0..10_000u64)
            .filter(|&i| p.value(1, i) != p.value(0, i))
            .count();
        assert!(other_rank > 8000, "{other_rank}");
        // neighbours differ often: a chunk shifted by one element shows
        let shifted = (0..10_000u64)
            .filter(|&i| p.value(0, i) != p.value(0, i + 1))
            .count();
        assert!(shifted > 8000, "{shifted}");
        // another seed, other data
        let reseeded = DataPattern { seed: 9, amp: 5 };
        let changed = (0..10_000u64)
            .filter(|&i| reseeded.value(0, i) != p.value(0, i))
            .count();
        assert!(changed > 8000, "{changed}");
    }

    #[test]
    fn pattern_value_by_hand() {
        // rank 0, index 0, seed 0: x = 1 x 0xBF58476D1CE4E5B9; x ^= x >> 31 gives
        // 0xBF58476C62546B63; x *= 0x94D049BB133111EB (mod 2^64) gives
        // 0x9C8C8577C59326E1; x ^= x >> 29 gives 0x9C8C857321F70D5F; the high half
        // 0x9C8C8573 = 2626454899 = 238768627 x 11 + 2, so the value is 2 - 5 = -3.
        assert_eq!(DataPattern { seed: 0, amp: 5 }.value(0, 0), -3);
        // Amplitude 1: 2626454899 = 875484966 x 3 + 1, value 1 - 1 = 0.
        assert_eq!(DataPattern { seed: 0, amp: 1 }.value(0, 0), 0);
    }

    #[test]
    fn expected_values_by_hand() {
        let p = DataPattern { seed: 3, amp: 5 };
        let at = |collective, rank, count| Expectation {
            pattern: p,
            collective,
            n_ranks: 2,
            rank,
            root: 0,
            count,
        };
        assert_eq!(
            at(Coll::AllReduce, 0, 16).value(7),
            p.value(0, 7) + p.value(1, 7)
        );
        assert_eq!(
            at(Coll::Reduce, 0, 16).value(7),
            at(Coll::AllReduce, 0, 16).value(7)
        );
        // all-gather output element count + 3 is rank 1's element 3
        assert_eq!(at(Coll::AllGather, 0, 10).value(10 + 3), p.value(1, 3));
        // reduce-scatter: rank 1's element 2 is the sum of every rank's element 10 + 2
        assert_eq!(
            at(Coll::ReduceScatter, 1, 10).value(2),
            p.value(0, 12) + p.value(1, 12)
        );
        assert_eq!(at(Coll::Broadcast, 1, 16).value(5), p.value(0, 5));
    }

    #[test]
    fn count_wrong_finds_flipped_bits_and_poison() {
        let want = Expectation {
            pattern: DataPattern::new(Dtype::Bf16, 4, DEFAULT_SEED),
            collective: Coll::AllReduce,
            n_ranks: 4,
            rank: 0,
            root: 0,
            count: 32,
        };
        let mut out: Vec<u32> = (0..32).map(|i| bits(Dtype::Bf16, want.value(i))).collect();
        assert_eq!(want.count_wrong(Dtype::Bf16, &out), (0, None));
        out[3] ^= 0x8000; // sign flipped (a zero would become -0: wrong too)
        out[20] = 0xffff; // poison left behind
        assert_eq!(want.count_wrong(Dtype::Bf16, &out), (2, Some(3)));
    }

    #[test]
    fn launch_arguments_carry_the_expectation() {
        let want = Expectation {
            pattern: DataPattern { seed: 7, amp: 4 },
            collective: Coll::ReduceScatter,
            n_ranks: 3,
            rank: 2,
            root: 1,
            count: 100,
        };
        let mut args = want.check_args(0x1000, 100, 0x2000, 0x2008);
        assert_eq!(
            (args.coll, args.nranks, args.rank, args.root, args.count),
            (2, 3, 2, 1, 100)
        );
        assert_eq!((args.seed, args.amp), (7, 4));
        assert_eq!(args.params().len(), CheckArgs::SIGNATURE.len());
        let mut fill = want.pattern.fill_args(0x3000, 300, 2);
        assert_eq!((fill.rank, fill.seed, fill.amp, fill.n), (2, 7, 4, 300));
        assert_eq!(fill.params().len(), FillArgs::SIGNATURE.len());
    }

    /// The parameter list of `kernel` in `source`: (type, name) pairs.
    fn cuda_signature(source: &str, kernel: &str) -> Vec<(String, String)> {
        let head = format!("__global__ void {kernel}(");
        let start = source
            .find(&head)
            .unwrap_or_else(|| panic!("no {head} in pattern.cu"))
            + head.len();
        let end = start + source[start..].find(')').expect("closing parenthesis");
        source[start..end]
            .split(',')
            .map(|param| {
                let words: Vec<&str> = param.split_whitespace().collect();
                let (name, ty) = words.split_last().expect("a parameter");
                (ty.join(" "), name.to_string())
            })
            .collect()
    }

    /// Bytes of a parameter of C type `ty` on the GPU (64-bit pointers).
    fn c_size(ty: &str) -> usize {
        match ty {
            t if t.ends_with('*') => 8,
            "u64" | "unsigned long long" => 8,
            "u32" | "int" => 4,
            other => panic!("no size for C type {other}"),
        }
    }

    #[test]
    fn launch_arguments_match_the_cuda_signatures() {
        let source = nvrtc::PATTERN_CU.text;
        for (kernel, rust) in [
            (FillArgs::KERNEL, FillArgs::SIGNATURE),
            (CheckArgs::KERNEL, CheckArgs::SIGNATURE),
        ] {
            let cuda = cuda_signature(source, kernel);
            let rust_params: Vec<(String, String)> = rust
                .iter()
                .map(|(ty, name, _)| (ty.to_string(), name.to_string()))
                .collect();
            assert_eq!(cuda, rust_params, "{kernel}: CUDA vs Rust parameters");
            for (ty, name, rust_bytes) in rust {
                assert_eq!(c_size(ty), *rust_bytes, "{kernel}: {name} is {ty}");
            }
        }
    }

    #[test]
    fn dtype_defines_name_the_element_type() {
        assert_eq!(
            dtype_defines(Dtype::Bf16),
            vec![
                ("PLANNER_T", "planner_bf16".to_string()),
                ("PLANNER_DTYPE_BF16", "1".to_string())
            ]
        );
        assert_eq!(dtype_defines(Dtype::F16)[1].1, "0");
    }
}
