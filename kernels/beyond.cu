// planner executor: all-reduce kernels beyond NCCL's menu, over peer memory
// inside one process (peer access between the GPUs; virtual ranks are
// buffers of one GPU). No multicast. Compiled after types.cuh and common.cuh
// (layouts, memory operations, arithmetic, Abort) with
//   PLANNER_T     float | planner_bf16 | planner_f16
//   PLANNER_ALGO  PLANNER_ALGO_ONE_SHOT (OneShot/LL) | PLANNER_ALGO_TWO_SHOT (TwoShot/Simple)
// defined by src/exec/kernels.rs. The CPU model of both protocols, with the
// same geometry, is src/exec/beyond.rs; its tests play every interleaving
// class through (tests/integration/exec_beyond.rs).
//
// One CTA per (rank, channel): block b runs rank first_rank + b / nchannels
// on channel b % nchannels. Every rank has a "peer area" (PeerArgs::area),
// zeroed once by the host, that the peers reach through its device pointer:
//   [PEER_COUNTER_OFF] u64 per channel: this rank's persistent counter
//                      (OneShot: LL rounds done, TwoShot: calls done). Read at
//                      the start of a launch, written back at its end, so a
//                      CUDA graph replay continues the sequence instead of
//                      reusing the value of the launch it was captured from.
//   [PEER_FLAGS_OFF]   u64 [channel][from rank]: TwoShot barrier flags, written
//                      by the peer `from`.
//   [PEER_INBOX_OFF]   OneShot: LL inbox [parity][from rank][channel][unit][thread]
//                      of 32-byte units (two 16-byte LL lines).

#define PEER_MAX_RANKS 16
#define PEER_MAX_CHANNELS 64
#define PEER_MAX_THREADS 512
#define PEER_COUNTER_OFF 0
#define PEER_FLAGS_OFF 512
#define PEER_INBOX_OFF 16384
#define ONESHOT_UNITS 1
#define TWOSHOT_UNROLL 4
#define PEER_GROUP 4

typedef PLANNER_T T;

struct PeerArgs {
  volatile u32* abort_flag;          // host-mapped; non-zero: give up waiting
  u32* aborted;                      // set by a CTA that gave up
  u64 send[PEER_MAX_RANKS];          // per rank (global index): input buffer
  u64 recv[PEER_MAX_RANKS];          // per rank: output buffer
  u64 area[PEER_MAX_RANKS];          // per rank: peer area (see above)
  i64 count;                         // elements per rank
  int nranks;
  int nchannels;                     // CTAs per rank in this launch
  int first_rank;                    // rank of this launch's first CTA group
  int inbox_stride;                  // OneShot inbox: threads per unit row (>= blockDim.x)
  int inbox_channels;                // OneShot inbox: channel rows (>= nchannels)
  int pad;
};
// The host writes this struct byte for byte (src/exec/runtime.rs PeerArgs).
static_assert(sizeof(PeerArgs) == 432, "PeerArgs layout");

