// mpi_gtest_main.cpp — gtest main for the multi-rank comm tests: MPI up with the comm layer's
// thread level, full output from rank 0, failures only (tagged) from the other ranks, and
// one exit status for the whole job (the worst over the ranks).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "zerotrain/comm/mpi_env.h"

namespace {
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  zt::MpiEnvironment env(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (env.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(env.rank()));
  }
  int rc = RUN_ALL_TESTS();
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
