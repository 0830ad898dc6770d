// planner executor: deterministic inputs and the element-by-element check of
// a collective's output (#wrong, as nccl-tests counts it). The values are
// small integers (-7..7), so every sum over at most 16 ranks is exact in f32,
// bf16 and f16 whatever the order of additions; an output element is right
// only if its bits equal the expected value's. src/exec/pattern.rs holds the
// same formulas for the CPU. Compiled with PLANNER_T defined.

typedef PLANNER_T T;

__device__ __forceinline__ int pattern_value(u32 rank, u64 index, u32 seed) {
  u64 x = index * 0x9E3779B97F4A7C15ull + (u64)(rank + 1) * 0xBF58476D1CE4E5B9ull + (u64)seed;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (int)(x % 15ull) - 7;
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

extern "C" __global__ void planner_fill(T* buf, u64 n, u32 rank, u32 seed) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    store_elem<T>(buf + i, value_bits(pattern_value(rank, i, seed)));
}

// coll: 0 all-reduce, 1 all-gather, 2 reduce-scatter, 3 broadcast.
// count: the call count (per-rank block for all-gather / reduce-scatter).
__device__ __forceinline__ int expected_value(int coll, u64 i, int nranks, int rank, int root, u64 count, u32 seed) {
  int v = 0;
  switch (coll) {
    case 0:
      for (int r = 0; r < nranks; r++) v += pattern_value(r, i, seed);
      return v;
    case 1:
      return pattern_value((u32)(i / count), i % count, seed);
    case 2:
      for (int r = 0; r < nranks; r++) v += pattern_value(r, (u64)rank * count + i, seed);
      return v;
    default:
      return pattern_value(root, i, seed);
  }
}

// Adds the number of wrong elements of buf[0..n) to *wrong and lowers
// *first_wrong to the first wrong index.
extern "C" __global__ void planner_check(const T* buf, u64 n, int coll, int nranks, int rank, int root,
                                         u64 count, u32 seed, unsigned long long* wrong,
                                         unsigned long long* first_wrong) {
  unsigned long long local = 0;
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    const u32 want = value_bits(expected_value(coll, i, nranks, rank, root, count, seed));
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
