// Communicator::gather_strings: the host-side gather the trainer's reports use (rank map,
// memory-report JSON). Strings of different lengths (incl. empty and NUL bytes) reach the root in
// rank order; other ranks get nothing; it runs after collectives already issued on the stream.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"

using namespace zt;

namespace {

// Rank r's string: r copies of a rank-specific pattern (rank 0: empty), with an embedded NUL.
std::string payload(int rank) {
  std::string s;
  for (int i = 0; i < rank; ++i) s += "rank " + std::to_string(rank) + std::string(1, '\0') + ";";
  return s;
}

}  // namespace

TEST(CommHostGather, EveryRanksStringAtEachRootInRankOrder) {
  auto dev = make_cpu_device();
  std::unique_ptr<Communicator> comm = make_mpi_communicator(*dev);
  const int n = comm->world_size();
  for (int root = 0; root < n; ++root) {
    std::vector<std::string> all = comm->gather_strings(payload(comm->rank()), root);
    if (comm->rank() != root) {
      EXPECT_TRUE(all.empty()) << "root " << root;
      continue;
    }
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], payload(r)) << "root " << root << ", from rank " << r;
  }
}

TEST(CommHostGather, RunsAfterCollectivesAlreadyIssued) {
  auto dev = make_cpu_device();
  std::unique_ptr<Communicator> comm = make_mpi_communicator(*dev);
  const int n = comm->world_size();
  std::vector<float> x(1 << 16, static_cast<float>(comm->rank() + 1));
  comm->all_reduce(x.data(), x.data(), x.size(), DType::F32, ReduceOp::Sum, "before gather");
  std::vector<std::string> all = comm->gather_strings(std::to_string(comm->rank()), 0);
  // No synchronize(): the all_reduce issued before the gather has completed when it returns.
  const float sum = static_cast<float>(n * (n + 1) / 2);
  EXPECT_EQ(x.front(), sum);
  EXPECT_EQ(x.back(), sum);
  if (comm->rank() == 0) {
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], std::to_string(r));
  }
  comm->barrier("after gather");  // the stream keeps working after a host gather
  comm->synchronize();
  EXPECT_EQ(comm->log().stats(CommOp::Barrier).calls, 1u);
}
