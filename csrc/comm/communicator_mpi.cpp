// communicator_mpi.cpp — the CPU backend: collectives run by one comm thread (a CpuStream)
// that makes every MPI call for them.
//
// Algorithms (n ranks, rank r):
//  * reduce_scatter: pipelined direct exchange. The own block is cut into chunks; for chunk c,
//    rank r receives chunk c of block r from every peer into scratch and sends chunk c of
//    block k to rank k (peers in rotated order r±1, r±2, …), then reduces the n contributions
//    in rank order with host_reduce (fp32). Chunk c+1 is in flight while chunk c is reduced.
//    Volume per rank: (n−1)/n of the buffer each way — the same as a ring.
//  * all_reduce: the same reduce-scatter on n near-equal blocks (the first count%n blocks one
//    element longer), then MPI_Allgatherv in place. Small all_reduces (≤ small_all_reduce_bytes)
//    instead all-gather every contribution and reduce locally in rank order. Both give every
//    rank bitwise the same rank-ordered result.
//  * all_gather, broadcast, barrier: MPI_Allgather / MPI_Bcast / MPI_Barrier (no arithmetic).
// Point-to-point messages of one collective carry a tag derived from (op, count, dtype, reduce
// op), so two ranks that disagree on the collective do not silently exchange data: they wait,
// and the watchdog reports them.
#include <algorithm>
#include <climits>
#include <cstring>
#include <sched.h>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/comm/watchdog.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/cpu_stream.h"

namespace zt {

namespace {

MPI_Datatype mpi_type(DType dt) { return dt == DType::F32 ? MPI_FLOAT : MPI_UINT16_T; }

int tag_for(CommOp op, size_t count, DType dt, ReduceOp red) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the collective's signature
  for (uint64_t v : {uint64_t(op), uint64_t(count), uint64_t(dt), uint64_t(red)}) {
    h = (h ^ v) * 1099511628211ull;
  }
  return 1 + static_cast<int>(h % 32000);  // MPI guarantees tags up to 32767
}

int as_int(size_t v, const char* what) {
  ZT_CHECK(v <= static_cast<size_t>(INT_MAX), std::string(what) + " exceeds INT_MAX elements for one MPI call");
  return static_cast<int>(v);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(Device& dev, MPI_Comm comm, int rank, int n, NodeLocal nl, const CommOptions& opts)
      : Communicator(opts, rank, n, nl.local_rank, nl.local_size), comm_(comm) {
    ZT_CHECK(opts_.chunk_bytes <= (size_t(1) << 30), "CommOptions::chunk_bytes must be at most 1 GiB");
    const size_t chunk = std::max<size_t>(opts_.chunk_bytes, 64);
    const size_t bytes = std::max(2 * static_cast<size_t>(n - 1) * chunk,
                                  static_cast<size_t>(n) * opts_.small_all_reduce_bytes);
    scratch_ = dev.alloc(bytes, MemCategory::Communicator);
    stream_ = std::make_unique<CpuStream>("comm");
    watchdog_ = std::make_unique<CommWatchdog>(log_, opts_.timeout_s, comm_, CommWatchdog::Hooks{});
  }
  ~MpiCommunicator() override {
    stream_->synchronize();
    stream_.reset();    // joins the comm thread
    watchdog_.reset();  // joins the watchdog thread
    MPI_Comm_free(&comm_);
  }
  CommBackend backend() const override { return CommBackend::MPI; }
  Stream& stream() override { return *stream_; }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }

