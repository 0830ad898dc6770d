/* A tiny NCCL program for scripts/device/tuner_smoke.sh: makes a communicator and runs all-reduces (and one
 * broadcast) of several sizes, so that NCCL loads the tuner plugin named by NCCL_TUNER_PLUGIN and calls it.
 *
 *   tuner_smoke one                      1 rank: ncclCommInitAll with device 0
 *   tuner_smoke rank R N IDFILE          rank R of N (ncclCommInitRank); rank 0 writes the unique id to IDFILE,
 *                                        the others wait for it. All ranks use device 0.
 *
 * The NCCL and CUDA declarations are written here from nccl.h (src/nccl.h.in at v2.28.3-1: ncclUniqueId 128 bytes,
 * ncclFloat32 = 7, ncclSum = 0) and the CUDA runtime API, so no NCCL header is needed on the GPU machine; the
 * program links the libnccl.so.2 the script found. Exit status 0 = every call returned success. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op,
                           ncclComm_t comm, void* stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root,
                           ncclComm_t comm, void* stream);
const char* ncclGetErrorString(ncclResult_t result);

typedef int cudaError_t;
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void** ptr, size_t size);
cudaError_t cudaMemset(void* ptr, int value, size_t count);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaStreamCreate(void** stream);
cudaError_t cudaStreamSynchronize(void* stream);
cudaError_t cudaStreamDestroy(void* stream);
const char* cudaGetErrorString(cudaError_t error);

#define NCCL_FLOAT32 7
#define NCCL_SUM 0

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != 0) { \
  fprintf(stderr, "tuner_smoke: %s failed: %s\n", #call, cudaGetErrorString(e_)); exit(2); } } while (0)
#define NCCL(call) do { ncclResult_t r_ = (call); if (r_ != 0) { \
  fprintf(stderr, "tuner_smoke: %s failed: %s\n", #call, ncclGetErrorString(r_)); exit(3); } } while (0)

static const size_t sizes[] = {8, 4096, 65536, 262144, 1048576, 4194304, 16777216};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void run_collectives(ncclComm_t comm, int rank) {
  void* stream;
  void* buf;
  size_t max = sizes[NSIZES - 1];
  CUDA(cudaStreamCreate(&stream));
  CUDA(cudaMalloc(&buf, max));
  CUDA(cudaMemset(buf, 0, max));
  for (size_t i = 0; i < NSIZES; i++) {
    for (int iter = 0; iter < 3; iter++) {
      NCCL(ncclAllReduce(buf, buf, sizes[i] / 4, NCCL_FLOAT32, NCCL_SUM, comm, stream));
    }
    CUDA(cudaStreamSynchronize(stream));
    if (rank == 0) printf("tuner_smoke: all-reduce %zu bytes x3 ok\n", sizes[i]);
  }
  NCCL(ncclBroadcast(buf, buf, 65536 / 4, NCCL_FLOAT32, 0, comm, stream));
  CUDA(cudaStreamSynchronize(stream));
  if (rank == 0) printf("tuner_smoke: broadcast 65536 bytes ok\n");
  CUDA(cudaFree(buf));
  CUDA(cudaStreamDestroy(stream));
}

int main(int argc, char** argv) {
  int version = 0;
  NCCL(ncclGetVersion(&version));
  ncclComm_t comm;
  int rank = 0;
  if (argc >= 2 && strcmp(argv[1], "one") == 0) {
    int dev = 0;
    printf("tuner_smoke: NCCL version code %d, 1 rank\n", version);
    CUDA(cudaSetDevice(0));
    NCCL(ncclCommInitAll(&comm, 1, &dev));
  } else if (argc >= 5 && strcmp(argv[1], "rank") == 0) {
    rank = atoi(argv[2]);
    int nranks = atoi(argv[3]);
    const char* idfile = argv[4];
    ncclUniqueId id;
    CUDA(cudaSetDevice(0));
    if (rank == 0) {
      char tmp[4096];
      snprintf(tmp, sizeof(tmp), "%s.tmp", idfile);
      NCCL(ncclGetUniqueId(&id));
      FILE* f = fopen(tmp, "wb");
      if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, idfile) != 0) {
        fprintf(stderr, "tuner_smoke: cannot write %s\n", idfile);
        return 4;
      }
      printf("tuner_smoke: NCCL version code %d, %d ranks\n", version, nranks);
    } else {
      FILE* f = NULL;
      for (int waited = 0; waited < 600 && !(f = fopen(idfile, "rb")); waited++) usleep(100000);
      if (!f || fread(&id, sizeof(id), 1, f) != 1) {
        fprintf(stderr, "tuner_smoke: no unique id in %s\n", idfile);
        return 4;
      }
      fclose(f);
    }
    NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  } else {
    fprintf(stderr, "usage: tuner_smoke one | tuner_smoke rank R N IDFILE\n");
    return 1;
  }
  run_collectives(comm, rank);
  NCCL(ncclCommDestroy(comm));
  if (rank == 0) printf("tuner_smoke: done\n");
  return 0;
}
