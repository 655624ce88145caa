// Schedule-hash check: equal hashes pass; a different hash on one rank is a clear error on every
// rank, naming that rank — never a hang — and the communicator stays usable afterwards.
#include <gtest/gtest.h>

#include <string>

#include "zerotrain/comm/communicator.h"

using namespace zt;

TEST(CommSchedule, SameHashPasses) {
  auto dev = make_cpu_device();
  auto comm = make_communicator(*dev);
  EXPECT_NO_THROW(comm->verify_same_across_ranks(0x1234abcdull, "bucket plan"));
  EXPECT_EQ(comm->log().stats(CommOp::VerifySame).completed, 1u);
}

TEST(CommSchedule, MismatchNamesTheRank) {
  auto dev = make_cpu_device();
  auto comm = make_communicator(*dev);
  const int n = comm->world_size(), r = comm->rank();
  if (n < 2) GTEST_SKIP() << "a mismatch needs at least 2 ranks";
  const int odd = n - 1;
  const uint64_t hash = r == odd ? 0xdeadbeefull : 0x1234abcdull;
  std::string msg;
  try {
    comm->verify_same_across_ranks(hash, "bucket plan");
    FAIL() << "no error on rank " << r;
  } catch (const CommMismatchError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("bucket plan"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Ranks differing from rank 0: " + std::to_string(odd)), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x00000000deadbeef on rank " + std::to_string(odd)), std::string::npos) << msg;
  // Still in step: a collective after the error completes on every rank.
  float x = 1.0f;
  comm->all_reduce(&x, &x, 1, DType::F32, ReduceOp::Sum, "after");
  comm->synchronize();
  EXPECT_EQ(x, static_cast<float>(n));
}
