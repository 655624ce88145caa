// communicator.h — collectives for data parallelism, on a dedicated comm stream.
//
// Semantics (both backends):
//  * Every collective is enqueued on the communicator's comm stream and returns at once with
//    its sequence number. Collectives complete in issue order. When `done` is given, it is
//    recorded on the comm stream right after the collective: a compute stream that waits on it
//    (Stream::wait) runs later work only after the collective's result is in place.
//  * Producers: a collective reads its input when the comm stream reaches it. Work that fills
//    the input on another stream must be made visible first: record an event there and call
//    comm.wait(event) before issuing.
//  * Buffer ownership: the caller owns every buffer; a buffer handed to a collective must not be
//    written (or, for outputs, read) until the collective's `done` event completed.
//  * Counts are elements. reduce_scatter: `recv_count` elements per rank, send holds
//    world_size·recv_count. all_gather: `send_count` per rank, recv holds world_size·send_count.
//  * In place follows NCCL: reduce_scatter in place when recv == send + rank·recv_count;
//    all_gather in place when send == recv + rank·send_count; all_reduce when send == recv.
//    Any other overlap between send and recv is a programming error (ZT_CHECK).
//  * Every rank must issue the same collectives in the same order with the same counts and
//    dtypes (labels should match too). A rank that does not is caught by the hang watchdog.
//
// Determinism (MPI backend): sums, averages and maxima are computed in fp32 in rank order
// 0,1,…,n−1 (see host_reduce.h) by the rank that owns each element block, then distributed, so
// every rank holds bitwise the same result and repeated runs are bitwise equal; bf16/fp16 are
// rounded once, after the fp32 accumulation. all_reduce and reduce_scatter give bitwise the same
// values for the same elements. NCCL backend: NCCL's own algorithms (deterministic for a fixed
// NCCL version, topology and size; identical on every rank for all_reduce).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <mpi.h>

#include "zerotrain/comm/comm_log.h"
#include "zerotrain/comm/host_reduce.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/device.h"

