// Watchdog scenario (run by expect_hang_report.sh): the last rank skips collective #2 and goes on
// to a barrier, so rank n-1 waits in barrier #2 while the others wait in all_reduce #2. The job
// must end non-zero within the timeout plus a few seconds, each rank naming #2.
#include <cstdio>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"

int main(int argc, char** argv) {
  zt::MpiEnvironment env(&argc, &argv);
  auto dev = zt::make_cpu_device();
  auto comm = zt::make_communicator(*dev);  // timeout from ZT_COMM_TIMEOUT_S
  const int n = comm->world_size(), r = comm->rank();
  std::vector<float> x(1000, 1.0f);
  comm->all_reduce(x.data(), x.data(), x.size(), zt::DType::F32, zt::ReduceOp::Sum, "warm-up");
  comm->synchronize();
  if (x[0] != static_cast<float>(n)) return 10;  // the working case must work
  if (r == n - 1) {
    comm->barrier("after-the-skip");
  } else {
    comm->all_reduce(x.data(), x.data(), x.size(), zt::DType::F32, zt::ReduceOp::Sum, "bucket 7");
  }
  comm->synchronize();  // never returns: the watchdog takes the job down
  std::printf("rank %d: UNEXPECTED: the skipped collective completed\n", r);
  return 0;
}
