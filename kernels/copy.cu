// planner doctor's SM copy (nvbandwidth's *_sm test cases): every thread copies 16-byte words in a grid-stride
// loop. The issuing GPU reads its peer's memory (read tests) or writes it (write tests) over the P2P mapping.
extern "C" __global__ void planner_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                        unsigned long long n16) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
       i += stride) {
    dst[i] = src[i];
  }
}
