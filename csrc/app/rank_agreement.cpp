// rank_agreement.cpp — see rank_agreement.h.
#include "rank_agreement.h"

#include <mpi.h>

#include <cstdio>
#include <new>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/comm/watchdog.h"
#include "zerotrain/core/check.h"

namespace zt {

struct WorldControl::Watch {
  CommLog log{64};
  std::unique_ptr<CommWatchdog> dog;
};

namespace {
double world_timeout_s() {
  try {
    return CommOptions::default_timeout_s();
  } catch (const InputError&) {
    return 300.0;  // the input check names the bad variable; the watchdog keeps its default
  }
}
}  // namespace

WorldControl::WorldControl() : watch_(std::make_unique<Watch>()) {
  ZT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  ZT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_));
  watch_->dog = std::make_unique<CommWatchdog>(watch_->log, world_timeout_s(), MPI_COMM_WORLD, CommWatchdog::Hooks{});
}

WorldControl::~WorldControl() = default;

std::vector<int64_t> WorldControl::max_over_ranks(const std::vector<int64_t>& mine, const std::string& label) {
  std::vector<int64_t> out(mine.size());
  const uint64_t seq =
      watch_->log.issue(CommOp::MaxOverRanks, label, mine.size(), mine.size() * sizeof(int64_t), DType::F32);
  watch_->log.mark_started(seq);
  ZT_MPI_CHECK(MPI_Allreduce(mine.data(), out.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_MAX,
                             MPI_COMM_WORLD));
  watch_->log.mark_completed(seq);
  return out;
}

MaxOverRanks WorldControl::max_fn(const std::string& label) {
  return [this, label](const std::vector<int64_t>& v) { return max_over_ranks(v, label); };
}

std::vector<std::string> WorldControl::all_gather_strings(const std::string& mine, const std::string& label) {
  const uint64_t seq = watch_->log.issue(CommOp::GatherStrings, label, mine.size(), mine.size(), DType::F32);
  watch_->log.mark_started(seq);
  std::vector<std::string> all = exchange_strings(MPI_COMM_WORLD, mine, kAllRanks);
  watch_->log.mark_completed(seq);
  return all;
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

int64_t run_agreed_with(const MaxOverRanks& max_over_ranks, int rank, int world, const std::string& prefix,
                        const std::function<void()>& step, int64_t value) {
  int code = 0;
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    code = exit_code_of(e, &message);
    if (code == 0) code = kExitInternal;
  }
  // [0]: the worst exit code (2 beats 1: a bad input explains an internal failure elsewhere);
  // [1]: world - (lowest failing rank), so the maximum names the lowest failing rank; [2]: value.
  const std::vector<int64_t> v = max_over_ranks({code, code ? world - rank : 0, value});
  if (v[0] == 0) return v[2];
  if (code != 0 && world - rank == v[1] && !message.empty())
    std::fprintf(stderr, "%s: error: %s\n", prefix.c_str(), message.c_str());
  std::fflush(stderr);
  throw AgreedFailure(static_cast<int>(v[0]));
}

void run_agreed(const MaxOverRanks& max_over_ranks, int rank, int world, const std::string& prefix,
                const std::function<void()>& step) {
  run_agreed_with(max_over_ranks, rank, world, prefix, step, 0);
}

}  // namespace zt