__device__ __forceinline__ u64 ld_acquire_sys_u64(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ u64* peer_counter(u64 area, int ch) {
  return (u64*)(area + PEER_COUNTER_OFF) + ch;
}
__device__ __forceinline__ u64* peer_flag(u64 area, int ch, int from) {
  return (u64*)(area + PEER_FLAGS_OFF) + ch * PEER_MAX_RANKS + from;
}

// A 16-byte unit of `count` elements at p (unit index `unit`): whole units
// with one 16-byte access, the last partial unit element by element
// (zero-filled / only its elements stored). VOLATILE: read around L1.
template<bool VOLATILE>
__device__ __forceinline__ uint4 load_unit(const T* p, i64 unit, i64 count) {
  const int epv = 16 / (int)sizeof(T);
  const i64 first = unit * epv;
  if (first + epv <= count) return VOLATILE ? ld_volatile_v4(p + first) : ld_v4(p + first);
  const int valid = (int)(count - first);
  u32 w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(T); k++) {
    if (k < valid) {
      const u32 x = VOLATILE ? load_elem_volatile<T>(p + first + k) : load_elem<T>(p + first + k);
      if (sizeof(T) == 4) w[k] = x;
      else w[k / 2] |= (x & 0xffffu) << (16 * (k % 2));
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void store_unit(T* p, i64 unit, i64 count, uint4 v) {
  const int epv = 16 / (int)sizeof(T);
  const i64 first = unit * epv;
  if (first + epv <= count) {
    st_v4(p + first, v);
    return;
  }
  const int valid = (int)(count - first);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(T); k++) {
    if (k < valid) {
      const u32 x = sizeof(T) == 4 ? w[k] : (w[k / 2] >> (16 * (k % 2))) & 0xffffu;
      store_elem<T>(p + first + k, x);
    }
  }
}

// ---------------------------------------------------------------- OneShot/LL
//
// Per round, every thread of CTA c on rank r takes ONESHOT_UNITS 16-byte
// units of its input, packs each into two LL lines {data, flag, data, flag}
// with flag = the round number, and stores them into every peer's inbox
// (slot parity = round & 1, row `from r`); then it polls its own inbox for
// the same units from every peer, adds all n inputs in rank order (the same
// bits on every rank) and writes its output. No barrier: the flags travel
// with the data. Every thread takes part in every round (unit 0 is sent even
// past the end, as a flag-only line), so on every (rank pair, channel,
// thread) the rounds form a chain: a sender writes round t into a slot only
// after it read round t-1 from that peer, which the peer sent only after it
// had read round t-2, the slot's previous use. Two slots therefore suffice,
// and a stale slot holds flag t-2, never t.

__device__ __forceinline__ char* inbox_unit(u64 area, const PeerArgs& a, int parity, int from,
                                            int ch, int u, int tid) {
  const i64 row = (((i64)parity * a.nranks + from) * a.inbox_channels + ch) * ONESHOT_UNITS + u;
  return (char*)(area + PEER_INBOX_OFF) + (row * a.inbox_stride + tid) * 32;
}

__device__ __forceinline__ bool ll_ready(uint4 lo, uint4 hi, u32 flag) {
  return lo.y == flag && lo.w == flag && hi.y == flag && hi.w == flag;
}

__device__ void one_shot(const PeerArgs& a, int rank, int ch, Abort* ab) {
  const int n = a.nranks, tid = threadIdx.x, nt = blockDim.x;
  const T* in = (const T*)a.send[rank];
  T* out = (T*)a.recv[rank];
  u64* counter = peer_counter(a.area[rank], ch);
  __shared__ u64 first_round;
  if (tid == 0) first_round = ld_volatile_u64(counter);
  __syncthreads();
  const u64 r0 = first_round;
  const i64 epv = 16 / (i64)sizeof(T);
  const i64 nunits = (a.count + epv - 1) / epv;
  const i64 cta_round = (i64)ONESHOT_UNITS * nt;
  const i64 all_round = cta_round * a.nchannels;
  const i64 rounds = (nunits + all_round - 1) / all_round;
  for (i64 k = 0; k < rounds; k++) {
    const u64 round = r0 + 1 + (u64)k;
    const u32 flag = (u32)round;
    const int parity = (int)(round & 1);
    const i64 base = k * all_round + ch * cta_round + tid;
    uint4 mine[ONESHOT_UNITS];
    bool sent[ONESHOT_UNITS];
#pragma unroll
    for (int u = 0; u < ONESHOT_UNITS; u++) {
      const i64 unit = base + (i64)u * nt;
      sent[u] = u == 0 || unit < nunits;
      mine[u] = unit < nunits ? load_unit<false>(in, unit, a.count) : make_uint4(0u, 0u, 0u, 0u);
    }
    for (int q = 0; q < n; q++) {
      if (q == rank) continue;
#pragma unroll
      for (int u = 0; u < ONESHOT_UNITS; u++) {
        if (sent[u]) {
          char* box = inbox_unit(a.area[q], a, parity, rank, ch, u, tid);
          st_volatile_v4(box, make_uint4(mine[u].x, flag, mine[u].y, flag));
          st_volatile_v4(box + 16, make_uint4(mine[u].z, flag, mine[u].w, flag));
        }
      }
    }
    uint4 acc[ONESHOT_UNITS];
#pragma unroll
    for (int u = 0; u < ONESHOT_UNITS; u++) acc[u] = make_uint4(0u, 0u, 0u, 0u);
    // Peers in groups of PEER_GROUP: every poll of a group is in flight at once.
    for (int q0 = 0; q0 < n; q0 += PEER_GROUP) {
      uint4 lo[PEER_GROUP][ONESHOT_UNITS], hi[PEER_GROUP][ONESHOT_UNITS];
#pragma unroll
      for (int j = 0; j < PEER_GROUP; j++) {
        const int q = q0 + j;
#pragma unroll
        for (int u = 0; u < ONESHOT_UNITS; u++) {
          lo[j][u] = hi[j][u] = make_uint4(0u, 0u, 0u, 0u);
          if (q < n && q != rank && sent[u]) {
            const char* box = inbox_unit(a.area[rank], a, parity, q, ch, u, tid);
            lo[j][u] = ld_volatile_v4(box);
            hi[j][u] = ld_volatile_v4(box + 16);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < PEER_GROUP; j++) {
        const int q = q0 + j;
#pragma unroll
        for (int u = 0; u < ONESHOT_UNITS; u++) {
          if (q < n && q != rank && sent[u]) {
            const char* box = inbox_unit(a.area[rank], a, parity, q, ch, u, tid);
            while (!ll_ready(lo[j][u], hi[j][u], flag)) {
              if (ab->check()) break;
              lo[j][u] = ld_volatile_v4(box);
              hi[j][u] = ld_volatile_v4(box + 16);
            }
          }
        }
      }
#pragma unroll
      for (int j = 0; j < PEER_GROUP; j++) {
        const int q = q0 + j;
        if (q < n) {
#pragma unroll
          for (int u = 0; u < ONESHOT_UNITS; u++) {
            const uint4 v = q == rank ? mine[u]
                                      : make_uint4(lo[j][u].x, lo[j][u].z, hi[j][u].x, hi[j][u].z);
            acc[u] = q == 0 ? v : add_v4<T>(acc[u], v);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < ONESHOT_UNITS; u++) {
      const i64 unit = base + (i64)u * nt;
      if (unit < nunits) store_unit(out, unit, a.count, acc[u]);
    }
  }
  __syncthreads();
  if (tid == 0) *counter = r0 + (u64)rounds;
}

// ---------------------------------------------------------------- TwoShot/Simple
//
// Per call e (the channel's counter + 1), CTA c of rank r:
//   1. barrier 2e with CTA c of every peer: each has entered the call, so its
//      input is ready and it is done with the previous call;
//   2. reduce-scatter: its part c of slice r, read from all n inputs (peers'
//      over NVLink, 16-byte loads), added in rank order,
//   3. all-gather: that sum stored into every rank's output (peers' over
//      NVLink, 16-byte stores);
//   4. barrier 2e+1: every rank's slices are in every output, and no peer
//      will touch this rank's buffers again in this call.
// A barrier: the CTA's threads sync, thread q (one per peer) issues a system
// fence, stores the value into peer q's flag [c][r] and waits until its own
// flag [c][q] reaches the value; then the CTA syncs again. Flags only grow
// (2e, 2e+1, 2e+2, ...) and a rank is never more than one barrier ahead of a
// peer, so ">= value" cannot pass on a flag of an earlier call.
// In place, slice r of every buffer is read and written only by rank r's
// step 2/3 (each element read before it is written, by the same thread);
// other slices are written only after barrier 2e, which their owners pass
// after reading.

__device__ void peer_barrier(const PeerArgs& a, int rank, int ch, u64 value, Abort* ab) {
  __syncthreads();
  const int q = threadIdx.x;
  if (q < a.nranks && q != rank) {
    fence_acq_rel_sys();
    st_relaxed_sys(peer_flag(a.area[q], ch, rank), value);
    const u64* mine = peer_flag(a.area[rank], ch, q);
    while (ld_acquire_sys_u64(mine) < value) {
      if (ab->check()) break;
    }
  }
  __syncthreads();
}

__device__ void two_shot(const PeerArgs& a, int rank, int ch, Abort* ab) {
  const int n = a.nranks, tid = threadIdx.x, nt = blockDim.x;
  u64* counter = peer_counter(a.area[rank], ch);
  __shared__ u64 calls_done;
  if (tid == 0) calls_done = ld_volatile_u64(counter);
  __syncthreads();
  const u64 e = calls_done + 1;
  peer_barrier(a, rank, ch, 2 * e, ab);

  // This CTA's part of this rank's slice; slices and parts are whole
  // 16-byte units, only the buffer's end may be ragged.
  const i64 epv = 16 / (i64)sizeof(T);
  const i64 count = a.count;
  const i64 slice = ((count + n - 1) / n + epv - 1) / epv * epv;
  const i64 s_lo = min(count, (i64)rank * slice);
  const i64 s_hi = min(count, s_lo + slice);
  const i64 part = ((slice + a.nchannels - 1) / a.nchannels + epv - 1) / epv * epv;
  const i64 lo = min(s_hi, s_lo + (i64)ch * part);
  const i64 hi = min(s_hi, lo + part);
  const i64 u_lo = lo / epv;
  const i64 nunits = (hi - lo + epv - 1) / epv;

  for (i64 b = tid; b < nunits; b += (i64)nt * TWOSHOT_UNROLL) {
    uint4 acc[TWOSHOT_UNROLL];
#pragma unroll
    for (int u = 0; u < TWOSHOT_UNROLL; u++) acc[u] = make_uint4(0u, 0u, 0u, 0u);
    // One source at a time, TWOSHOT_UNROLL loads in flight (more units or
    // sources per thread spill at the 64 registers that keep 2 CTAs per SM).
    for (int q = 0; q < n; q++) {
      const T* src = (const T*)a.send[q];
      uint4 x[TWOSHOT_UNROLL];
#pragma unroll
      for (int u = 0; u < TWOSHOT_UNROLL; u++) {
        const i64 v = b + (i64)u * nt;
        x[u] = v < nunits ? load_unit<true>(src, u_lo + v, count) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < TWOSHOT_UNROLL; u++) acc[u] = q == 0 ? x[u] : add_v4<T>(acc[u], x[u]);
    }
    for (int d = 0; d < n; d++) {
      T* dst = (T*)a.recv[d];
#pragma unroll
      for (int u = 0; u < TWOSHOT_UNROLL; u++) {
        const i64 v = b + (i64)u * nt;
        if (v < nunits) store_unit(dst, u_lo + v, count, acc[u]);
      }
    }
  }

  peer_barrier(a, rank, ch, 2 * e + 1, ab);
  if (tid == 0) *counter = e;
}

extern "C" __global__ void __launch_bounds__(PEER_MAX_THREADS, 2) planner_collective(PeerArgs args) {
  Abort ab;
  ab.flag = args.abort_flag;
  ab.aborted = args.aborted;
  ab.spins = 0;
  ab.hit = false;
  if (injected_hang(ab)) return;
  const int local = blockIdx.x / args.nchannels;
  const int ch = blockIdx.x % args.nchannels;
  const int rank = args.first_rank + local;
#if PLANNER_ALGO == PLANNER_ALGO_ONE_SHOT
  one_shot(args, rank, ch, &ab);
#else
  two_shot(args, rank, ch, &ab);
#endif
}
