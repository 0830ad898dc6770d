// LL128 protocol: 128-byte lines of 120 data bytes and an 8-byte flag
// (step + 1). A warp moves a "warp slice" of 16 lines (2048 wire bytes, 1920
// data bytes) in 4 passes; in each pass lane l stores 16 bytes at wire
// position (pass*32 + l)*16, so the 8 lanes of a line write it with one
// warp-wide store and the line lands whole; lane l%8 == 7 carries the flag in
// its second word. The receiver's flag lanes check the flag, the warp retries
// until every line is complete, then reads the lines again.
//
// Data layout in a warp slice (120 units of 16 bytes; our own mapping):
//   lane l with l%8 != 7, pass p: unit p*28 + (l - l/8), both words;
//   flag lane k = l/8: units 112+2k and 113+2k, one word per pass:
//   pass 0 unit(112+2k).lo, pass 1 .hi, pass 2 unit(113+2k).lo, pass 3 .hi.
// Every access to user memory is a whole 16-byte unit except at the ragged end.

#define LL128_WIRE_BYTES_PER_WARP_SLICE 2048
#define LL128_DATA_BYTES_PER_WARP_SLICE 1920

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
    if (tid == 0) {
#pragma unroll
      for (int i = 0; i < MAXR; i++) if (i < nrecv) *recv[i]->step = recv_step[i];
#pragma unroll
      for (int i = 0; i < MAXS; i++) if (i < nsend) *send[i]->step = send_step[i];
    }
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

  // Gather this lane's 8 words of a warp slice from user memory.
  __device__ __forceinline__ void load_slice(const T* base, int n, u64 (&v)[8]) {
    if (!flag_lane) {
      const int l2 = lane - lane / 8;
#pragma unroll
      for (int p = 0; p < 4; p++) {
        uint4 u = load_unit(base, p * 28 + l2, n);
        v[2 * p] = ((u64)u.y << 32) | u.x;
        v[2 * p + 1] = ((u64)u.w << 32) | u.z;
      }
    } else {
      const int k = lane / 8;
      uint4 a = load_unit(base, 112 + 2 * k, n);
      uint4 b = load_unit(base, 113 + 2 * k, n);
      v[0] = ((u64)a.y << 32) | a.x;
      v[2] = ((u64)a.w << 32) | a.z;
      v[4] = ((u64)b.y << 32) | b.x;
      v[6] = ((u64)b.w << 32) | b.z;
      v[1] = v[3] = v[5] = v[7] = 0;
    }
  }
  __device__ __forceinline__ void store_slice(T* base, int n, const u64 (&v)[8]) {
    if (!flag_lane) {
      const int l2 = lane - lane / 8;
#pragma unroll
      for (int p = 0; p < 4; p++) {
        uint4 u = make_uint4((u32)v[2 * p], (u32)(v[2 * p] >> 32), (u32)v[2 * p + 1], (u32)(v[2 * p + 1] >> 32));
        store_unit(base, p * 28 + l2, n, u);
      }
    } else {
      const int k = lane / 8;
      uint4 a = make_uint4((u32)v[0], (u32)(v[0] >> 32), (u32)v[2], (u32)(v[2] >> 32));
      uint4 b = make_uint4((u32)v[4], (u32)(v[4] >> 32), (u32)v[6], (u32)(v[6] >> 32));
      store_unit(base, 112 + 2 * k, n, a);
      store_unit(base, 113 + 2 * k, n, b);
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
    if (SEND) {
#pragma unroll
      for (int i = 0; i < MAXS; i++) {
        if (i < ns && tid == i) {
          while (ld_acquire_sys(send[i]->head) + PLANNER_FIFO_STEPS < send_step[i] + 1) {
            if (abort->check()) break;
          }
        }
      }
    }
    barrier();
    const int per_slice = LL128_DATA_BYTES_PER_WARP_SLICE / sizeof(T);
    const char* rslot[MAXR > 0 ? MAXR : 1];
    char* sslot[MAXS > 0 ? MAXS : 1];
#pragma unroll
    for (int i = 0; i < MAXR; i++) if (i < nr) rslot[i] = recv[i]->buff + (size_t)(recv_step[i] % PLANNER_FIFO_STEPS) * step_bytes;
#pragma unroll
    for (int i = 0; i < MAXS; i++) if (i < ns) sslot[i] = send[i]->buff + (size_t)(send_step[i] % PLANNER_FIFO_STEPS) * step_bytes;
    for (int ws = warp; ws * per_slice < nelem; ws += nwarps) {
      const int n = min(per_slice, nelem - ws * per_slice);
      u64 v[8];
      if (SRC) load_slice(src + (size_t)ws * per_slice, n, v);
#pragma unroll
      for (int i = 0; i < MAXR; i++) {
        if (i < nr) {
          u64 r[8];
          recv_slice(rslot[i] + (size_t)ws * LL128_WIRE_BYTES_PER_WARP_SLICE, recv_step[i] + 1, r);
#pragma unroll
          for (int w = 0; w < 8; w++) v[w] = (SRC || i > 0) ? add_u64<T>(v[w], r[w]) : r[w];
        }
      }
#pragma unroll
      for (int i = 0; i < MAXS; i++) {
        if (i < ns) {
          char* p = sslot[i] + (size_t)ws * LL128_WIRE_BYTES_PER_WARP_SLICE + lane * 16;
          const u64 flag = send_step[i] + 1;
#pragma unroll
          for (int q = 0; q < 4; q++) st_volatile_v2u64(p + q * 512, v[2 * q], flag_lane ? flag : v[2 * q + 1]);
        }
      }
      if (DST) store_slice(dst + (size_t)ws * per_slice, n, v);
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
