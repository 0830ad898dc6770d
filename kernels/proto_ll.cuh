// LL protocol: 16-byte lines {data lo, flag, data hi, flag}, 8 data bytes per
// line, flag = step + 1, each line written with one 16-byte store. The
// receiver spins until both flags of a line carry its step's flag; no fence,
// no tail. One FIFO slot (step) per operation; the receiver hands the slot
// back through `head` after a barrier, the sender waits for room before it
// writes (NCCL's prims_ll.h scheme).

template<typename T, int MAXR, int MAXS>
struct PrimsLL {
  const int tid, nthreads, bar;
  int nrecv, nsend;
  const Conn* recv[MAXR > 0 ? MAXR : 1];  // into the shared-memory descriptor
  const Conn* send[MAXS > 0 ? MAXS : 1];
  u64 recv_step[MAXR > 0 ? MAXR : 1];
  u64 send_step[MAXS > 0 ? MAXS : 1];
  int step_lines;
  Abort* abort;

  __device__ PrimsLL(int tid_, int nthreads_, int bar_, const Conn* recvs, int nrecv_,
                     const Conn* sends, int nsend_, const KernelArgs& args, Abort* ab)
      : tid(tid_), nthreads(nthreads_), bar(bar_), nrecv(nrecv_), nsend(nsend_), abort(ab) {
    step_lines = args.step_bytes / 16;
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nrecv) { recv[i] = &recvs[i]; recv_step[i] = *recv[i]->step; }
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < nsend) { send[i] = &sends[i]; send_step[i] = *send[i]->step; }
  }

  __device__ __forceinline__ void barrier() { named_barrier(bar, nthreads); }

  __device__ void finish() {
    barrier();
    save_steps<MAXR, MAXS>(tid, recv, recv_step, nrecv, send, send_step, nsend);
  }

  __device__ __forceinline__ uint4* slot(const Conn& c, u64 step) {
    return (uint4*)(c.buff + (size_t)(step % PLANNER_FIFO_STEPS) * step_lines * 16);
  }

  // 8 bytes of user data (fewer at the ragged end: the rest reads as 0).
  __device__ __forceinline__ u64 load_data(const T* p, int n) {
    const int per = 8 / sizeof(T);
    if (n >= per) return *(const u64*)p;
    u64 v = 0;
    for (int i = 0; i < n; i++) v |= (u64)load_elem<T>(p + i) << (8 * sizeof(T) * i);
    return v;
  }
  __device__ __forceinline__ void store_data(T* p, u64 v, int n) {
    const int per = 8 / sizeof(T);
    if (n >= per) { *(u64*)p = v; return; }
    const u32 mask = sizeof(T) == 4 ? 0xffffffffu : 0xffffu;
    for (int i = 0; i < n; i++) store_elem<T>(p + i, (u32)(v >> (8 * sizeof(T) * i)) & mask);
  }

  __device__ __forceinline__ u64 read_line(const uint4* line, u32 flag) {
    uint4 v;
    do {
      v = ld_volatile_v4(line);
      if (v.y == flag && v.w == flag) break;
    } while (!abort->check());
    return ((u64)v.z << 32) | v.x;
  }

  template<int RECV, int SEND, int SRC, int DST>
  __device__ void op(const T* src, T* dst, int nelem) {
    const int nr = RECV ? nrecv : 0;
    const int ns = SEND ? nsend : 0;
    if (nelem < 0) nelem = 0;
    if (SEND) {
      wait_send_slot<MAXS>(tid, ns, send, send_step, abort);
      barrier();
    }
    const int per = 8 / sizeof(T);
    const int nlines = (nelem + per - 1) / per;
    uint4* rslot[MAXR > 0 ? MAXR : 1];
    uint4* sslot[MAXS > 0 ? MAXS : 1];
    u32 rflag[MAXR > 0 ? MAXR : 1];
    u32 sflag[MAXS > 0 ? MAXS : 1];
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nr) { rslot[i] = slot(*recv[i], recv_step[i]); rflag[i] = (u32)(recv_step[i] + 1); }
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < ns) { sslot[i] = slot(*send[i], send_step[i]); sflag[i] = (u32)(send_step[i] + 1); }
    for (int l = tid; l < nlines; l += nthreads) {
      const int n = min(per, nelem - l * per);
      u64 data = 0;
      if (SRC) data = load_data(src + (size_t)l * per, n);
#pragma unroll
      for (int i = 0; i < MAXR; i++) {
        if (i < nr) {
          u64 peer = read_line(rslot[i] + l, rflag[i]);
          data = (SRC || i > 0) ? add_u64<T>(data, peer) : peer;
        }
      }
#pragma unroll
      for (int i = 0; i < MAXS; i++) {
        if (i < ns) {
          uint4 line = make_uint4((u32)data, sflag[i], (u32)(data >> 32), sflag[i]);
          st_volatile_v4(sslot[i] + l, line);
        }
      }
      if (DST) store_data(dst + (size_t)l * per, data, n);
    }
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < ns) send_step[i] += 1;
    if (RECV) {
#pragma unroll
      for (int i = 0; i < MAXR; i++) if (i < nr) recv_step[i] += 1;
      // Every thread is done with the slot: hand it back.
      barrier();
#pragma unroll
      for (int i = 0; i < MAXR; i++)
        if (i < nr && tid == i) st_relaxed_sys(recv[i]->head, recv_step[i]);
    }
  }
};
