// Simple protocol: bulk 16-byte copies into the peer's FIFO slot, a barrier,
// then one thread issues a system-scope fence and stores the new `tail`. The
// receiver waits on `tail`, the sender on the receiver's `head`, and may run
// up to PLANNER_FIFO_STEPS slots ahead. An operation is cut into
// `slices_per_chunk` slices of `steps_per_slice` slots each, every slice
// posted on its own (NCCL's ProtoSimple<SlicePerChunk, StepPerSlice>).
//
// From 96 threads on, the last warp is a sync warp that copies nothing: it
// issues the system fence and the tail store after each slice while the
// other warps (the workers, synchronised by their own barrier) already copy
// the next slice, so the fence's wait is hidden (NCCL's extra sync warp).

#define SIMPLE_UNROLL 8

// dst[k] = sum(srcs) for every destination, 16 bytes per access, SIMPLE_UNROLL
// accesses in flight per thread. Sources from `nuser` on are FIFO slots
// written by a peer (read around L1). All pointers are 16-byte aligned.
// Arrays are indexed by unrolled constants only, so they stay in registers.
template<typename T, int MAXSRC, int MAXDST>
__device__ __forceinline__ void reduce_copy(int tid, int nthreads,
    const char* const (&srcs)[MAXSRC], int nsrc, int nuser, char* const (&dsts)[MAXDST], int ndst, int nelem) {
  const int elems_per_vec = 16 / sizeof(T);
  const int nvec = nelem / elems_per_vec;
  // Whole hunks: warp w takes hunks w, w + nwarps, ...; a hunk is
  // SIMPLE_UNROLL x 32 vectors, lane l taking vectors l, l + 32, ...
  const int hunk = SIMPLE_UNROLL * 32;
  const int nhunks = nvec / hunk;
  const int nwarps = nthreads / 32;
  const int lane = tid % 32;
  for (int h = tid / 32; h < nhunks; h += nwarps) {
    const size_t base = ((size_t)h * hunk + lane) * 16;
    uint4 acc[SIMPLE_UNROLL];
#pragma unroll
    for (int u = 0; u < SIMPLE_UNROLL; u++) {
      const char* p = srcs[0] + base + u * 512;
      acc[u] = nuser == 0 ? ld_volatile_v4(p) : ld_v4(p);
    }
#pragma unroll
    for (int s = 1; s < MAXSRC; s++) {
      if (s < nsrc) {
        uint4 x[SIMPLE_UNROLL];
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) {
          const char* p = srcs[s] + base + u * 512;
          x[u] = s >= nuser ? ld_volatile_v4(p) : ld_v4(p);
        }
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) acc[u] = add_v4<T>(acc[u], x[u]);
      }
    }
#pragma unroll
    for (int d = 0; d < MAXDST; d++) {
      if (d < ndst) {
#pragma unroll
        for (int u = 0; u < SIMPLE_UNROLL; u++) st_v4(dsts[d] + base + u * 512, acc[u]);
      }
    }
  }
  // Remaining whole vectors, one at a time.
  for (int v = nhunks * hunk + tid; v < nvec; v += nthreads) {
    uint4 acc = nuser == 0 ? ld_volatile_v4(srcs[0] + (size_t)v * 16) : ld_v4(srcs[0] + (size_t)v * 16);
#pragma unroll
    for (int s = 1; s < MAXSRC; s++) {
      if (s < nsrc) {
        const char* p = srcs[s] + (size_t)v * 16;
        acc = add_v4<T>(acc, s >= nuser ? ld_volatile_v4(p) : ld_v4(p));
      }
    }
#pragma unroll
    for (int d = 0; d < MAXDST; d++)
      if (d < ndst) st_v4(dsts[d] + (size_t)v * 16, acc);
  }
  // Ragged tail: single elements.
  for (int e = nvec * elems_per_vec + tid; e < nelem; e += nthreads) {
    u32 acc = 0;
#pragma unroll
    for (int s = 0; s < MAXSRC; s++) {
      if (s < nsrc) {
        const T* p = (const T*)srcs[s] + e;
        u32 x = s >= nuser ? load_elem_volatile<T>(p) : load_elem<T>(p);
        acc = s == 0 ? x : Arith<T>::add(acc, x);
      }
    }
#pragma unroll
    for (int d = 0; d < MAXDST; d++)
      if (d < ndst) store_elem<T>((T*)dsts[d] + e, acc);
  }
}

template<typename T, int MAXR, int MAXS>
struct PrimsSimple {
  const int tid, nthreads, bar;
  int nworkers;  // threads that copy; the rest (one warp or none) is the sync warp
  int nrecv, nsend;
  const Conn* recv[MAXR > 0 ? MAXR : 1];  // into the shared-memory descriptor
  const Conn* send[MAXS > 0 ? MAXS : 1];
  u64 recv_step[MAXR > 0 ? MAXR : 1];
  u64 send_step[MAXS > 0 ? MAXS : 1];
  int step_elems, spc, sps;
  Abort* abort;