 protected:
  void launch(const Call& c) override {
    stream_->enqueue([this, c] {
      log_.mark_started(c.seq);
      run(c);
      log_.mark_completed(c.seq);
    });
  }
  void gather_u64_blocking(uint64_t seq, uint64_t value, uint64_t* all) override {
    stream_->enqueue([this, seq, value, all] {
      log_.mark_started(seq);
      ZT_MPI_CHECK(MPI_Allgather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm_));
      log_.mark_completed(seq);
    });
    stream_->synchronize();
  }

 private:
  // ---- everything below runs on the comm thread ----
  void run(const Call& c) {
    switch (c.op) {
      case CommOp::AllReduce: run_all_reduce(c); break;
      case CommOp::ReduceScatter: run_reduce_scatter(c); break;
      case CommOp::AllGather: run_all_gather(c); break;
      case CommOp::Broadcast: run_broadcast(c); break;
      case CommOp::Barrier: ZT_MPI_CHECK(MPI_Barrier(comm_)); break;
      case CommOp::VerifySame:
      case CommOp::kCount: ZT_CHECK(false, "not a launchable collective"); break;
    }
  }

  void run_reduce_scatter(const Call& c) {
    std::vector<size_t> offs(world_size_), counts(world_size_, c.count);
    for (int k = 0; k < world_size_; ++k) offs[k] = static_cast<size_t>(k) * c.count;
    reduce_scatter_blocks(static_cast<const char*>(c.send), offs, counts, static_cast<char*>(c.recv), c.dtype,
                          c.reduce, tag_for(c.op, c.count, c.dtype, c.reduce));
  }

  void run_all_reduce(const Call& c) {
    const size_t elt = dtype_size(c.dtype), bytes = c.count * elt;
    const int n = world_size_;
    if (c.count == 0) return;
    if (n == 1) {
      const void* src = c.send;
      reduce_in_order(&src, 1, c.recv, c.count, c.dtype, c.reduce, 1);
      return;
    }
    if (bytes <= opts_.small_all_reduce_bytes) {
      char* all = scratch_.as<char>();  // [n][bytes]: every rank's contribution, rank order
      ZT_MPI_CHECK(MPI_Allgather(c.send, as_int(bytes, "all_reduce"), MPI_BYTE, all, static_cast<int>(bytes),
                                 MPI_BYTE, comm_));
      std::vector<const void*> srcs(n);
      for (int k = 0; k < n; ++k) srcs[k] = all + static_cast<size_t>(k) * bytes;
      reduce_in_order(srcs.data(), n, c.recv, c.count, c.dtype, c.reduce, n);
      return;
    }
    std::vector<size_t> offs(n), counts(n);
    const size_t q = c.count / n, rem = c.count % n;
    size_t off = 0;
    for (int k = 0; k < n; ++k) {
      counts[k] = q + (static_cast<size_t>(k) < rem ? 1 : 0);
      offs[k] = off;
      off += counts[k];
    }
    char* recv = static_cast<char*>(c.recv);
    reduce_scatter_blocks(static_cast<const char*>(c.send), offs, counts, recv + offs[rank_] * elt, c.dtype,
                          c.reduce, tag_for(c.op, c.count, c.dtype, c.reduce));
    std::vector<int> icounts(n), idispls(n);
    for (int k = 0; k < n; ++k) {
      icounts[k] = as_int(counts[k], "all_reduce block");
      idispls[k] = as_int(offs[k], "all_reduce offset");
    }
    ZT_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, icounts.data(), idispls.data(),
                                mpi_type(c.dtype), comm_));
  }

  // out[0:counts[r]] = reduce over k (rank order) of send[offs[r] : offs[r]+counts[r]] on rank k.
  // Sends block k of `send` to rank k. `out` may equal send + offs[r]·elt (in place).
  void reduce_scatter_blocks(const char* send, const std::vector<size_t>& offs, const std::vector<size_t>& counts,
                             char* out, DType dt, ReduceOp op, int tag) {
    const int n = world_size_, r = rank_;
    const size_t elt = dtype_size(dt);
    const size_t ch = std::max<size_t>(1, std::max<size_t>(opts_.chunk_bytes, 64) / elt);  // elements per chunk
    const size_t own = counts[r];
    if (n == 1) {
      const void* src = send + offs[0] * elt;
      if (own) reduce_in_order(&src, 1, out, own, dt, op, 1);
      return;
    }
    size_t nchunks = 0;
    for (int k = 0; k < n; ++k) nchunks = std::max(nchunks, (counts[k] + ch - 1) / ch);
    char* scratch = scratch_.as<char>();  // [2][n−1][ch·elt]
    auto buf = [&](size_t c, int i) { return scratch + ((c % 2) * (n - 1) + (i - 1)) * ch * elt; };
    std::vector<MPI_Request> reqs[2];
    auto post = [&](size_t c) {
      std::vector<MPI_Request>& rq = reqs[c % 2];
      rq.clear();
      const size_t lo = c * ch;
      for (int i = 1; i < n; ++i) {
        const int src = (r - i + n) % n, dst = (r + i) % n;
        if (lo < own) {
          MPI_Request q;
          ZT_MPI_CHECK(MPI_Irecv(buf(c, i), static_cast<int>(std::min(ch, own - lo) * elt), MPI_BYTE, src, tag,
                                 comm_, &q));
          rq.push_back(q);
        }
        if (lo < counts[dst]) {
          MPI_Request q;
          ZT_MPI_CHECK(MPI_Isend(send + (offs[dst] + lo) * elt, static_cast<int>(std::min(ch, counts[dst] - lo) * elt),
                                 MPI_BYTE, dst, tag, comm_, &q));
          rq.push_back(q);
        }
      }
    };
    std::vector<const void*> srcs(n);
    post(0);
    for (size_t c = 0; c < nchunks; ++c) {
      if (c + 1 < nchunks) post(c + 1);
      wait_all(reqs[c % 2]);
      const size_t lo = c * ch;
      if (lo >= own) continue;
      for (int k = 0; k < n; ++k) {
        srcs[k] = k == r ? static_cast<const void*>(send + (offs[r] + lo) * elt) : buf(c, (r - k + n) % n);
      }
      reduce_in_order(srcs.data(), n, out + lo * elt, std::min(ch, own - lo), dt, op, n);
    }
  }

  // Polls instead of blocking in MPI_Waitall so a comm thread sharing cores with compute threads
  // gives its core up while it waits.
  void wait_all(std::vector<MPI_Request>& reqs) {
    if (reqs.empty()) return;
    for (int spins = 0;; ++spins) {
      int done = 0;
      ZT_MPI_CHECK(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE));
      if (done) return;
      if (spins > 64) sched_yield();
    }
  }

  void run_all_gather(const Call& c) {
    if (c.count == 0) return;
    const size_t elt = dtype_size(c.dtype);
    if (world_size_ == 1) {
      if (!c.in_place) std::memcpy(c.recv, c.send, c.count * elt);
      return;
    }
    const int cnt = as_int(c.count, "all_gather count");
    ZT_MPI_CHECK(MPI_Allgather(c.in_place ? MPI_IN_PLACE : c.send, cnt, mpi_type(c.dtype), c.recv, cnt,
                               mpi_type(c.dtype), comm_));
  }

  void run_broadcast(const Call& c) {
    if (world_size_ == 1 || c.count == 0) return;
    const size_t elt = dtype_size(c.dtype), step = size_t(1) << 30;
    char* p = static_cast<char*>(c.recv);
    for (size_t off = 0; off < c.count; off += step) {
      const int cnt = static_cast<int>(std::min(step, c.count - off));
      ZT_MPI_CHECK(MPI_Bcast(p + off * elt, cnt, mpi_type(c.dtype), c.root, comm_));
    }
  }

  MPI_Comm comm_;
  DeviceBuffer scratch_;                  // comm-thread-only staging (see reduce_scatter_blocks)
  std::unique_ptr<CpuStream> stream_;     // the comm stream; its thread makes every collective MPI call
  std::unique_ptr<CommWatchdog> watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(Device& cpu_dev, MPI_Comm parent, const CommOptions& opts) {
  ZT_CHECK(cpu_dev.kind() == DeviceKind::CPU, "the MPI communicator works on CPU memory; got device " +
                                                  cpu_dev.description());
  DupComm d = duplicate_comm(parent);
  return std::make_unique<MpiCommunicator>(cpu_dev, d.comm, d.rank, d.size, d.local, opts);
}

}  // namespace zt
