// rank_agreement.cpp — see rank_agreement.h.
#include "zerotrain/app/rank_agreement.h"

#include <mpi.h>

#include <cstdio>
#include <new>

#include "zerotrain/core/check.h"

namespace zt {

MaxOverRanks world_max_over_ranks() {
  return [](const std::vector<int64_t>& mine) {
    std::vector<int64_t> out(mine.size());
    ZT_MPI_CHECK(MPI_Allreduce(mine.data(), out.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_MAX,
                               MPI_COMM_WORLD));
    return out;
  };
}

int exit_code_of(const std::exception& e, std::string* message) {
  if (const auto* a = dynamic_cast<const AgreedFailure*>(&e)) {
    message->clear();
    return a->exit_code();
  }
  if (dynamic_cast<const InputError*>(&e)) {
    *message = e.what();
    return kExitBadInput;
  }
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    *message = "internal error: out of host memory (std::bad_alloc)";
    return kExitInternal;
  }
  *message = std::string("internal error: ") + e.what();
  return kExitInternal;
}

void run_agreed(const MaxOverRanks& max_over_ranks, int rank, int world, const std::string& prefix,
                const std::function<void()>& step) {
  int code = 0;
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    code = exit_code_of(e, &message);
    if (code == 0) code = kExitInternal;
  }
  // [0]: the worst exit code (2 beats 1: a bad input explains an internal failure elsewhere);
  // [1]: world - (lowest failing rank), so the maximum names the lowest failing rank.
  const std::vector<int64_t> v = max_over_ranks({code, code ? world - rank : 0});
  if (v[0] == 0) return;
  if (code != 0 && world - rank == v[1] && !message.empty())
    std::fprintf(stderr, "%s: error: %s\n", prefix.c_str(), message.c_str());
  std::fflush(stderr);
  throw AgreedFailure(static_cast<int>(v[0]));
}

}  // namespace zt
