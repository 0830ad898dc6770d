// planner executor: the collectives. One CTA per (rank, channel); its loops
// are the schedule of src/exec/schedule.rs (`ops`), which the CPU tests play
// through. Compiled once per (collective, algorithm, protocol, type) with
//   PLANNER_T     float | planner_bf16 | planner_f16
//   PLANNER_COLL  PLANNER_COLL_ALL_REDUCE | _ALL_GATHER | _REDUCE_SCATTER | _BROADCAST
//   PLANNER_ALGO  PLANNER_ALGO_RING | PLANNER_ALGO_TREE
//   PLANNER_PROTO PLANNER_PROTO_LL | PLANNER_PROTO_LL128 | PLANNER_PROTO_SIMPLE
// defined by src/exec/kernels.rs ahead of this file.

#if PLANNER_PROTO == PLANNER_PROTO_LL
#define PRIMS PrimsLL
#elif PLANNER_PROTO == PLANNER_PROTO_LL128
#define PRIMS PrimsLL128
#else
#define PRIMS PrimsSimple
#endif

typedef PLANNER_T T;

// The part of this channel's elements that operation `c` of a ring loop covers.
__device__ __forceinline__ int piece_nelem(i64 rem, i64 chunk_count, int c) {
  const i64 co = c * chunk_count;
  const i64 n = rem > co ? (rem - co < chunk_count ? rem - co : chunk_count) : 0;
  return (int)n;
}

__device__ void ring_all_reduce(const KernelArgs& a, const ChannelDesc& d, const T* in, T* out,
                                i64 part_off, i64 part_count, Abort* ab) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int n = a.nranks;
  PRIMS<T, 1, 1> prims(tid, nthreads, 1, &d.ring_recv, 1, &d.ring_send, 1, a, ab);
  const i64 chunk = a.chunk_elems;
  const i64 loop_count = (i64)n * chunk;
  const int align = 16 / sizeof(T);
  const int k = d.ring_index;
  for (i64 elem_off = 0; elem_off < part_count; elem_off += loop_count) {
    const i64 rem = part_count - elem_off;
    i64 chunk_count = chunk;
    if (rem < loop_count) chunk_count = ((rem + n - 1) / n + align - 1) / align * align;
    const i64 base = part_off + elem_off;
    int c = (k + n - 1) % n;
    prims.template op<0, 1, 1, 0>(in + base + c * chunk_count, nullptr, piece_nelem(rem, chunk_count, c));
    for (int j = 2; j < n; j++) {
      c = (k + n - j) % n;
      prims.template op<1, 1, 1, 0>(in + base + c * chunk_count, nullptr, piece_nelem(rem, chunk_count, c));
    }
    c = k;
    prims.template op<1, 1, 1, 1>(in + base + c * chunk_count, out + base + c * chunk_count, piece_nelem(rem, chunk_count, c));
    for (int j = 1; j < n - 1; j++) {
      c = (k + n - j) % n;
      prims.template op<1, 1, 0, 1>(nullptr, out + base + c * chunk_count, piece_nelem(rem, chunk_count, c));
    }
    c = (k + 1) % n;
    prims.template op<1, 0, 0, 1>(nullptr, out + base + c * chunk_count, piece_nelem(rem, chunk_count, c));
  }
  prims.finish();
}

__device__ void tree_all_reduce(const KernelArgs& a, const ChannelDesc& d, const T* in, T* out,
                                i64 part_off, i64 part_count, Abort* ab) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const i64 chunk = a.chunk_elems;
  if (!d.tree_has_up) {
    // Root: reduce from the children and send the result straight back down.
    PRIMS<T, PLANNER_MAX_ARITY, PLANNER_MAX_ARITY> prims(tid, nthreads, 1, d.tree_recv_down, d.tree_n_down,
                                                         d.tree_send_down, d.tree_n_down, a, ab);
    for (i64 off = 0; off < part_count; off += chunk) {
      const int nelem = (int)(part_count - off < chunk ? part_count - off : chunk);
      prims.template op<1, 1, 1, 1>(in + part_off + off, out + part_off + off, nelem);
    }
    prims.finish();
  } else if (tid < a.tree_up_threads) {
    // Reduce up: children (none on a leaf) plus our input, to the parent.
    PRIMS<T, PLANNER_MAX_ARITY, 1> prims(tid, a.tree_up_threads, 1, d.tree_recv_down, d.tree_n_down,
                                         &d.tree_send_up, 1, a, ab);
    for (i64 off = 0; off < part_count; off += chunk) {
      const int nelem = (int)(part_count - off < chunk ? part_count - off : chunk);
      if (d.tree_n_down == 0) prims.template op<0, 1, 1, 0>(in + part_off + off, nullptr, nelem);
      else prims.template op<1, 1, 1, 0>(in + part_off + off, nullptr, nelem);
    }
    prims.finish();
  } else {
    // Broadcast down: from the parent into our output and on to the children.
    PRIMS<T, 1, PLANNER_MAX_ARITY> prims(tid - a.tree_up_threads, nthreads - a.tree_up_threads, 2,
                                         &d.tree_recv_up, 1, d.tree_send_down, d.tree_n_down, a, ab);
    for (i64 off = 0; off < part_count; off += chunk) {
      const int nelem = (int)(part_count - off < chunk ? part_count - off : chunk);
      if (d.tree_n_down == 0) prims.template op<1, 0, 0, 1>(nullptr, out + part_off + off, nelem);
      else prims.template op<1, 1, 0, 1>(nullptr, out + part_off + off, nelem);
    }
    prims.finish();
  }
}

