//! Test data for the NCCL reference: a fill kernel and a checking kernel,
//! compiled at run time with NVRTC, and the same pattern in Rust.
//!
//! Element `i` of rank `r`'s input is a small integer `pattern(i, r, amp)` in
//! `[-amp, amp]`, hashed from `i` and `r` so that a misplaced chunk shows. Any
//! sum over the ranks stays within the data type's exact integers (`amp` is
//! chosen from the rank count), so a correct reduction matches exactly in
//! f32, bf16 and f16, in any order. The checker recomputes the expected value
//! of every output element on the GPU and counts the elements that differ.
//! Outputs are poisoned (all bits set: NaN) before the checked call, so an
//! element nobody wrote is wrong too.

use crate::measure::Dtype;
use crate::model::Coll;

/// Integer amplitude of the pattern for `n_ranks`: the largest in 1..=5 with
/// `amp * n_ranks` within the exact integers of `dtype`.
pub fn amplitude(dtype: Dtype, n_ranks: usize) -> u32 {
    let limit = dtype.exact_integer_limit();
    (limit / n_ranks.max(1) as u64).clamp(1, 5) as u32
}

/// The input value of element `index` on `rank` (the kernels compute the same).
pub fn pattern(index: u64, rank: u32, amp: u32) -> i32 {
    let h = (index ^ (index >> 17))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((rank as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
    let period = 2 * amp + 1;
    ((h >> 33) as u32 % period) as i32 - amp as i32
}

/// The expected output element `index` of `rank` (CPU mirror of the checker).
/// `per_rank` is the element count of one rank's share (all-gather input,
/// reduce-scatter output).
pub fn expected(
    collective: Coll,
    index: u64,
    per_rank: u64,
    rank: u32,
    n_ranks: u32,
    root: u32,
    amp: u32,
) -> i32 {
    match collective {
        Coll::AllReduce | Coll::Reduce => (0..n_ranks).map(|r| pattern(index, r, amp)).sum(),
        Coll::AllGather => pattern(index % per_rank, (index / per_rank) as u32, amp),
        Coll::ReduceScatter => (0..n_ranks)
            .map(|r| pattern(rank as u64 * per_rank + index, r, amp))
            .sum(),
        Coll::Broadcast => pattern(index, root, amp),
    }
}

/// Numbers the kernels use for data types and collectives.
pub fn dtype_code(dtype: Dtype) -> i32 {
    match dtype {
        Dtype::F32 => 0,
        Dtype::Bf16 => 1,
        Dtype::F16 => 2,
    }
}

pub fn collective_code(collective: Coll) -> i32 {
    match collective {
        Coll::AllReduce => 0,
        Coll::AllGather => 1,
        Coll::ReduceScatter => 2,
        Coll::Broadcast => 3,
        Coll::Reduce => 4,
    }
}

pub const FILL_KERNEL: &str = "planner_fill";
pub const CHECK_KERNEL: &str = "planner_check";

/// CUDA C++ for NVRTC; needs no headers (f16 through PTX `cvt`, bf16 by
/// taking the top half of an f32, exact for these small integers).
pub const KERNELS_CU: &str = r#"
typedef unsigned long long u64;
typedef unsigned int u32;

__device__ __forceinline__ int pattern(u64 i, u32 rank, u32 amp) {
    u64 h = (i ^ (i >> 17)) * 0x9E3779B97F4A7C15ull + (u64)rank * 0xC2B2AE3D27D4EB4Full;
    u32 period = 2u * amp + 1u;
    return (int)((u32)(h >> 33) % period) - (int)amp;
}

__device__ __forceinline__ void store_value(void* buf, u64 i, int dtype, float v) {
    if (dtype == 0) {
        ((float*)buf)[i] = v;
    } else if (dtype == 1) {
        ((unsigned short*)buf)[i] = (unsigned short)(__float_as_uint(v) >> 16);
    } else {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        ((unsigned short*)buf)[i] = h;
    }
}

__device__ __forceinline__ float load_value(const void* buf, u64 i, int dtype) {
    if (dtype == 0) return ((const float*)buf)[i];
    if (dtype == 1) return __uint_as_float(((u32)((const unsigned short*)buf)[i]) << 16);
    unsigned short h = ((const unsigned short*)buf)[i];
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

extern "C" __global__ void planner_fill(void* buf, u64 count, int dtype, u32 rank, u32 amp) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        store_value(buf, i, dtype, (float)pattern(i, rank, amp));
    }
}

// coll: 0 all-reduce, 1 all-gather, 2 reduce-scatter, 3 broadcast, 4 reduce
extern "C" __global__ void planner_check(const void* out, u64 count, u64 per_rank, int dtype,
                                         int coll, u32 rank, u32 nranks, u32 root, u32 amp,
                                         u64* wrong) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 bad = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        int expected = 0;
        if (coll == 0 || coll == 4) {
            for (u32 r = 0; r < nranks; r++) expected += pattern(i, r, amp);
        } else if (coll == 1) {
            expected = pattern(i % per_rank, (u32)(i / per_rank), amp);
        } else if (coll == 2) {
            for (u32 r = 0; r < nranks; r++) expected += pattern((u64)rank * per_rank + i, r, amp);
        } else {
            expected = pattern(i, root, amp);
        }
        float got = load_value(out, i, dtype);
        if (!(got == (float)expected)) bad++;
    }
    if (bad) atomicAdd(wrong, bad);
}
"#;

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
        let amp = 5;
        let values: Vec<i32> = (0..10_000u64).map(|i| pattern(i, 0, amp)).collect();
        assert!(values.iter().all(|v| (-5..=5).contains(v)));
        // every one of the 11 values occurs, none dominates (uniform would be ~909 each)
        for v in -5..=5 {
            let n = values.iter().filter(|x| **x == v).count();
            assert!((600..1300).contains(&n), "value {v} occurs {n} times");
        }
        let other_rank = (0..10_000u64)
            .filter(|&i| pattern(i, 1, amp) != pattern(i, 0, amp))
            .count();
        assert!(other_rank > 8000, "{other_rank}");
        // neighbours differ often: a chunk shifted by one element shows
        let shifted = (0..10_000u64)
            .filter(|&i| pattern(i, 0, amp) != pattern(i + 1, 0, amp))
            .count();
        assert!(shifted > 8000, "{shifted}");
    }

    #[test]
    fn expected_values_by_hand() {
        let amp = 5;
        let (p0, p1) = (pattern(7, 0, amp), pattern(7, 1, amp));
        assert_eq!(expected(Coll::AllReduce, 7, 0, 0, 2, 0, amp), p0 + p1);
        // all-gather output element per_rank + 3 is rank 1's element 3
        assert_eq!(
            expected(Coll::AllGather, 10 + 3, 10, 0, 2, 0, amp),
            pattern(3, 1, amp)
        );
        // reduce-scatter: rank 1's element 2 is the sum of every rank's element 10 + 2
        assert_eq!(
            expected(Coll::ReduceScatter, 2, 10, 1, 2, 0, amp),
            pattern(12, 0, amp) + pattern(12, 1, amp)
        );
        assert_eq!(
            expected(Coll::Broadcast, 5, 0, 1, 2, 0, amp),
            pattern(5, 0, amp)
        );
    }

    #[test]
    fn kernel_source_names_match() {
        assert!(KERNELS_CU.contains(&format!("void {FILL_KERNEL}(")));
        assert!(KERNELS_CU.contains(&format!("void {CHECK_KERNEL}(")));
        // the CUDA hash constants are the Rust ones
        assert!(KERNELS_CU.contains("0x9E3779B97F4A7C15ull"));
        assert!(KERNELS_CU.contains("0xC2B2AE3D27D4EB4Full"));
    }
}
