// direct_nccl.cpp — the plain-NCCL baseline of the benchmark: its own communicator and stream.
#include "bench_common.h"
#include "zerotrain/core/check.h"

#if defined(ZT_WITH_CUDA)
#include "zerotrain/core/check_cuda.h"

namespace zt::bench {
namespace {

ncclDataType_t type(DType dt) {
  return dt == DType::F32 ? ncclFloat32 : (dt == DType::BF16 ? ncclBfloat16 : ncclFloat16);
}

class DirectNccl final : public DirectLib {
 public:
  DirectNccl(int ordinal, MPI_Comm comm) : ordinal_(ordinal) {
    int rank = 0, n = 1;
    ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    ZT_MPI_CHECK(MPI_Comm_size(comm, &n));
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ncclUniqueId id{};
    if (rank == 0) ZT_NCCL_CHECK(ncclGetUniqueId(&id));
    ZT_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
    ZT_NCCL_CHECK(ncclCommInitRank(&nccl_, n, id, rank));
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~DirectNccl() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(nccl_);
    cudaStreamDestroy(stream_);
  }
  const char* name() const override { return "NCCL"; }
  void all_reduce(const void* s, void* r, size_t count, DType dt) override {
    ZT_NCCL_CHECK(ncclAllReduce(s, r, count, type(dt), ncclSum, nccl_, stream_));
  }
  void reduce_scatter(const void* s, void* r, size_t count, DType dt) override {
    ZT_NCCL_CHECK(ncclReduceScatter(s, r, count, type(dt), ncclSum, nccl_, stream_));
  }
  void all_gather(const void* s, void* r, size_t count, DType dt) override {
    ZT_NCCL_CHECK(ncclAllGather(s, r, count, type(dt), nccl_, stream_));
  }
  void broadcast(void* buf, size_t count, DType dt, int root) override {
    ZT_NCCL_CHECK(ncclBroadcast(buf, buf, count, type(dt), root, nccl_, stream_));
  }
  void synchronize() override { ZT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  int ordinal_;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<DirectLib> make_direct_nccl(int ordinal, MPI_Comm comm) {
  return std::make_unique<DirectNccl>(ordinal, comm);
}

}  // namespace zt::bench
#else
namespace zt::bench {
std::unique_ptr<DirectLib> make_direct_nccl(int, MPI_Comm) {
  throw InputError("--device cuda: this zerotrain was built without the CUDA backend");
}
}  // namespace zt::bench
#endif
