// planner executor: shared device code of the collectives (layouts, memory
// operations, arithmetic). Compiled at run time by NVRTC (no system headers)
// after types.cuh, see src/exec/kernels.rs and src/gpu/nvrtc.rs.
// The layouts below must match the #[repr(C)] structs in src/exec/runtime.rs.

#define PLANNER_FIFO_STEPS 8
#define PLANNER_MAX_RANKS 16
#define PLANNER_MAX_CHANNELS 64
#define PLANNER_MAX_ARITY 3
#define PLANNER_ABORT_CHECK_SPINS 1024

// One directed connection as one end sees it. Memory: the FIFO and `tail`
// live on the receiving GPU, `head` on the sending GPU; each end keeps its own
// persistent `step` counter in its own memory (so steps survive launches).
struct Conn {
  char* buff;   // FIFO (8 slots) of this protocol, on the receiver
  u64* tail;    // steps sent (written by the sender, read by the receiver; Simple)
  u64* head;    // steps consumed (written by the receiver, read by the sender)
  u64* step;    // this end's step count, saved between launches
};

// What one CTA (one rank on one channel) is connected to.
struct ChannelDesc {
  Conn ring_recv;                       // from the previous rank of the ring
  Conn ring_send;                       // to the next rank
  Conn tree_recv_up;                    // broadcast from the parent
  Conn tree_send_up;                    // reduction to the parent
  Conn tree_recv_down[PLANNER_MAX_ARITY];  // reduction from each child
  Conn tree_send_down[PLANNER_MAX_ARITY];  // broadcast to each child
  int user_ranks[PLANNER_MAX_RANKS];    // the ring rotated to start at this rank
  int ring_index;                       // position relative to rank 0 (NCCL's ring->index)
  int tree_has_up;
  int tree_n_down;
  int rank;
  int local_rank;                       // index into KernelArgs::send/recv
  int channel;
  int pad0;
  int pad1;
};

struct KernelArgs {
  ChannelDesc* desc;                    // one per CTA (blockIdx.x)
  volatile u32* abort_flag;             // host-mapped; non-zero: give up waiting
  u32* aborted;                         // set by a CTA that gave up
  u64 send[PLANNER_MAX_RANKS];          // per local rank: input buffer
  u64 recv[PLANNER_MAX_RANKS];          // per local rank: output buffer
  i64 chan_off[PLANNER_MAX_CHANNELS];   // per channel: first element of its part
  i64 chan_count[PLANNER_MAX_CHANNELS]; // per channel: elements in its part
  i64 call_count;                       // count of the call (per-rank block for AG/RS)
  i64 chunk_elems;                      // most elements per operation
  int nranks;
  int nchannels;
  int root;
  int slices_per_chunk;                 // Simple
  int steps_per_slice;                  // Simple
  int step_bytes;                       // bytes of one FIFO slot
  int tree_up_threads;                  // split tree: threads reducing up
  int pad;
};

// The host writes these structs byte for byte (src/exec/runtime.rs).
static_assert(sizeof(Conn) == 32, "Conn layout");
static_assert(sizeof(ChannelDesc) == 416, "ChannelDesc layout");
static_assert(sizeof(KernelArgs) == 1352, "KernelArgs layout");

// ---------------------------------------------------------------- memory ops

__device__ __forceinline__ u64 ld_volatile_u64(const u64* p) {
  u64 v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_sys(u64* p, u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}
// FIFO data written by another GPU: never from L1.
__device__ __forceinline__ uint4 ld_volatile_v4(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_volatile_v4(void* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};"
               :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void ld_volatile_v2u64(const void* p, u64& a, u64& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
__device__ __forceinline__ void st_volatile_v2u64(void* p, u64 a, u64 b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" :: "l"(p), "l"(a), "l"(b) : "memory");
}
// Plain 16-byte accesses to user buffers and to the peer's FIFO (ordered
// before the tail by the poster's system fence after a barrier).
__device__ __forceinline__ uint4 ld_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};"
               :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

__device__ __forceinline__ void named_barrier(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(nthreads) : "memory");
}

// ---------------------------------------------------------------- arithmetic
// Sums on packed 32-bit words: one float, or two bf16/f16 (low, high).

template<typename T> struct Arith;

template<> struct Arith<float> {
  static __device__ __forceinline__ u32 add(u32 a, u32 b) {
    return __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(b)));
  }
};
template<> struct Arith<planner_bf16> {
  static __device__ __forceinline__ u32 add(u32 a, u32 b) {
    u32 d;
    asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};
template<> struct Arith<planner_f16> {
  static __device__ __forceinline__ u32 add(u32 a, u32 b) {
    u32 d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};

template<typename T>
__device__ __forceinline__ uint4 add_v4(uint4 a, uint4 b) {
  return make_uint4(Arith<T>::add(a.x, b.x), Arith<T>::add(a.y, b.y),
                    Arith<T>::add(a.z, b.z), Arith<T>::add(a.w, b.w));
}
template<typename T>
__device__ __forceinline__ u64 add_u64(u64 a, u64 b) {
  u32 lo = Arith<T>::add((u32)a, (u32)b);
  u32 hi = Arith<T>::add((u32)(a >> 32), (u32)(b >> 32));
  return ((u64)hi << 32) | lo;
}

// ---------------------------------------------------------------- abort

// Spinning threads look at the host's abort flag every PLANNER_ABORT_CHECK_SPINS
// rounds; once it is set every wait returns at once and the kernel runs out.
struct Abort {
  volatile u32* flag;
  u32* aborted;
  int spins;
  bool hit;
  __device__ __forceinline__ bool check() {
    if (hit) return true;
    if (++spins >= PLANNER_ABORT_CHECK_SPINS) {
      spins = 0;
      if (*flag != 0) {
        hit = true;
        atomicExch(aborted, 1u);
      }
    }
    return hit;
  }
};

// Fault injection (`planner run --inject-fault hang`, compiled with -DPLANNER_INJECT_HANG): CTA 0
// spins until the host's watchdog raises the abort flag, so the launch never ends on its own.
// True for the CTA that hung (it must return); always false in a normal build.
__device__ __forceinline__ bool injected_hang(Abort& ab) {
#ifdef PLANNER_INJECT_HANG
  if (blockIdx.x == 0) {
    while (!ab.check()) {
    }
    return true;
  }
#endif
  return false;
}

// Thread 0 saves this launch's step counters for the next launch (every
// protocol's finish(), after its barrier).
template<int MAXR, int MAXS>
__device__ __forceinline__ void save_steps(int tid, const Conn* const* recv, const u64* recv_step,
                                           int nrecv, const Conn* const* send,
                                           const u64* send_step, int nsend) {
  if (tid == 0) {
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nrecv) *recv[i]->step = recv_step[i];
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < nsend) *send[i]->step = send_step[i];
  }
}

// LL and LL128: thread i waits until send peer i has a free FIFO slot for the
// next step (the receiver's head is at most PLANNER_FIFO_STEPS behind).
template<int MAXS>
__device__ __forceinline__ void wait_send_slot(int tid, int nsend, const Conn* const* send,
                                               const u64* send_step, Abort* abort) {
#pragma unroll
  for (int i = 0; i < MAXS; i++) {
    if (i < nsend && tid == i) {
      while (ld_volatile_u64(send[i]->head) + PLANNER_FIFO_STEPS < send_step[i] + 1) {
        if (abort->check()) break;
      }
    }
  }
}

