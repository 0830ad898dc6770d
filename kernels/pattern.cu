// planner: the test data of both backends (our executor and the NCCL
// reference): deterministic inputs and the element-by-element check of a
// collective's output (#wrong, as nccl-tests counts it). src/gpu/pattern.rs
// holds the same formulas for the CPU and the launch arguments of both
// kernels, in the order of the signatures below.
//
// Element `index` of rank `rank`'s input is a small integer in [-amp, amp],
// hashed from (rank, index, seed). The host picks amp (1..5) so that
// amp x ranks stays within the exact integers of the type (256 for bf16,
// 2048 for f16), so every sum over the ranks is exact in f32, bf16 and f16
// whatever the order of additions; an output element is right only if its
// bits equal the expected value's. Compiled after types.cuh with
//   PLANNER_T           float | planner_bf16 | planner_f16
//   PLANNER_DTYPE_BF16  1 for planner_bf16, else 0

typedef PLANNER_T T;

__device__ __forceinline__ int pattern_value(u32 rank, u64 index, u32 seed, u32 amp) {
  u64 x = index * 0x9E3779B97F4A7C15ull + (u64)(rank + 1) * 0xBF58476D1CE4E5B9ull + (u64)seed;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  // The high half, reduced in 32 bits (a 64-bit modulo is slow on the GPU).
  return (int)((u32)(x >> 32) % (2u * amp + 1u)) - (int)amp;
}

// Bits of a small integer in the element type.
__device__ __forceinline__ u32 value_bits(int v) {
  const float f = (float)v;
  if (sizeof(T) == 4) return __float_as_uint(f);
  if (PLANNER_DTYPE_BF16) return __float_as_uint(f) >> 16;  // exact: at most 8 significant bits
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return (u32)h;
}

extern "C" __global__ void planner_fill(T* buf, u64 n, u32 rank, u32 seed, u32 amp) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    store_elem<T>(buf + i, value_bits(pattern_value(rank, i, seed, amp)));
}

// coll: 0 all-reduce, 1 all-gather, 2 reduce-scatter, 3 broadcast, 4 reduce
// (the root's output). count: the call count (per-rank block for all-gather /
// reduce-scatter).
__device__ __forceinline__ int expected_value(int coll, u64 i, int nranks, int rank, int root, u64 count,
                                              u32 seed, u32 amp) {
  int v = 0;
  switch (coll) {
    case 0:
    case 4:
      for (int r = 0; r < nranks; r++) v += pattern_value((u32)r, i, seed, amp);
      return v;
    case 1:
      return pattern_value((u32)(i / count), i % count, seed, amp);
    case 2:
      for (int r = 0; r < nranks; r++) v += pattern_value((u32)r, (u64)rank * count + i, seed, amp);
      return v;
    default:
      return pattern_value((u32)root, i, seed, amp);
  }
}

// Adds the number of wrong elements of buf[0..n) to *wrong and lowers
// *first_wrong to the first wrong index.
extern "C" __global__ void planner_check(const T* buf, u64 n, int coll, int nranks, int rank, int root,
                                         u64 count, u32 seed, u32 amp, unsigned long long* wrong,
                                         unsigned long long* first_wrong) {
  unsigned long long local = 0;
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    const u32 want = value_bits(expected_value(coll, i, nranks, rank, root, count, seed, amp));
    const u32 got = load_elem<T>(buf + i);
    if (got != want) {
      local++;
      atomicMin(first_wrong, (unsigned long long)i);
    }
  }
  // Warp sum, then one atomic per warp.
  for (int o = 16; o > 0; o /= 2) local += __shfl_down_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(wrong, local);
}
