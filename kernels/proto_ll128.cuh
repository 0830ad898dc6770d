// LL128 protocol: 128-byte lines of 120 data bytes and an 8-byte flag
// (step + 1). A warp moves a "warp slice" of 16 lines (2048 wire bytes, 1920
// data bytes) in 4 passes; in each pass lane l stores 16 bytes at wire
// position (pass*32 + l)*16, so the 8 lanes of a line write it with one
// warp-wide store and the line lands whole; lane l%8 == 7 carries the flag in
// its second word. The receiver's flag lanes check the flag, the warp retries
// until every line is complete, then reads the lines again.
//
// Data layout in a warp slice (120 units of 16 bytes; our own mapping, the
// same shape as NCCL's): pass g covers one contiguous run of units,
//   unit(g, l) = 32g - 4*(g/2) + l - (g%2)*(l/8);
//   lanes l%8 != 7 hold unit(g, l) whole in pass g (both words);
//   flag lanes hold unit(0, l) and unit(2, l): pass 0 sends unit(0,l).lo,
//   pass 1 unit(0,l).hi, pass 2 unit(2,l).lo, pass 3 unit(2,l).hi.
// Every access to user memory is a whole 16-byte unit except at the ragged end.

#define LL128_WIRE_BYTES_PER_WARP_SLICE 2048
#define LL128_DATA_BYTES_PER_WARP_SLICE 1920
#ifndef LL128_SLICES_PER_ITER
#define LL128_SLICES_PER_ITER 1
#endif

template<typename T, int MAXR, int MAXS>
struct PrimsLL128 {
  const int tid, nthreads, bar;
  const int lane, warp, nwarps;
  const bool flag_lane;
  int nrecv, nsend;
  const Conn* recv[MAXR > 0 ? MAXR : 1];  // into the shared-memory descriptor
  const Conn* send[MAXS > 0 ? MAXS : 1];
  u64 recv_step[MAXR > 0 ? MAXR : 1];
  u64 send_step[MAXS > 0 ? MAXS : 1];
  int step_bytes;
  Abort* abort;

