// rank_agreement.h — every rank ends a failed phase together, with one message.
//
// Invariant: a check that may fail on some ranks only (a file visible on one node, an output
// path rank 0 writes, a token shard, a weight slice) runs inside run_agreed(), which is followed
// by a blocking max-reduction over all ranks before any further collective. When any rank failed,
// the lowest failing rank prints its message and every rank throws AgreedFailure with the same
// exit code — so no rank is left waiting in a collective for the hang watchdog.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zt {

// Thrown on every rank once the ranks agreed that a phase failed; the message has been printed.
class AgreedFailure : public std::exception {
 public:
  explicit AgreedFailure(int exit_code) : code_(exit_code) {}
  int exit_code() const { return code_; }
  const char* what() const noexcept override { return "a rank reported an error (printed above)"; }

 private:
  int code_;
};

// Element-wise maximum over all ranks, blocking (MPI_Allreduce).
using MaxOverRanks = std::function<std::vector<int64_t>(const std::vector<int64_t>&)>;

// The start-up agreements over MPI_COMM_WORLD, before a Communicator (with its comm thread)
// exists or beside it, without using it. Each exchange is logged and watched by a hang watchdog
// of its own (timeout ZT_COMM_TIMEOUT_S, 300 s when the variable is unset or invalid — the
// input check reports it), so a rank that never arrives ends the job with exit 3, as in a data
// collective. Construction and destruction are collective over MPI_COMM_WORLD.
class WorldControl {
 public:
  WorldControl();
  ~WorldControl();
  WorldControl(const WorldControl&) = delete;
  WorldControl& operator=(const WorldControl&) = delete;
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  // Element-wise maximum, on every rank.
  std::vector<int64_t> max_over_ranks(const std::vector<int64_t>& mine, const std::string& label = {});
  MaxOverRanks max_fn(const std::string& label = {});
  // Every rank's string, in rank order, on every rank.
  std::vector<std::string> all_gather_strings(const std::string& mine, const std::string& label = {});

 private:
  struct Watch;
  std::unique_ptr<Watch> watch_;
  int rank_ = 0, world_ = 1;
};

// The exit code and message for an exception escaping a command: InputError -> 2, anything
// else -> 1 ("internal error: ..."), AgreedFailure -> its code with no message.
int exit_code_of(const std::exception& e, std::string* message);

// Runs `step` on this rank, then agrees with every rank (see the file comment). `prefix` starts
// the printed line ("zerotrain train").
void run_agreed(const MaxOverRanks& max_over_ranks, int rank, int world, const std::string& prefix,
                const std::function<void()>& step);
// The same, with one more value (>= 0) agreed in the same reduction: returns its maximum over
// ranks when no rank failed (the trainer's per-step "stop requested" flag rides here).
int64_t run_agreed_with(const MaxOverRanks& max_over_ranks, int rank, int world, const std::string& prefix,
                        const std::function<void()>& step, int64_t value);

}  // namespace zt
