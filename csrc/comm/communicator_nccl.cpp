// communicator_nccl.cpp — the GPU backend: one process per GPU, NCCL collectives on the
// communicator's own CUDA stream, ncclUniqueId broadcast over MPI.
//
// Completion tracking: every collective (or fused group) is bracketed by two pooled CUDA events
// on the comm stream; the watchdog thread polls them to mark the log started/completed, and
// polls ncclCommGetAsyncError. An async NCCL error or a hang ends in ncclCommAbort + MPI_Abort
// on this rank, after alerting the others, so no rank is left waiting forever.
#include <deque>
#include <mutex>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/comm/watchdog.h"
#include "zerotrain/core/check_cuda.h"
#include "zerotrain/core/outside_memory.h"

namespace zt {

namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Device& dev, MPI_Comm comm, int rank, int n, NodeLocal nl, const CommOptions& opts)
      : Communicator(opts, rank, n, nl), dev_(dev), ordinal_(dev.ordinal()), comm_(comm) {
    buffers_ = comm_buffer_plan(CommBackend::NCCL, n, opts_);  // InputError on a bad NCCL_* size, before NCCL starts
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ncclUniqueId id{};
    if (rank == 0) ZT_NCCL_CHECK(ncclGetUniqueId(&id));
    ZT_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm_));
    // NCCL's own device buffers have no query API: the cudaMemGetInfo delta of the init is
    // recorded as outside-tracker memory (outside_memory.h) and taken back at ncclCommDestroy.
    size_t free_before = 0, free_after = 0, total = 0;
    ZT_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
    ZT_NCCL_CHECK(ncclCommInitRank(&nccl_, n, id, rank));
    ZT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    nccl_bytes_ = free_before > free_after ? static_cast<int64_t>(free_before - free_after) : 0;
    add_outside_bytes(ordinal_, OutsideCategory::NcclInternal, nccl_bytes_);
    stream_ = dev.create_stream("comm");
    cuda_stream_ = static_cast<cudaStream_t>(stream_->native_handle());
    scratch_ = dev.alloc(sizeof(float), MemCategory::Communicator, true);
    CommWatchdog::Hooks hooks;
    hooks.poll = [this] { return poll(); };
    hooks.on_abort = [this] {  // blocks_ grows only in prepare_block, before any collective uses it
      for (const BlockComm& b : blocks_) ncclCommAbort(b.comm);
      ncclCommAbort(nccl_);
    };
    watchdog_ = std::make_unique<CommWatchdog>(log_, opts_.timeout_s, comm_, hooks);
  }
  ~NcclCommunicator() override {
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream_));
    watchdog_.reset();
    poll();  // marks everything complete and returns the events to the pool
    for (const BlockComm& b : blocks_) ncclCommDestroy(b.comm);
    ncclCommDestroy(nccl_);
    add_outside_bytes(ordinal_, OutsideCategory::NcclInternal, -nccl_bytes_);
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
    stream_.reset();
    scratch_.reset();
    MPI_Comm_free(&comm_);
  }
  CommBackend backend() const override { return CommBackend::NCCL; }
  Stream& stream() override { return *stream_; }
  std::unique_ptr<Event> create_event() override { return dev_.create_event(false); }

  void group_start() override {
    if (group_depth_++ == 0) {
      ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
      group_captured_ = capturing();
      if (group_captured_) {
        ZT_NCCL_CHECK(ncclGroupStart());
        return;
      }
      group_start_ev_ = take_event();
      ZT_CUDA_CHECK(cudaEventRecord(group_start_ev_, cuda_stream_));
    }
    ZT_NCCL_CHECK(ncclGroupStart());
  }
  void group_end() override {
    ZT_CHECK(group_depth_ > 0, "group_end without group_start");
    ZT_NCCL_CHECK(ncclGroupEnd());
    if (--group_depth_ > 0) return;
    if (group_captured_) {
      for (uint64_t seq : group_seqs_) mark_captured(seq);
      group_seqs_.clear();
      for (Event* e : group_done_) e->record(*stream_);
      group_done_.clear();
      return;
    }
    cudaEvent_t end = take_event();
    ZT_CUDA_CHECK(cudaEventRecord(end, cuda_stream_));
    {
      std::lock_guard<std::mutex> lock(mu_);
      bool first = true;
      for (uint64_t seq : group_seqs_) {  // the first carries the events; the rest finish with it
        pending_.push_back({seq, first ? group_start_ev_ : nullptr, first ? end : nullptr});
        first = false;
      }
      if (first) {  // empty group
        pool_.push_back(group_start_ev_);
        pool_.push_back(end);
      }
    }
    group_seqs_.clear();
    group_start_ev_ = nullptr;
    for (Event* e : group_done_) e->record(*stream_);
    group_done_.clear();
  }

 protected:
  void launch(const Call& c) override {
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    cudaEvent_t start = nullptr, end = nullptr;
    const bool captured = group_depth_ == 0 && capturing();
    if (group_depth_ == 0 && !captured) {
      start = take_event();
      ZT_CUDA_CHECK(cudaEventRecord(start, cuda_stream_));
    }
    const ncclDataType_t t = nccl_type(c.dtype);
    switch (c.op) {
      case CommOp::AllReduce:
        ZT_NCCL_CHECK(ncclAllReduce(c.send, c.recv, c.count, t, nccl_op(c.reduce), nccl_, cuda_stream_));
        break;
      case CommOp::ReduceScatter:
        ZT_NCCL_CHECK(ncclReduceScatter(c.send, c.recv, c.count, t, nccl_op(c.reduce), nccl_, cuda_stream_));
        break;
      case CommOp::AllGather:
        ZT_NCCL_CHECK(ncclAllGather(c.send, c.recv, c.count, t, group_comm(c.group), cuda_stream_));
        break;
      case CommOp::AllToAll: {  // member j's block to member j, as one fused group of sends and receives
        ncclComm_t comm = group_comm(c.group);
        const size_t block = c.count * dtype_size(c.dtype);
        ZT_NCCL_CHECK(ncclGroupStart());
        for (int j = 0; j < c.group.size(world_size_); ++j) {
          ZT_NCCL_CHECK(ncclSend(static_cast<const char*>(c.send) + j * block, c.count, t, j, comm, cuda_stream_));
          ZT_NCCL_CHECK(ncclRecv(static_cast<char*>(c.recv) + j * block, c.count, t, j, comm, cuda_stream_));
        }
        ZT_NCCL_CHECK(ncclGroupEnd());
        break;
      }
      case CommOp::Broadcast:
        ZT_NCCL_CHECK(ncclBroadcast(c.send, c.recv, c.count, t, c.root, nccl_, cuda_stream_));
        break;
      case CommOp::Barrier:  // NCCL has no barrier: a one-element all-reduce orders the ranks
        ZT_NCCL_CHECK(ncclAllReduce(scratch_.data(), scratch_.data(), 1, ncclFloat32, ncclSum, nccl_, cuda_stream_));
        break;
      case CommOp::VerifySame:
      case CommOp::GatherStrings:
      case CommOp::MaxOverRanks:
      case CommOp::kCount: ZT_CHECK(false, "not a launchable collective"); break;
    }
    if (group_depth_ > 0) {
      group_seqs_.push_back(c.seq);
      return;
    }
    if (captured) return mark_captured(c.seq);
    end = take_event();
    ZT_CUDA_CHECK(cudaEventRecord(end, cuda_stream_));
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({c.seq, start, end});
  }

  void record_done(Event& done) override {
    if (group_depth_ > 0) group_done_.push_back(&done);
    else done.record(*stream_);
  }

  // Two communicators per block size, split by rank / block (the block) and by rank % block (one
  // rank of each block), members ordered by rank so a member's NCCL rank is its RankGroup index.
  // The splits are collective over every rank (prepare_block's contract); their device memory is
  // outside the tracker like the parent's. A group of the whole world uses the parent.
  void prepare_block_backend(int block) override {
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream_));
    for (bool across : {false, true}) {
      if (RankGroup{block, across}.size(world_size_) == world_size_) continue;
      size_t free_before = 0, free_after = 0, total = 0;
      ZT_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
      ncclComm_t sub = nullptr;
      ZT_NCCL_CHECK(ncclCommSplit(nccl_, across ? rank_ % block : rank_ / block, rank_, &sub, nullptr));
      ZT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
      const int64_t bytes = free_before > free_after ? static_cast<int64_t>(free_before - free_after) : 0;
      add_outside_bytes(ordinal_, OutsideCategory::NcclInternal, bytes);
      nccl_bytes_ += bytes;
      std::lock_guard<std::mutex> lock(mu_);  // poll() reads blocks_ on the watchdog thread
      blocks_.push_back({block, across, sub});
    }
  }

  // The exchange runs on the host over MPI once every earlier collective has completed.
  void gather_u64_blocking(uint64_t seq, uint64_t value, uint64_t* all) override {
    ZT_CHECK(group_depth_ == 0, "verify_same_across_ranks inside a group");
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream_));
    poll();  // marks every earlier collective complete (in order, under mu_)
    log_.mark_started(seq);
    ZT_MPI_CHECK(MPI_Allgather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm_));
    log_.mark_completed(seq);
  }
  // On the calling thread, over the bootstrap MPI communicator, after the comm stream drained.
  void run_host_exchange(uint64_t seq, const std::function<void(MPI_Comm)>& exchange) override {
    ZT_CHECK(group_depth_ == 0, "gather_strings inside a group");
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream_));
    poll();  // marks every earlier collective complete
    log_.mark_started(seq);
    exchange(comm_);
    log_.mark_completed(seq);
  }

 private:
  struct Pending {
    uint64_t seq;
    cudaEvent_t start;  // null: starts and completes with the entry before it (same group, or captured)
    cudaEvent_t end;
  };

  // The comm stream is inside a CUDA-graph capture (core/device.h StreamGraph): the call is
  // recorded into the graph, not run, and runs again at every replay with no host call. So no
  // watchdog brackets (an event recorded in a capture never fires): the entry is queued with no
  // events, so the poll marks it done right after the entry before it (the log completes in
  // order), and replays are not in the comm log (train --cuda-graph refuses --comm-log). A hang
  // inside a replay is caught by the next bracketed collective (the step-stats all-gather).
  bool capturing() const {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    ZT_CUDA_CHECK(cudaStreamIsCapturing(cuda_stream_, &st));
    return st != cudaStreamCaptureStatusNone;
  }
  void mark_captured(uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({seq, nullptr, nullptr});
  }

  cudaEvent_t take_event() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pool_.empty()) {
        cudaEvent_t e = pool_.back();
        pool_.pop_back();
        return e;
      }
    }
    cudaEvent_t e;
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  // Watchdog thread (and destructor): mark started/completed collectives; report async errors.
  std::string poll() {
    cudaSetDevice(ordinal_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!pending_.empty()) {
        Pending& p = pending_.front();
        if (p.end == nullptr) {  // rides on the group's first entry, which completed (loop order)
          log_.mark_started(p.seq);
          log_.mark_completed(p.seq);
          pending_.pop_front();
          continue;
        }
        if (p.start && cudaEventQuery(p.start) == cudaSuccess) {
          log_.mark_started(p.seq);
          pool_.push_back(p.start);
          p.start = nullptr;
        }
        cudaError_t q = cudaEventQuery(p.end);
        if (q == cudaErrorNotReady) break;
        if (q != cudaSuccess) return std::string("CUDA error on the comm stream: ") + cudaGetErrorString(q);
        if (p.start) pool_.push_back(p.start);
        log_.mark_started(p.seq);
        log_.mark_completed(p.seq);
        pool_.push_back(p.end);
        pending_.pop_front();
      }
    }
    std::vector<ncclComm_t> comms{nccl_};
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const BlockComm& b : blocks_) comms.push_back(b.comm);
    }
    for (ncclComm_t comm : comms) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
        const char* last = ncclGetLastError(comm);
        return hang_report_line(log_, std::string("NCCL async error: ") + ncclGetErrorString(async) +
                                          (last && *last ? std::string(" (") + last + ")" : "") + "; aborting the job");
      }
    }
    return {};
  }

  ncclComm_t group_comm(RankGroup g) const {
    if (g.size(world_size_) == world_size_) return nccl_;
    for (const BlockComm& b : blocks_)
      if (b.block == g.block && b.across == g.across) return b.comm;
    ZT_CHECK(false, "no NCCL communicator for blocks of " + std::to_string(g.block) + " ranks");
    return nullptr;
  }

  Device& dev_;
  int ordinal_;
  MPI_Comm comm_;
  struct BlockComm {
    int block;
    bool across;      // RankGroup::spanning(block), else within(block)
    ncclComm_t comm;  // this rank's group (ncclCommSplit of nccl_)
  };
  ncclComm_t nccl_ = nullptr;
  std::vector<BlockComm> blocks_;       // per prepared block size; guarded by mu_ against poll()
  int64_t nccl_bytes_ = 0;              // device memory of ncclCommInitRank and the splits (outside the tracker)
  std::unique_ptr<Stream> stream_;      // the comm stream (its own cudaStream_t)
  cudaStream_t cuda_stream_ = nullptr;
  DeviceBuffer scratch_;                // barrier()'s one float ("nccl barrier scalar"); comm stream only
  std::mutex mu_;                       // guards pending_ and pool_
  std::deque<Pending> pending_;         // launched, not yet seen complete; issue order
  std::vector<cudaEvent_t> pool_;       // idle events
  // Issuing thread only:
  int group_depth_ = 0;
  cudaEvent_t group_start_ev_ = nullptr;
  bool group_captured_ = false;         // the open group began inside a stream capture
  std::vector<uint64_t> group_seqs_;
  std::vector<Event*> group_done_;
  std::unique_ptr<CommWatchdog> watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Device& cuda_dev, MPI_Comm parent, const CommOptions& opts) {
  ZT_CHECK(cuda_dev.kind() == DeviceKind::CUDA, "the NCCL communicator needs a CUDA device; got " +
                                                    cuda_dev.description());
  DupComm d = duplicate_comm(parent);
  return std::make_unique<NcclCommunicator>(cuda_dev, d.comm, d.rank, d.size, d.local, opts);
}

}  // namespace zt