  __device__ PrimsLL128(int tid_, int nthreads_, int bar_, const Conn* recvs, int nrecv_,
                        const Conn* sends, int nsend_, const KernelArgs& args, Abort* ab)
      : tid(tid_), nthreads(nthreads_), bar(bar_), lane(tid_ % 32), warp(tid_ / 32),
        nwarps(nthreads_ / 32), flag_lane(tid_ % 8 == 7), nrecv(nrecv_), nsend(nsend_), abort(ab) {
    step_bytes = args.step_bytes;
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

  // Load the 16-byte unit `unit` of a slice with `n` valid elements.
  __device__ __forceinline__ uint4 load_unit(const T* base, int unit, int n) {
    const int per = 16 / sizeof(T);
    const int first = unit * per;
    if (first + per <= n) return ld_v4(base + first);
    uint4 v = make_uint4(0, 0, 0, 0);
    u32 w[4] = {0, 0, 0, 0};
    for (int e = first; e < n && e < first + per; e++) {
      const int k = e - first;
      const u32 x = load_elem<T>(base + e);
      if (sizeof(T) == 4) w[k] = x;
      else w[k / 2] |= x << (16 * (k % 2));
    }
    v.x = w[0]; v.y = w[1]; v.z = w[2]; v.w = w[3];
    return v;
  }
  __device__ __forceinline__ void store_unit(T* base, int unit, int n, uint4 v) {
    const int per = 16 / sizeof(T);
    const int first = unit * per;
    if (first + per <= n) { st_v4(base + first, v); return; }
    const u32 w[4] = {v.x, v.y, v.z, v.w};
    for (int e = first; e < n && e < first + per; e++) {
      const int k = e - first;
      if (sizeof(T) == 4) store_elem<T>(base + e, w[k]);
      else store_elem<T>(base + e, (w[k / 2] >> (16 * (k % 2))) & 0xffffu);
    }
  }

  // User-memory unit of pass g for this lane (NCCL-like mapping: every pass
  // reads one contiguous run of units; flag lanes take part in passes 0 and 2
  // only, so a warp issues 4 loads per slice).
  __device__ __forceinline__ int unit_of(int g) const {
    return g * 32 - 4 * (g / 2) + lane - (g % 2) * (lane / 8);
  }

  // Gather this lane's 8 words of a warp slice from user memory. Flag lanes
  // end with their two units' words in v[0], v[2], v[4], v[6] (the low word
  // of each wire pass); odd words are don't-care (replaced by the flag).
  __device__ __forceinline__ void load_slice(const T* base, int n, u64 (&v)[8]) {
    const int per = 16 / sizeof(T);
    if (n == LL128_DATA_BYTES_PER_WARP_SLICE / (int)sizeof(T)) {
#pragma unroll
      for (int g = 0; g < 4; g++) {
        if (!flag_lane || g % 2 == 0) {
          const uint4 u = ld_v4(base + unit_of(g) * per);
          v[2 * g] = ((u64)u.y << 32) | u.x;
          v[2 * g + 1] = ((u64)u.w << 32) | u.z;
        }
      }
    } else {
#pragma unroll
      for (int g = 0; g < 4; g++) {
        if (!flag_lane || g % 2 == 0) {
          const uint4 u = load_unit(base, unit_of(g), n);
          v[2 * g] = ((u64)u.y << 32) | u.x;
          v[2 * g + 1] = ((u64)u.w << 32) | u.z;
        }
      }
    }
    if (flag_lane) {
      v[2] = v[1];
      v[6] = v[5];
      v[1] = v[3] = v[5] = v[7] = 0;
    }
  }
  __device__ __forceinline__ void store_slice(T* base, int n, u64 (&v)[8]) {
    const int per = 16 / sizeof(T);
    if (flag_lane) {
      v[1] = v[2];
      v[5] = v[6];
    }
    const bool full = n == LL128_DATA_BYTES_PER_WARP_SLICE / (int)sizeof(T);
#pragma unroll
    for (int g = 0; g < 4; g++) {
      if (!flag_lane || g % 2 == 0) {
        const uint4 u = make_uint4((u32)v[2 * g], (u32)(v[2 * g] >> 32), (u32)v[2 * g + 1], (u32)(v[2 * g + 1] >> 32));
        if (full) st_v4(base + unit_of(g) * per, u);
        else store_unit(base, unit_of(g), n, u);
      }
    }
  }

  // Wait until all 16 lines of this warp slice carry `flag`, then read them.
  __device__ __forceinline__ void recv_slice(const char* wire, u64 flag, u64 (&r)[8]) {
    const char* p = wire + lane * 16;
    bool again;
    do {
      again = false;
#pragma unroll
      for (int q = 0; q < 4; q++) {
        ld_volatile_v2u64(p + q * 512, r[2 * q], r[2 * q + 1]);
        again |= flag_lane && r[2 * q + 1] != flag;
      }
      if (again && abort->check()) again = false;
    } while (__any_sync(0xffffffffu, again));
    // A complete flag means a complete line: read the data again now.
#pragma unroll
    for (int q = 0; q < 4; q++) ld_volatile_v2u64(p + q * 512, r[2 * q], r[2 * q + 1]);
  }

  template<int RECV, int SEND, int SRC, int DST>
  __device__ void op(const T* src, T* dst, int nelem) {
    const int nr = RECV ? nrecv : 0;
    const int ns = SEND ? nsend : 0;
    if (nelem < 0) nelem = 0;
    if (SEND) wait_send_slot<MAXS>(tid, ns, send, send_step, abort);
    barrier();
    const int per_slice = LL128_DATA_BYTES_PER_WARP_SLICE / sizeof(T);
    const char* rslot[MAXR > 0 ? MAXR : 1];
    char* sslot[MAXS > 0 ? MAXS : 1];
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nr) rslot[i] = recv[i]->buff + (size_t)(recv_step[i] % PLANNER_FIFO_STEPS) * step_bytes;
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < ns) sslot[i] = send[i]->buff + (size_t)(send_step[i] % PLANNER_FIFO_STEPS) * step_bytes;
    // Each warp takes LL128_SLICES_PER_ITER warp slices per iteration and
    // loads all their source data up front, so more 16-byte loads are in
    // flight while the first slice's lines are awaited.
    for (int ws0 = warp; ws0 * per_slice < nelem; ws0 += nwarps * LL128_SLICES_PER_ITER) {
      u64 v[LL128_SLICES_PER_ITER][8];
      if (SRC) {
#pragma unroll
        for (int s = 0; s < LL128_SLICES_PER_ITER; s++) {
          const int ws = ws0 + s * nwarps;
          if (ws * per_slice < nelem) load_slice(src + (size_t)ws * per_slice, min(per_slice, nelem - ws * per_slice), v[s]);
        }
      }
#pragma unroll
      for (int s = 0; s < LL128_SLICES_PER_ITER; s++) {
        const int ws = ws0 + s * nwarps;
        if (ws * per_slice >= nelem) break;
        const int n = min(per_slice, nelem - ws * per_slice);
#pragma unroll
        for (int i = 0; i < MAXR; i++) {
          if (i < nr) {
            u64 r[8];
            recv_slice(rslot[i] + (size_t)ws * LL128_WIRE_BYTES_PER_WARP_SLICE, recv_step[i] + 1, r);
#pragma unroll
            for (int w = 0; w < 8; w++) v[s][w] = (SRC || i > 0) ? add_u64<T>(v[s][w], r[w]) : r[w];
          }
        }
#pragma unroll
        for (int i = 0; i < MAXS; i++) {
          if (i < ns) {
            char* p = sslot[i] + (size_t)ws * LL128_WIRE_BYTES_PER_WARP_SLICE + lane * 16;
            const u64 flag = send_step[i] + 1;
#pragma unroll
            for (int q = 0; q < 4; q++) st_volatile_v2u64(p + q * 512, v[s][2 * q], flag_lane ? flag : v[s][2 * q + 1]);
          }
        }
        if (DST) store_slice(dst + (size_t)ws * per_slice, n, v[s]);
      }
    }
    barrier();
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < ns) send_step[i] += 1;
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nr) recv_step[i] += 1;
#pragma unroll
    for (int i = 0; i < MAXR; i++)
      if (i < nr && tid == i) st_relaxed_sys(recv[i]->head, recv_step[i]);
  }
};
