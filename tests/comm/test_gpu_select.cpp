// GPU selection at start-up (mpi_env.h): which ordinal a rank drives, and the node-local check
// that no two ranks drive the same GPU. The decisions are pure and tested directly; the
// collective check runs over real MPI ranks with made-up bus ids (no GPU needed).
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/check.h"

using namespace zt;

namespace {
std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(CudaOrdinal, SeveralVisibleDevicesUseTheLocalRank) {
  EXPECT_EQ(cuda_ordinal_for_local_rank(0, 8, 8), 0);
  EXPECT_EQ(cuda_ordinal_for_local_rank(5, 8, 8), 5);
  EXPECT_EQ(cuda_ordinal_for_local_rank(1, 2, 8), 1);  // fewer ranks than GPUs is fine
}

TEST(CudaOrdinal, OneVisibleDevicePerRankUsesIt) {
  // Slurm --gpus-per-task=1 or CUDA_VISIBLE_DEVICES per rank: each rank sees only its own GPU.
  EXPECT_EQ(cuda_ordinal_for_local_rank(0, 1, 1), 0);
  EXPECT_EQ(cuda_ordinal_for_local_rank(3, 4, 1), 0);
  EXPECT_EQ(cuda_ordinal_for_local_rank(7, 8, 1), 0);
}

TEST(CudaOrdinal, OversubscriptionAndNoDeviceAreRefused) {
  const std::string over = input_error([] { cuda_ordinal_for_local_rank(2, 4, 2); });
  EXPECT_NE(over.find("runs 4 ranks"), std::string::npos) << over;
  EXPECT_NE(over.find("only 2 GPUs"), std::string::npos) << over;
  EXPECT_NE(over.find("one rank per GPU"), std::string::npos) << over;
  const std::string none = input_error([] { cuda_ordinal_for_local_rank(0, 1, 0); });
  EXPECT_NE(none.find("no CUDA device is visible"), std::string::npos) << none;
}

TEST(SharedDevices, DistinctBusIdsAreFine) {
  EXPECT_TRUE(find_shared_devices({}).empty());
  EXPECT_TRUE(find_shared_devices({{0, "0000:1B:00.0"}}).empty());
  EXPECT_TRUE(find_shared_devices({{0, "0000:1B:00.0"}, {1, "0000:43:00.0"}, {2, "0000:52:00.0"}}).empty());
  EXPECT_EQ(shared_devices_message({}, "node7"), "");
}

TEST(SharedDevices, GroupsEveryRepeatedBusIdWithSortedRanks) {
  auto shared = find_shared_devices(
      {{4, "0000:43:00.0"}, {1, "0000:1B:00.0"}, {3, "0000:1B:00.0"}, {2, "0000:52:00.0"}, {0, "0000:43:00.0"},
       {5, "0000:1B:00.0"}});
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(shared[0].bus_id, "0000:43:00.0");  // order of first appearance
  EXPECT_EQ(shared[0].ranks, (std::vector<int>{0, 4}));
  EXPECT_EQ(shared[1].bus_id, "0000:1B:00.0");
  EXPECT_EQ(shared[1].ranks, (std::vector<int>{1, 3, 5}));
  const std::string msg = shared_devices_message(shared, "node7");
  EXPECT_NE(msg.find("host node7: ranks 0 and 4 share GPU 0000:43:00.0; ranks 1, 3 and 5 share GPU 0000:1B:00.0"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--gpus-per-task=1"), std::string::npos) << msg;
}

// Collective check over real ranks (all on this host, so all node-local) with invented bus ids.
TEST(SharedDevices, CollectiveCheckPassesOnDistinctIds) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_EQ(input_error([&] { check_distinct_local_devices(MPI_COMM_WORLD, "0000:" + std::to_string(16 + rank) + ":00.0"); }),
            "");
}

TEST(SharedDevices, CollectiveCheckFailsOnEveryRankWhenTwoShare) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs two ranks to share a GPU";
  // Ranks 0 and the last one claim the same GPU; the others get their own.
  const std::string bus = rank == size - 1 ? "0000:AA:00.0" : "0000:" + std::to_string(10 + rank) + ":00.0";
  const std::string mine = rank == 0 ? "0000:AA:00.0" : bus;
  const std::string msg = input_error([&] { check_distinct_local_devices(MPI_COMM_WORLD, mine); });
  const std::string want = "ranks 0 and " + std::to_string(size - 1) + " share GPU 0000:AA:00.0";
  EXPECT_NE(msg.find(want), std::string::npos) << "rank " << rank << ": " << msg;
  EXPECT_NE(msg.find("host " + process_info().host), std::string::npos) << msg;
}
