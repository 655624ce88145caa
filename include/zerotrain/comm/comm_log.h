// comm_log.h — the per-communicator record of collectives: a small ring of recent entries for
// traces and hang reports, plus running counters per op that never wrap.
//
// Invariants: sequence numbers start at 1 and grow by one per collective issued on the
// communicator (0 means "none"). One communicator runs its collectives on one stream, so they
// complete in issue order: every seq <= last_completed() is complete, and the oldest
// incomplete collective is always last_completed() + 1. Thread-safe (one mutex).
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/core/dtype.h"

namespace zt {

// GatherStrings and MaxOverRanks are the host-side control exchanges (Communicator::gather_strings,
// max_over_ranks): logged and watched like the data collectives, no data-stream buffers.
enum class CommOp : uint8_t {
  AllReduce = 0, ReduceScatter, AllGather, Broadcast, Barrier, VerifySame, GatherStrings, MaxOverRanks, AllToAll,
  kCount
};
constexpr int kNumCommOps = static_cast<int>(CommOp::kCount);
const char* comm_op_name(CommOp op);  // "all_reduce", "reduce_scatter", "all_gather", ...

// A group of ranks a collective runs over (Communicator::prepare_block): the world (block 0); the
// block of `block` consecutive ranks holding this rank, ranks [rank − rank % block, + block) at
// index rank % block; or `across`, one rank of each block — the world / block ranks sharing
// rank % block, at index rank / block. Under blocked placement with block = the ranks per node,
// the first is this rank's node and the second its peers of the same local rank on every node
// (ZeRO++'s hpZ partition and qgZ's two hops).
struct RankGroup {
  int block = 0;
  bool across = false;
  static RankGroup world() { return {}; }
  static RankGroup within(int block) { return {block, false}; }
  static RankGroup spanning(int block) { return {block, true}; }
  int size(int world) const { return block == 0 ? world : across ? world / block : block; }
  int index(int rank) const { return block == 0 ? rank : across ? rank / block : rank % block; }
  // The world rank of member j of `rank`'s group.
  int member(int rank, int j) const { return block == 0 ? j : across ? j * block + rank % block : rank - rank % block + j; }
};

struct CommRecord {
  uint64_t seq = 0;
  CommOp op = CommOp::Barrier;
  std::string label;   // the caller's label (bucket id, unit name); same on every rank by convention
  size_t count = 0;    // the count argument as passed (per-rank count for reduce_scatter/all_gather)
  size_t bytes = 0;    // full buffer size S, as nccl-tests defines it (n·count·elt for RS/AG)
  DType dtype = DType::F32;
  double node_send_bytes = 0;  // bytes each node sends to the others for it (0 on one node)
  int ranks = 0;       // a collective over a group of ranks (Communicator::prepare_block): its size; 0: the world
  bool across = false;  // the group is one rank of each block (the ranks sharing rank % block), not a block
  // Seconds since the log was created; < 0 while the event has not happened.
  double issued_s = -1, started_s = -1, completed_s = -1;
  bool started() const { return started_s >= 0; }
  bool completed() const { return completed_s >= 0; }
  std::string describe() const;  // `#12 all_gather label="unit 3" (65536 bytes, bf16)`
};

struct CommOpStats {
  uint64_t calls = 0;        // issued
  uint64_t completed = 0;
  uint64_t bytes = 0;        // sum of CommRecord::bytes over issued calls
  double node_send_bytes = 0;  // sum of CommRecord::node_send_bytes over issued calls
  double busy_s = 0;         // sum of (completed - started) over completed calls
};

class CommLog {
 public:
  explicit CommLog(size_t capacity = 1024);

  // Assigns the next sequence number and records the issue time.
  // node_send_bytes: what each node sends to the others for it (Communicator::node_send_bytes).
  // ranks, across: the group of a collective over part of the ranks (CommRecord; 0: the world).
  uint64_t issue(CommOp op, const std::string& label, size_t count, size_t bytes, DType dt,
                 double node_send_bytes = 0, int ranks = 0, bool across = false);
  void mark_started(uint64_t seq);
  void mark_completed(uint64_t seq);  // seq must be last_completed() + 1 (in-order completion)

  uint64_t last_issued() const;
  uint64_t last_completed() const;
  // The record of `seq` if it is still in the ring.
  std::optional<CommRecord> find(uint64_t seq) const;
  // The oldest collective issued but not complete, if any (seq is set even when the ring has
  // already dropped the rest of its record).
  std::optional<CommRecord> oldest_incomplete() const;
  // Up to n most recent records, oldest first.
  std::vector<CommRecord> recent(size_t n) const;
  CommOpStats stats(CommOp op) const;
  void reset_stats();
  double now_s() const;  // the log's clock (seconds since construction)
  double at_s(std::chrono::steady_clock::time_point t) const;  // t on the log's clock
  size_t capacity() const { return ring_.size(); }

 private:
  CommRecord* slot(uint64_t seq);  // caller holds mu_; null when seq left the ring
  const CommRecord* slot(uint64_t seq) const;
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<CommRecord> ring_;     // ring_[seq % capacity] holds seq when ring_[...].seq == seq
  uint64_t last_issued_ = 0, last_completed_ = 0;
  std::deque<CommOp> inflight_ops_;  // op of each seq in (last_completed_, last_issued_]
  std::array<CommOpStats, kNumCommOps> stats_{};
};

}  // namespace zt
