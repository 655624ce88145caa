// bench_common.h — the collective benchmark's plug-in interface (nccl-tests style): the shared
// driver (bench_comm.cpp) does arguments, buffers, timing and output; each collective is one
// small file that says how to size its buffers, its bus-bandwidth factor, and how to call it on
// zerotrain's Communicator and directly on the library (plain MPI or plain NCCL).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "zerotrain/comm/communicator.h"

namespace zt::bench {

// The underlying library, called directly: the baseline our numbers are compared with.
class DirectLib {
 public:
  virtual ~DirectLib() = default;
  virtual const char* name() const = 0;  // "MPI" / "NCCL"
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dt) = 0;             // sum
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dt) = 0;    // sum
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType dt) = 0;
  virtual void broadcast(void* buf, size_t count, DType dt, int root) = 0;
  virtual void synchronize() = 0;  // host waits for every call issued so far
};
// Blocking MPI calls on `comm` (bf16/fp16 sums use a user-defined MPI_Op on 16-bit words that
// widens to fp32, adds and rounds per pairwise step: the natural "plain MPI" way).
std::unique_ptr<DirectLib> make_direct_mpi(MPI_Comm comm);
// Its own ncclComm_t and CUDA stream on device `ordinal`. Throws InputError without CUDA.
std::unique_ptr<DirectLib> make_direct_nccl(int ordinal, MPI_Comm comm);

struct Collective {
  const char* name;
  // busbw = algbw · bus_factor(n) (nccl-tests doc/PERFORMANCE.md).
  double (*bus_factor)(int n);
  // The count argument for a full buffer of S bytes (nccl-tests' size), 0 when S is too small.
  size_t (*count_for)(size_t S, int n, size_t elt);
  size_t (*send_elems)(size_t count, int n);
  size_t (*recv_elems)(size_t count, int n);
  void (*ours)(Communicator& c, const void* send, void* recv, size_t count, DType dt);
  void (*direct)(DirectLib& d, const void* send, void* recv, size_t count, DType dt);
  // Result check (nccl-tests' #wrong): element i of rank `rank`'s receive buffer after one call,
  // when every rank k's send buffer (and, for in-place broadcast, receive buffer) holds
  // input_value(k, i).
  float (*expected)(int rank, int n, size_t count, size_t i);
};

// Rank k's element i: 1 or 2, so every sum over up to 128 ranks is an integer <= 256, exact in
// fp32, bf16 and fp16 whatever the reduction order.
inline float input_value(int rank, size_t i) { return 1.0f + static_cast<float>((static_cast<size_t>(rank) + i) % 2); }
inline float sum_over_ranks(int n, size_t i) {
  float s = 0;
  for (int k = 0; k < n; ++k) s += input_value(k, i);
  return s;
}

const Collective& all_reduce_collective();
const Collective& reduce_scatter_collective();
const Collective& all_gather_collective();
const Collective& broadcast_collective();

}  // namespace zt::bench