__device__ void ring_all_gather(const KernelArgs& a, const ChannelDesc& d, const T* in, T* out,
                                i64 part_off, i64 part_count, Abort* ab) {
  const int n = a.nranks;
  PRIMS<T, 1, 1> prims(threadIdx.x, blockDim.x, 1, &d.ring_recv, 1, &d.ring_send, 1, a, ab);
  const i64 count = a.call_count, chunk = a.chunk_elems;
  for (i64 off = 0; off < part_count; off += chunk) {
    const int nelem = (int)(part_count - off < chunk ? part_count - off : chunk);
    const i64 data = part_off + off;
    prims.template op<0, 1, 1, 1>(in + data, out + d.user_ranks[0] * count + data, nelem);
    for (int j = 1; j < n - 1; j++)
      prims.template op<1, 1, 0, 1>(nullptr, out + d.user_ranks[n - j] * count + data, nelem);
    prims.template op<1, 0, 0, 1>(nullptr, out + d.user_ranks[1] * count + data, nelem);
  }
  prims.finish();
}

__device__ void ring_reduce_scatter(const KernelArgs& a, const ChannelDesc& d, const T* in, T* out,
                                    i64 part_off, i64 part_count, Abort* ab) {
  const int n = a.nranks;
  PRIMS<T, 1, 1> prims(threadIdx.x, blockDim.x, 1, &d.ring_recv, 1, &d.ring_send, 1, a, ab);
  const i64 count = a.call_count, chunk = a.chunk_elems;
  for (i64 off = 0; off < part_count; off += chunk) {
    const int nelem = (int)(part_count - off < chunk ? part_count - off : chunk);
    const i64 data = part_off + off;
    prims.template op<0, 1, 1, 0>(in + d.user_ranks[n - 1] * count + data, nullptr, nelem);
    for (int j = 2; j < n; j++)
      prims.template op<1, 1, 1, 0>(in + d.user_ranks[n - j] * count + data, nullptr, nelem);
    prims.template op<1, 0, 1, 1>(in + d.user_ranks[0] * count + data, out + data, nelem);
  }
  prims.finish();
}

__device__ void ring_broadcast(const KernelArgs& a, const ChannelDesc& d, const T* in, T* out,
                               i64 part_off, i64 part_count, Abort* ab) {
  const int n = a.nranks;
  PRIMS<T, 1, 1> prims(threadIdx.x, blockDim.x, 1, &d.ring_recv, 1, &d.ring_send, 1, a, ab);
  const i64 chunk = a.chunk_elems;
  const int next = d.user_ranks[1 % n];
  for (i64 off = 0; off < part_count; off += chunk) {
    const int nelem = (int)(part_count - off < chunk ? part_count - off : chunk);
    const i64 data = part_off + off;
    if (d.rank == a.root) prims.template op<0, 1, 1, 1>(in + data, out + data, nelem);
    else if (next == a.root) prims.template op<1, 0, 0, 1>(nullptr, out + data, nelem);
    else prims.template op<1, 1, 0, 1>(nullptr, out + data, nelem);
  }
  prims.finish();
}

// One rank: the collective is a copy (skipped in place), in pieces that keep
// element indices within int.
__device__ void local_copy(const T* in, T* out, i64 off, i64 count) {
  if (in == out) return;
  const i64 piece = (i64)1 << 28;
  for (i64 done = 0; done < count; done += piece) {
    const int n = (int)(count - done < piece ? count - done : piece);
    const char* srcs[1] = {(const char*)(in + off + done)};
    char* dsts[1] = {(char*)(out + off + done)};
    reduce_copy<T, 1, 1>(threadIdx.x, blockDim.x, srcs, 1, 1, dsts, 1, n);
  }
}

extern "C" __global__ void __launch_bounds__(640) planner_collective(KernelArgs args) {
  __shared__ ChannelDesc desc;
  // Copy this CTA's descriptor into shared memory, 4 bytes per thread.
  {
    const int words = sizeof(ChannelDesc) / 4;
    const u32* from = (const u32*)&args.desc[blockIdx.x];
    u32* to = (u32*)&desc;
    for (int i = threadIdx.x; i < words; i += blockDim.x) to[i] = from[i];
  }
  __syncthreads();
  Abort ab;
  ab.flag = args.abort_flag;
  ab.aborted = args.aborted;
  ab.spins = 0;
  ab.hit = false;
  if (injected_hang(ab)) return;
  const int ch = desc.channel;
  const T* in = (const T*)args.send[desc.local_rank];
  T* out = (T*)args.recv[desc.local_rank];
  const i64 part_off = args.chan_off[ch];
  const i64 part_count = args.chan_count[ch];
  if (args.nranks == 1) {
    local_copy(in, out, part_off, part_count);
    return;
  }
#if PLANNER_COLL == PLANNER_COLL_ALL_REDUCE && PLANNER_ALGO == PLANNER_ALGO_RING
  ring_all_reduce(args, desc, in, out, part_off, part_count, &ab);
#elif PLANNER_COLL == PLANNER_COLL_ALL_REDUCE && PLANNER_ALGO == PLANNER_ALGO_TREE
  tree_all_reduce(args, desc, in, out, part_off, part_count, &ab);
#elif PLANNER_COLL == PLANNER_COLL_ALL_GATHER
  ring_all_gather(args, desc, in, out, part_off, part_count, &ab);
#elif PLANNER_COLL == PLANNER_COLL_REDUCE_SCATTER
  ring_reduce_scatter(args, desc, in, out, part_off, part_count, &ab);
#else
  ring_broadcast(args, desc, in, out, part_off, part_count, &ab);
#endif
}