namespace zt {

enum class CommBackend : uint8_t { MPI = 0, NCCL };
const char* comm_backend_name(CommBackend b);  // "mpi", "nccl"

// Exit status of a job the comm layer takes down (hang, async NCCL error, schedule mismatch).
constexpr int kExitCommFailure = 3;

struct CommOptions {
  // Hang watchdog: a collective that started and has not completed after this many seconds
  // takes the job down with a report. <= 0 disables the watchdog. Default: env
  // ZT_COMM_TIMEOUT_S (decimal seconds in [kMinTimeoutS, kMaxTimeoutS], or "off"; anything else
  // is an InputError naming the variable), else 300.
  static constexpr double kMinTimeoutS = 1.0;
  static constexpr double kMaxTimeoutS = 1e7;  // about 116 days
  double timeout_s = default_timeout_s();
  size_t log_capacity = 1024;        // ring log entries kept
  // MPI backend: per-peer chunk of the pipelined reduce-scatter / all-reduce exchange (bytes;
  // 256 KiB measured best at 1-16 MiB messages on 4 ranks, docs/comm.md). Scratch memory:
  // mpi_scratch_bytes below, tracked as MemCategory::Communicator.
  size_t chunk_bytes = size_t(1) << 18;
  // MPI backend: all_reduce of at most this many bytes gathers every contribution and reduces
  // locally (one latency-bound step instead of the chunked exchange).
  size_t small_all_reduce_bytes = 16 << 10;
  // MPI backend: broadcast of at most this many bytes (or at 2 ranks) is one MPI_Bcast; larger
  // ones scatter blocks from the root and all-gather them (docs/comm.md).
  size_t small_broadcast_bytes = 256 << 10;
  static double default_timeout_s();
};

// ---- The communicator's own buffers on one rank (docs/design.md, "Communicator buffers") ----
// One function gives them by name and bytes (from the options; for NCCL also the NCCL_* sizes in
// the environment): the MPI communicator allocates exactly its tracked entries
// (MemCategory::Communicator) and nothing else in that category; the memory prediction
// (memory_predict.h) and `zerotrain estimate` list the same entries.
struct CommBufferSpec {
  std::string name;
  int64_t bytes = 0;
  // true: allocated by the library itself (NCCL's transport buffers), outside zerotrain's tracking
  // allocator — the bytes are an estimate from the library's documented defaults.
  bool estimate = false;
};

// NCCL's per-connection buffers, one per protocol, and the channel count the estimate assumes:
// NCCL's compile-time defaults (src/init.cc, src/include/device.h of NCCL 2.x), or the
// environment variables NCCL itself reads.
struct NcclBufferSizes {
  int64_t simple = int64_t(1) << 22;  // NCCL_BUFFSIZE (4 MiB)
  int64_t ll = 524288;                // NCCL_LL_BUFFSIZE: 8 lines/thread x 512 threads x 8 steps x 16 B
  int64_t ll128 = 4915200;            // NCCL_LL128_BUFFSIZE: 120 elems/thread x 640 threads x 8 steps x 8 B
  int64_t channels = 32;              // NCCL_MAX_NCHANNELS when set; else assumed (NCCL picks per topology)
  // From the environment; InputError naming the variable on a value that is not a positive integer.
  static NcclBufferSizes from_env();
};
// Estimated bytes NCCL holds for its transport on one rank: 0 at world 1 (no peers), else
// channels x 2 connections (the ring's receive from the previous rank and send to the next) x
// (simple + ll + ll128).
int64_t nccl_buffer_bytes(const NcclBufferSizes& s, int world);
// The MPI backend's chunk scratch (bytes): 0 at world 1 (no exchange), else
// max(2·(world−1)·max(chunk_bytes, 64), world·small_all_reduce_bytes).
int64_t mpi_scratch_bytes(int world, const CommOptions& o);
// Every buffer the `b` communicator holds on a rank of `world` with options `o` (NCCL: reads
// NcclBufferSizes::from_env(), so InputError on a bad NCCL_* size).
std::vector<CommBufferSpec> comm_buffer_plan(CommBackend b, int world, const CommOptions& o);

// Bytes each node sends to the other nodes for one collective whose full buffer is `bytes` (S,
// as the log records it), over `world` ranks placed blocked (NodeLocal::blocked) on nodes of
// `local_size` ranks each (n = world, L = local_size; 0 on one node):
//  * MPI backend, direct exchange (every rank's blocks to every peer; communicator_mpi.cpp):
//    reduce_scatter and all_gather L·(n−L)/n·S; all_reduce twice that (its reduce-scatter and
//    all-gather phases), or L·(n−L)·S at most small_all_reduce_bytes (every rank's whole buffer
//    to every peer);
//  * NCCL, rings in rank order: each node's one outgoing ring link carries (n−1)/n·S for
//    reduce_scatter and all_gather, 2(n−1)/n·S for all_reduce;
//  * broadcast: S with NCCL (the ring forwards the buffer across each node boundary once) and for
//    the MPI backend's one MPI_Bcast (up to small_broadcast_bytes, or at 2 ranks: Open MPI's tree
//    takes the buffer off a node about once); above that the MPI backend's scatter + all-gather
//    sends L·(n−L)/n·S from the root's node, the busiest (the others send L·(n−L−1)/n·S);
//  * all_to_all (both backends: every block straight to its member): L·(n−L)/n·S;
//  * the control exchanges (barrier, verify_same, gather_strings, max_over_ranks): 0 — a few
//    bytes each.
double node_send_bytes(CommBackend b, const CommOptions& o, CommOp op, double bytes, int world, int local_size);

// node_send_bytes of a collective over `group` (all_gather, reduce_scatter, all_reduce,
// all_to_all; bytes = the group's full buffer, as the log records it), per node of `local_size`
// ranks placed blocked: the ranks of one node each send their share S/g to every member of their
// group on another node (MPI's direct exchange, and all_to_all on both backends: Σ over the node's
// ranks of off-node members · S/g), or, NCCL's rings for the others, (g−1)/g·S over each ring link
// that leaves the node (one per node rank whose ring successor is elsewhere); all_reduce twice.
// 0 when every group lies inside a node. For the world group it equals node_send_bytes.
double group_node_send_bytes(CommBackend b, const CommOptions& o, CommOp op, double bytes, int world, int local_size,
                             RankGroup group);

// Thrown by verify_same_across_ranks on every rank when the ranks disagree.
class CommMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return node_.local_rank; }  // rank among the processes of this node
  int local_size() const { return node_.local_size; }
  const NodeLocal& node() const { return node_; }       // this rank's node and the node count
  // node_send_bytes of one of this communicator's collectives (bytes = its CommRecord::bytes).
  double node_send_bytes(CommOp op, size_t bytes) const {
    return zt::node_send_bytes(backend(), opts_, op, static_cast<double>(bytes), world_size_, node_.local_size);
  }
  virtual CommBackend backend() const = 0;
  virtual Stream& stream() = 0;                    // the comm stream
  virtual std::unique_ptr<Event> create_event() = 0;  // an event of the comm stream's kind
  const CommOptions& options() const { return opts_; }
  // What this communicator holds (comm_buffer_plan of its backend, world size and options).
  const std::vector<CommBufferSpec>& buffers() const { return buffers_; }

  // Collectives. Return the sequence number; see the file comment for in-place rules.
  // all_reduce: Sum, Avg, Max. reduce_scatter: Sum, Avg.
  uint64_t all_reduce(const void* send, void* recv, size_t count, DType dt, ReduceOp op,
                      const std::string& label = {}, Event* done = nullptr);
  uint64_t reduce_scatter(const void* send, void* recv, size_t recv_count, DType dt, ReduceOp op,
                          const std::string& label = {}, Event* done = nullptr);
  uint64_t all_gather(const void* send, void* recv, size_t send_count, DType dt,
                      const std::string& label = {}, Event* done = nullptr);
  uint64_t broadcast(void* buf, size_t count, DType dt, int root, const std::string& label = {},
                     Event* done = nullptr);

  // ---- Groups of ranks (RankGroup) ----
  // prepare_block is collective over every rank (the same value everywhere) and must run before
  // the first collective over RankGroup::within(block) or spanning(block); block divides the world
  // size. NCCL splits its communicator once per block size and group kind (ncclCommSplit); the
  // MPI backend exchanges with the group's ranks over its own communicator (tags distinct from a
  // world collective's). A group collective is sequence-numbered, logged (its record says the
  // group's size) and watched like any other.
  void prepare_block(int block);
  bool block_prepared(int block) const;
  // all_gather over this rank's block: `send_count` per rank, recv holds block·send_count; in
  // place when send == recv + (rank % block)·send_count.
  uint64_t all_gather_in_block(int block, const void* send, void* recv, size_t send_count, DType dt,
                               const std::string& label = {}, Event* done = nullptr);
  // all_to_all over `group` (g = group.size(world) members): send holds g blocks of `count`
  // elements, block j for member j; recv gets g blocks, block j from member j (its own block
  // copied). Out of place only.
  uint64_t all_to_all(const void* send, void* recv, size_t count, DType dt, RankGroup group,
                      const std::string& label = {}, Event* done = nullptr);
  uint64_t barrier(const std::string& label = {}, Event* done = nullptr);

  // Later collectives wait until `ready` (recorded on a producer stream) is complete.
  void wait(Event& ready) { stream().wait(ready); }
  // Host blocks until every collective issued so far has completed.
  void synchronize() { stream().synchronize(); }

  // Coalescing: NCCL fuses the collectives issued between group_start and group_end into one
  // launch (ncclGroupStart/End); the MPI backend runs them one after another. Prefer CommGroup.
  virtual void group_start() {}
  virtual void group_end() {}

  // Blocking check that every rank passes the same `hash` (e.g. of a bucket schedule). On a
  // mismatch every rank throws CommMismatchError naming the ranks and their values — never a
  // hang. Runs as a collective on the comm stream (it has a sequence number).
  void verify_same_across_ranks(uint64_t hash, const std::string& what);

  // Host-side gather for reports (rank maps, per-rank JSON): every rank passes its string (any
  // length); `root` gets all of them in rank order, the other ranks an empty vector.
  // Blocking, host memory: it runs once every collective issued before it has completed. It is a
  // control-plane collective: it has a sequence number and is watched by the hang watchdog like
  // the data collectives (a rank that never arrives ends the job with exit 3). Every rank must
  // call it at the same point.
  std::vector<std::string> gather_strings(const std::string& mine, int root, const std::string& label = {});

  // Host-side element-wise maximum of `mine` over all ranks (same length on every rank), returned
  // on every rank. Same rules as gather_strings (blocking, sequence-numbered, watched).
  // Used to agree on a verdict (e.g. "bad input on rank r") before the next collective.
  std::vector<int64_t> max_over_ranks(const std::vector<int64_t>& mine, const std::string& label = {});

  const CommLog& log() const { return log_; }
  CommLog& log() { return log_; }

 protected:
  struct Call {
    uint64_t seq = 0;
    CommOp op = CommOp::Barrier;
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;            // as passed by the caller
    DType dtype = DType::F32;
    ReduceOp reduce = ReduceOp::Sum;
    int root = 0;
    bool in_place = false;
    RankGroup group;             // the ranks it runs over (prepare_block); default: the world
  };
  Communicator(const CommOptions& opts, int rank, int world_size, const NodeLocal& node);
  // Enqueue the collective on the comm stream; it marks the log started/completed.
  virtual void launch(const Call& c) = 0;
  // verify_same_across_ranks: gather one uint64 per rank into `all` (world_size entries).
  // Runs the exchange as collective `seq` and returns when it is complete.
  virtual void gather_u64_blocking(uint64_t seq, uint64_t value, uint64_t* all) = 0;
  // Runs `exchange` (blocking MPI calls) on the backend's MPI communicator as collective `seq`
  // (marked started and completed in the log, so the watchdog sees it) once every collective
  // launched so far has completed, never concurrently with the backend's own MPI calls; returns
  // when it has run.
  virtual void run_host_exchange(uint64_t seq, const std::function<void(MPI_Comm)>& exchange) = 0;
  // Make `done` complete when every collective launched so far has (NCCL defers it to group_end
  // inside a group, where the fused launch happens).
  virtual void record_done(Event& done) { done.record(stream()); }
  // prepare_block's backend part (collective over every rank; called once per block size): what
  // collectives over RankGroup::within(block) and spanning(block) need.
  virtual void prepare_block_backend(int /*block*/) {}

  CommOptions opts_;
  std::vector<CommBufferSpec> buffers_;  // set by the backend's constructor, before it allocates
  CommLog log_;
  int rank_ = 0, world_size_ = 1;
  NodeLocal node_;

 private:
  uint64_t issue(Call c, const std::string& label, size_t bytes, Event* done);
  // A collective over `group` needs its blocks prepared (ZT_CHECK naming op and label).
  void require_prepared(RankGroup group, CommOp op, const std::string& label) const;
  // all_gather and all_gather_in_block: `group`'s members, this rank at group.index(rank).
  uint64_t all_gather_over(RankGroup group, const void* send, void* recv, size_t send_count, DType dt,
                           const std::string& label, Event* done);
  std::vector<int> blocks_;  // prepared block sizes
};

// Scope guard for group_start/group_end.
class CommGroup {
 public:
  explicit CommGroup(Communicator& c) : c_(c) { c_.group_start(); }
  ~CommGroup() { c_.group_end(); }
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;

 private:
  Communicator& c_;
};

// MPI on a CPU device, NCCL on a CUDA device (the device's ordinal is the GPU this rank uses).
// `parent` is duplicated, never used directly. MPI must be initialised (MpiEnvironment).
std::unique_ptr<Communicator> make_communicator(Device& dev, MPI_Comm parent = MPI_COMM_WORLD,
                                                const CommOptions& opts = {});
std::unique_ptr<Communicator> make_mpi_communicator(Device& cpu_dev, MPI_Comm parent = MPI_COMM_WORLD,
                                                    const CommOptions& opts = {});
// Throws InputError when the CUDA backend is not built.
std::unique_ptr<Communicator> make_nccl_communicator(Device& cuda_dev, MPI_Comm parent = MPI_COMM_WORLD,
                                                     const CommOptions& opts = {});

}  // namespace zt
