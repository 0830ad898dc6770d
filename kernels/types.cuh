// planner: the element types and element loads/stores, shared by the
// collectives (src/exec) and the test-data kernels of both backends
// (pattern.cu). Compiled at run time by NVRTC (no system headers) ahead of
// every other file, see src/gpu/nvrtc.rs.

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef long long i64;

// 16-bit float types as opaque storage: the kernels move and add their bits
// (add.rn.bf16x2 / add.rn.f16x2), so no cuda_bf16.h / cuda_fp16.h is needed.
struct planner_bf16 { u16 bits; };
struct planner_f16 { u16 bits; };

// One element as a 32-bit word (16-bit types in the low half).
template<typename T>
__device__ __forceinline__ u32 load_elem(const T* p) {
  if (sizeof(T) == 4) return *(const u32*)p;
  return (u32)(*(const u16*)p);
}
template<typename T>
__device__ __forceinline__ u32 load_elem_volatile(const T* p) {
  if (sizeof(T) == 4) return *(const volatile u32*)p;
  return (u32)(*(const volatile u16*)p);
}
template<typename T>
__device__ __forceinline__ void store_elem(T* p, u32 v) {
  if (sizeof(T) == 4) *(u32*)p = v;
  else *(u16*)p = (u16)v;
}
