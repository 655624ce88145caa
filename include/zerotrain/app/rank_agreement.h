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
// Over MPI_COMM_WORLD: only while no Communicator (with its comm thread) exists yet.
MaxOverRanks world_max_over_ranks();

// The exit code and message for an exception escaping a command: InputError -> 2, anything
// else -> 1 ("internal error: ..."), AgreedFailure -> its code with no message.
int exit_code_of(const std::exception& e, std::string* message);

// Runs `step` on this rank, then agrees with every rank (see the file comment). `prefix` starts
// the printed line ("zerotrain train").
void run_agreed(const MaxOverRanks& max_over_ranks, int rank, int world, const std::string& prefix,
                const std::function<void()>& step);

}  // namespace zt
