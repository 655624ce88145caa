// direct_mpi.cpp — the plain-MPI baseline of the benchmark (blocking calls on the main thread).
#include <climits>

#include "bench_common.h"
#include "zerotrain/core/check.h"

namespace zt::bench {
namespace {

template <DType D>
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    if (D == DType::BF16) b[i] = f32_to_bf16_bits(bf16_bits_to_f32(a[i]) + bf16_bits_to_f32(b[i]));
    else b[i] = f32_to_f16_bits(f16_bits_to_f32(a[i]) + f16_bits_to_f32(b[i]));
  }
}

class DirectMpi final : public DirectLib {
 public:
  explicit DirectMpi(MPI_Comm parent) {
    ZT_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
    ZT_MPI_CHECK(MPI_Op_create(&half_sum<DType::BF16>, 1, &bf16_sum_));
    ZT_MPI_CHECK(MPI_Op_create(&half_sum<DType::F16>, 1, &f16_sum_));
  }
  ~DirectMpi() override {
    MPI_Op_free(&bf16_sum_);
    MPI_Op_free(&f16_sum_);
    MPI_Comm_free(&comm_);
  }
  const char* name() const override { return "MPI"; }
  void all_reduce(const void* s, void* r, size_t count, DType dt) override {
    ZT_MPI_CHECK(MPI_Allreduce(s, r, as_int(count), type(dt), sum(dt), comm_));
  }
  void reduce_scatter(const void* s, void* r, size_t count, DType dt) override {
    ZT_MPI_CHECK(MPI_Reduce_scatter_block(s, r, as_int(count), type(dt), sum(dt), comm_));
  }
  void all_gather(const void* s, void* r, size_t count, DType dt) override {
    ZT_MPI_CHECK(MPI_Allgather(s, as_int(count), type(dt), r, as_int(count), type(dt), comm_));
  }
  void broadcast(void* buf, size_t count, DType dt, int root) override {
    ZT_MPI_CHECK(MPI_Bcast(buf, as_int(count), type(dt), root, comm_));
  }
  void synchronize() override {}

 private:
  static int as_int(size_t v) {
    ZT_CHECK(v <= static_cast<size_t>(INT_MAX), "count exceeds INT_MAX");
    return static_cast<int>(v);
  }
  static MPI_Datatype type(DType dt) { return dt == DType::F32 ? MPI_FLOAT : MPI_UINT16_T; }
  MPI_Op sum(DType dt) const { return dt == DType::F32 ? MPI_SUM : (dt == DType::BF16 ? bf16_sum_ : f16_sum_); }
  MPI_Comm comm_;
  MPI_Op bf16_sum_, f16_sum_;
};

}  // namespace

std::unique_ptr<DirectLib> make_direct_mpi(MPI_Comm comm) { return std::make_unique<DirectMpi>(comm); }

}  // namespace zt::bench