  __device__ PrimsSimple(int tid_, int nthreads_, int bar_, const Conn* recvs, int nrecv_,
                         const Conn* sends, int nsend_, const KernelArgs& args, Abort* ab)
      : tid(tid_), nthreads(nthreads_), bar(bar_), nrecv(nrecv_), nsend(nsend_), abort(ab) {
    nworkers = (MAXS > 0 && nthreads >= 96) ? nthreads - 32 : nthreads;
    spc = args.slices_per_chunk;
    sps = args.steps_per_slice;
    step_elems = args.step_bytes / (int)sizeof(T);
    const u64 round = (u64)(spc * sps);
    // Both ends round the same way, so they stay in step when operations with
    // different slice shapes share a connection (NCCL's roundUp in loadConn).
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nrecv) {
      recv[i] = &recvs[i];
      recv_step[i] = (*recv[i]->step + round - 1) / round * round;
    }
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < nsend) {
      send[i] = &sends[i];
      send_step[i] = (*send[i]->step + round - 1) / round * round;
    }
  }

  // All threads of the group (bar 1 or 2) / the workers only (bar 3 or 4).
  __device__ __forceinline__ void barrier() { named_barrier(bar, nthreads); }
  __device__ __forceinline__ void worker_barrier() {
    if (nworkers == nthreads) named_barrier(bar, nthreads);
    else named_barrier(bar + 2, nworkers);
  }

  // Save the steps for the next launch.
  __device__ void finish() {
    barrier();
    save_steps<MAXR, MAXS>(tid, recv, recv_step, nrecv, send, send_step, nsend);
  }

  template<int RECV, int SEND, int SRC, int DST>
  __device__ void op(const T* src, T* dst, int nelem) {
    const int nr = RECV ? nrecv : 0;
    const int ns = SEND ? nsend : 0;
    if (nelem < 0) nelem = 0;
    int slice = (nelem + 16 * spc - 1) / (16 * spc) * 16;
    int min_slice = step_elems * sps / 32;
    if (slice < min_slice) slice = min_slice;
    int offset = 0;
    const int send_waiter = nworkers >= 64 ? 32 : 1;
    for (int s = 0; s < spc; s++) {
      int size = nelem - offset;
      if (size > slice) size = slice;
      if (size < 0) size = 0;
      if (tid < nworkers) {
        // Wait: worker 0 for data from every receive peer, another worker for
        // room at every send peer (volatile polls, as NCCL: the data is read
        // around L1 after the barrier).
        if (tid == 0) {
#pragma unroll
          for (int i = 0; i < MAXR; i++) if (i < nr) {
            while (ld_volatile_u64(recv[i]->tail) < recv_step[i] + sps) {
              if (abort->check()) break;
            }
          }
        }
        if (tid == send_waiter) {
#pragma unroll
          for (int i = 0; i < MAXS; i++) if (i < ns) {
            while (ld_volatile_u64(send[i]->head) + PLANNER_FIFO_STEPS < send_step[i] + sps) {
              if (abort->check()) break;
            }
          }
        }
        worker_barrier();
        if (size > 0) {
          // User source first (if any), then the FIFO slots; user destination
          // first (if any), then the peers' slots.
          const char* srcs[MAXR + 1];
          char* dsts[MAXS + 1];
          if (SRC) srcs[0] = (const char*)(src + offset);
#pragma unroll
          for (int i = 0; i < MAXR; i++)
            if (i < nr) srcs[SRC + i] = recv[i]->buff + (size_t)(recv_step[i] % PLANNER_FIFO_STEPS) * step_elems * sizeof(T);
          if (DST) dsts[0] = (char*)(dst + offset);
#pragma unroll
          for (int i = 0; i < MAXS; i++)
            if (i < ns) dsts[DST + i] = send[i]->buff + (size_t)(send_step[i] % PLANNER_FIFO_STEPS) * step_elems * sizeof(T);
          reduce_copy<T, MAXR + 1, MAXS + 1>(tid, nworkers, srcs, SRC + nr, SRC, dsts, DST + ns, size);
        }
      }
      // Everyone: the slice is copied.
      barrier();
#pragma unroll
      for (int i = 0; i < MAXR; i++) if (i < nr) recv_step[i] += sps;
#pragma unroll
      for (int i = 0; i < MAXS; i++) if (i < ns) send_step[i] += sps;
      if (tid == 0) {
        // Our reads of the slot are done (the barrier): hand it back.
#pragma unroll
        for (int i = 0; i < MAXR; i++) if (i < nr) st_relaxed_sys(recv[i]->head, recv_step[i]);
      }
      if (tid == nthreads - 32 && ns > 0) {
        // Every worker's stores into the peer's slot precede the barrier; the
        // fence orders them before the tail at system scope. With a sync warp
        // the workers are already copying the next slice meanwhile.
        fence_acq_rel_sys();
#pragma unroll
        for (int i = 0; i < MAXS; i++) if (i < ns) st_relaxed_sys(send[i]->tail, send_step[i]);
      }
      offset += slice;
    }
  }
};
