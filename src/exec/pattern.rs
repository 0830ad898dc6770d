//! The deterministic inputs and expected outputs, as `kernels/check.cu`
//! computes them on the GPU. Values are small integers (-7..=7), so any sum
//! over at most 16 ranks (|sum| <= 112) is exact in f32, bf16 and f16 in any
//! order of additions, and an element is right only if its bits are equal.

use crate::exec::plan::ExecPlan;
use crate::measure::Dtype;
use crate::model::Coll;

/// The input value of element `index` on `rank`.
pub fn value(rank: u32, index: u64, seed: u32) -> i32 {
    let mut x = index
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(u64::from(rank + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(u64::from(seed));
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x % 15) as i32 - 7
}

/// The bits of a small integer in `dtype` (low 16 bits for bf16/f16).
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

/// The value element `i` of `rank`'s output must hold.
pub fn expected(plan: &ExecPlan, rank: usize, i: u64, seed: u32) -> i32 {
    let n = plan.n_ranks as u32;
    let count = plan.call_count() as u64;
    match plan.collective {
        // Reduce (which plans reject) would hold the sum at the root.
        Coll::AllReduce | Coll::Reduce => (0..n).map(|r| value(r, i, seed)).sum(),
        Coll::AllGather => value((i / count) as u32, i % count, seed),
        Coll::ReduceScatter => (0..n)
            .map(|r| value(r, rank as u64 * count + i, seed))
            .sum(),
        Coll::Broadcast => value(plan.root as u32, i, seed),
    }
}

/// Count the elements of `output` (raw element bits) that differ from the
/// expected result; also the first wrong index.
pub fn count_wrong(plan: &ExecPlan, rank: usize, output: &[u32], seed: u32) -> (u64, Option<u64>) {
    let mut wrong = 0;
    let mut first = None;
    for (i, &got) in output.iter().enumerate() {
        if got != bits(plan.dtype, expected(plan, rank, i as u64, seed)) {
            wrong += 1;
            first.get_or_insert(i as u64);
        }
    }
    (wrong, first)
}
