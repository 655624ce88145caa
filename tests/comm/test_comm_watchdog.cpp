// Watchdog scenarios (run by expect_hang_report.sh). Default: the last rank skips collective #2
// and goes on to a barrier, so rank n-1 waits in barrier #2 while the others wait in all_reduce
// #2. "gather_strings" / "max_over_ranks": the others wait in that control-plane exchange as #2
// instead (host-side, not on the data path), which the watchdog must catch the same way
// (gather_strings at 2 ranks: its root waits for the last rank). The job
// must end non-zero within the timeout plus a few seconds, each rank naming #2.
#include <cstdio>
#include <cstring>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"

int main(int argc, char** argv) {
  zt::MpiEnvironment env(&argc, &argv);
  const char* scenario = argc > 1 ? argv[1] : "all_reduce";
  auto dev = zt::make_cpu_device();
  auto comm = zt::make_communicator(*dev);  // timeout from ZT_COMM_TIMEOUT_S
  const int n = comm->world_size(), r = comm->rank();
  std::vector<float> x(1000, 1.0f);
  comm->all_reduce(x.data(), x.data(), x.size(), zt::DType::F32, zt::ReduceOp::Sum, "warm-up");
  comm->synchronize();
  if (x[0] != static_cast<float>(n)) return 10;  // the working case must work
  if (r == n - 1) {
    comm->barrier("after-the-skip");
  } else if (!std::strcmp(scenario, "gather_strings")) {
    comm->gather_strings("report of rank " + std::to_string(r), 0, "bucket 7");
  } else if (!std::strcmp(scenario, "max_over_ranks")) {
    comm->max_over_ranks({r}, "bucket 7");
  } else {
    comm->all_reduce(x.data(), x.data(), x.size(), zt::DType::F32, zt::ReduceOp::Sum, "bucket 7");
  }
  comm->synchronize();  // never returns: the watchdog takes the job down
  std::printf("rank %d: UNEXPECTED: the skipped collective completed\n", r);
  return 0;
}
