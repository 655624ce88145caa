// communicator_mpi.cpp — the CPU backend: collectives run by one comm thread (a CpuStream)
// that makes every MPI call for them.
//
// Algorithms (n ranks, rank r):
//  * reduce_scatter: pipelined direct exchange. The own block is cut into chunks; for chunk c,
//    rank r receives chunk c of block r from every peer into scratch and sends chunk c of
//    block k to rank k (peers in rotated order r±1, r±2, …), then reduces the n contributions
//    in rank order with host_reduce (fp32). Chunk c+1 is in flight while chunk c is reduced.
//    Volume per rank: (n−1)/n of the buffer each way — the same as a ring.
//  * all_reduce: the same pipelined exchange on n near-equal blocks (the first count%n blocks one
//    element longer), fused with its all-gather: as soon as rank r has reduced chunk c of its
//    block it sends that chunk to every peer, and receives chunk c of every peer's block straight
//    into recv. One pass, no second collective, no staging: each rank sends and receives
//    2(n−1)/n of the buffer, like a ring all-reduce. Small all_reduces (≤ small_all_reduce_bytes)
//    instead all-gather every contribution and reduce locally in rank order. Both give every
//    rank bitwise the same rank-ordered result.
//  * all_gather: direct exchange of whole blocks (rank r's block to every peer, every peer's
//    block received in place; rotated peer order), then the own block copied if out of place.
//    Measured 1.2-2.9x MPI_Allgather at 3-4 ranks and 0.9-1.1x at 2 ranks (docs/comm.md).
//  * broadcast: above small_broadcast_bytes, scatter + all-gather — the root sends block k of n
//    near-equal blocks to rank k and its own block to all; each rank forwards its block to the
//    other non-root ranks, chunk by chunk (4·chunk_bytes) as it arrives. Up to it, and at 2
//    ranks (one receiver, no forwarding to share), MPI_Bcast.
//  * barrier: MPI_Barrier.
//  * all_to_all: direct exchange, block k of send to member k, block k of recv from it.
//  * over a group of ranks (RankGroup, prepare_block): all_gather's and all_to_all's direct
//    exchange among the group's members, on the same communicator (their tags differ from a world
//    collective's).
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

// Tags of one collective's point-to-point messages: `reduce` for contributions (all_reduce,
// reduce_scatter), whole blocks (all_gather) or the root's scatter (broadcast); `gather` for
// reduced chunks (all_reduce) and forwarded blocks (broadcast). Both in [1, 32000]; MPI
// guarantees tags up to 32767.
struct Tags {
  int reduce, gather;
};

Tags tags_for(CommOp op, size_t count, DType dt, ReduceOp red, RankGroup g = {}) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the collective's signature
  for (uint64_t v : {uint64_t(op), uint64_t(count), uint64_t(dt), uint64_t(red), uint64_t(g.block), uint64_t(g.across)}) {
    h = (h ^ v) * 1099511628211ull;
  }
  const int t = static_cast<int>(h % 16000);
  return {1 + t, 16001 + t};
}

// Split `count` elements into n near-equal blocks, the first count % n one element longer.
struct Blocks {
  std::vector<size_t> offs, counts;
};
Blocks equal_blocks(size_t count, int n) {  // block k = [k·count, (k+1)·count)
  Blocks b{std::vector<size_t>(n), std::vector<size_t>(n, count)};
  for (int k = 0; k < n; ++k) b.offs[k] = static_cast<size_t>(k) * count;
  return b;
}
Blocks near_equal_blocks(size_t count, int n) {
  Blocks b{std::vector<size_t>(n), std::vector<size_t>(n)};
  const size_t q = count / n, rem = count % n;
  size_t off = 0;
  for (int k = 0; k < n; ++k) {
    b.counts[k] = q + (static_cast<size_t>(k) < rem ? 1 : 0);
    b.offs[k] = off;
    off += b.counts[k];
  }
  return b;
}

int as_int(size_t v, const char* what) {
  ZT_CHECK(v <= static_cast<size_t>(INT_MAX), std::string(what) + " exceeds INT_MAX elements for one MPI call");
  return static_cast<int>(v);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(Device& dev, MPI_Comm comm, int rank, int n, NodeLocal nl, const CommOptions& opts)
      : Communicator(opts, rank, n, nl), comm_(comm) {
    ZT_CHECK(opts_.chunk_bytes <= (size_t(1) << 30), "CommOptions::chunk_bytes must be at most 1 GiB");
    buffers_ = comm_buffer_plan(CommBackend::MPI, n, opts_);  // the memory prediction lists the same
    const int64_t bytes = mpi_scratch_bytes(n, opts_);
    if (bytes > 0) scratch_ = dev.alloc(static_cast<size_t>(bytes), MemCategory::Communicator);
    stream_ = std::make_unique<CpuStream>("comm", 1);  // one thread: the cores are the compute team's
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
  // On the comm thread: MPI calls on comm_ stay serialised (MPI_THREAD_SERIALIZED suffices).
  void run_host_exchange(uint64_t seq, const std::function<void(MPI_Comm)>& exchange) override {
    stream_->enqueue([this, seq, &exchange] {
      log_.mark_started(seq);
      exchange(comm_);
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
      case CommOp::AllToAll: run_all_to_all(c); break;
      case CommOp::Broadcast: run_broadcast(c); break;
      case CommOp::Barrier: ZT_MPI_CHECK(MPI_Barrier(comm_)); break;
      case CommOp::VerifySame:
      case CommOp::GatherStrings:
      case CommOp::MaxOverRanks:
      case CommOp::kCount: ZT_CHECK(false, "not a launchable collective"); break;
    }
  }

  void run_reduce_scatter(const Call& c) {
    reduce_scatter_blocks(static_cast<const char*>(c.send), equal_blocks(c.count, world_size_),
                          static_cast<char*>(c.recv), nullptr, c.dtype, c.reduce,
                          tags_for(c.op, c.count, c.dtype, c.reduce));
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
    const Blocks b = near_equal_blocks(c.count, n);
    char* recv = static_cast<char*>(c.recv);
    reduce_scatter_blocks(static_cast<const char*>(c.send), b, recv + b.offs[rank_] * elt, recv, c.dtype, c.reduce,
                          tags_for(c.op, c.count, c.dtype, c.reduce));
  }

  // With offs/counts = b: out[0:counts[r]] = reduce over k (rank order) of
  // send[offs[r] : offs[r]+counts[r]] on rank k.
  // Sends block k of `send` to rank k. `out` may equal send + offs[r]·elt (in place).
  // With `gather` (all_reduce; out == gather + offs[r]·elt) every rank's reduced block also lands
  // at gather + offs[k]·elt on every rank, chunk by chunk as it is reduced. `gather` may equal
  // `send`: the receive of reduced chunk c of block k is posted only after this rank's send of
  // its own contribution to that chunk has completed (reqs[c % 2] waited).
  void reduce_scatter_blocks(const char* send, const Blocks& b, char* out, char* gather, DType dt, ReduceOp op,
                             Tags tags) {
    const std::vector<size_t>&offs = b.offs, &counts = b.counts;
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
    auto chunk_elems = [&](size_t c, int k) { return std::min(ch, counts[k] - c * ch); };  // when c·ch < counts[k]
    std::vector<MPI_Request> reqs[2];
    std::vector<MPI_Request> gather_reqs;  // reduced chunks in flight, both ways; buffers stay valid
    auto post = [&](size_t c) {  // contributions of chunk c: receive block r's, send block dst's
      std::vector<MPI_Request>& rq = reqs[c % 2];
      rq.clear();
      const size_t lo = c * ch;
      for (int i = 1; i < n; ++i) {
        const int src = (r - i + n) % n, dst = (r + i) % n;
        if (lo < own) irecv(rq, buf(c, i), chunk_elems(c, r), dt, src, tags.reduce);
        if (lo < counts[dst]) isend(rq, send + (offs[dst] + lo) * elt, chunk_elems(c, dst), dt, dst, tags.reduce);
      }
    };
    std::vector<const void*> srcs(n);
    post(0);
    for (size_t c = 0; c < nchunks; ++c) {
      if (c + 1 < nchunks) post(c + 1);
      wait_all(reqs[c % 2]);
      const size_t lo = c * ch;
      if (gather) {
        for (int i = 1; i < n; ++i) {
          const int src = (r - i + n) % n;
          if (lo < counts[src]) {
            irecv(gather_reqs, gather + (offs[src] + lo) * elt, chunk_elems(c, src), dt, src, tags.gather);
          }
        }
      }
      if (lo >= own) continue;
      for (int k = 0; k < n; ++k) {
        srcs[k] = k == r ? static_cast<const void*>(send + (offs[r] + lo) * elt) : buf(c, (r - k + n) % n);
      }
      reduce_in_order(srcs.data(), n, out + lo * elt, chunk_elems(c, r), dt, op, n);
      if (gather) {
        for (int i = 1; i < n; ++i) {
          isend(gather_reqs, out + lo * elt, chunk_elems(c, r), dt, (r + i) % n, tags.gather);
        }
      }
    }
    wait_all(gather_reqs);
  }

  // Point-to-point pieces of a collective: `elems` elements of dt, the request appended to rq.
  void isend(std::vector<MPI_Request>& rq, const void* p, size_t elems, DType dt, int peer, int tag) {
    rq.emplace_back();
    ZT_MPI_CHECK(MPI_Isend(p, as_int(elems, "message"), mpi_type(dt), peer, tag, comm_, &rq.back()));
  }
  void irecv(std::vector<MPI_Request>& rq, void* p, size_t elems, DType dt, int peer, int tag) {
    rq.emplace_back();
    ZT_MPI_CHECK(MPI_Irecv(p, as_int(elems, "message"), mpi_type(dt), peer, tag, comm_, &rq.back()));
  }

  // Polls instead of blocking in MPI_Waitall so a comm thread sharing cores with compute threads
  // gives its core up while it waits.
  void wait_all(std::vector<MPI_Request>& reqs) { wait_all(reqs.data(), reqs.size()); }
  void wait_all(MPI_Request* reqs, size_t n) {
    if (n == 0) return;
    for (int spins = 0;; ++spins) {
      int done = 0;
      ZT_MPI_CHECK(MPI_Testall(static_cast<int>(n), reqs, &done, MPI_STATUSES_IGNORE));
      if (done) return;
      if (spins > 64) sched_yield();
    }
  }

  // Direct exchange: rank r's block goes to every peer (rotated order) and every peer's block is
  // received straight into place; out of place, the own block is then copied locally. Over a
  // group of ranks (c.group) the peers are its members, this rank at its index r.
  void run_all_gather(const Call& c) {
    if (c.count == 0) return;
    const int n = c.group.size(world_size_), r = c.group.index(rank_);
    const size_t elt = dtype_size(c.dtype), block = c.count * elt;
    char* recv = static_cast<char*>(c.recv);
    const char* mine = c.in_place ? recv + static_cast<size_t>(r) * block : static_cast<const char*>(c.send);
    const int tag = tags_for(c.op, c.count, c.dtype, c.reduce, c.group).reduce;
    std::vector<MPI_Request> reqs;
    for (int i = 1; i < n; ++i) {
      const int src = (r - i + n) % n, dst = (r + i) % n;
      irecv(reqs, recv + static_cast<size_t>(src) * block, c.count, c.dtype, c.group.member(rank_, src), tag);
      isend(reqs, mine, c.count, c.dtype, c.group.member(rank_, dst), tag);
    }
    wait_all(reqs);
    if (!c.in_place) std::memcpy(recv + static_cast<size_t>(r) * block, mine, block);
  }

  // Direct exchange over the group: block dst of send to member dst, block src of recv from member
  // src (rotated order); the own block copied.
  void run_all_to_all(const Call& c) {
    if (c.count == 0) return;
    const int n = c.group.size(world_size_), r = c.group.index(rank_);
    const size_t block = c.count * dtype_size(c.dtype);
    const char* send = static_cast<const char*>(c.send);
    char* recv = static_cast<char*>(c.recv);
    const int tag = tags_for(c.op, c.count, c.dtype, c.reduce, c.group).reduce;
    std::vector<MPI_Request> reqs;
    for (int i = 1; i < n; ++i) {
      const int src = (r - i + n) % n, dst = (r + i) % n;
      irecv(reqs, recv + static_cast<size_t>(src) * block, c.count, c.dtype, c.group.member(rank_, src), tag);
      isend(reqs, send + static_cast<size_t>(dst) * block, c.count, c.dtype, c.group.member(rank_, dst), tag);
    }
    wait_all(reqs);
    std::memcpy(recv + static_cast<size_t>(r) * block, send + static_cast<size_t>(r) * block, block);
  }

  // Scatter + all-gather (van de Geijn) on n near-equal blocks: the root sends block k to rank k
  // and its own block to every rank; every other rank forwards each chunk of its block to the
  // other non-root ranks as soon as it has arrived. Tags: `reduce` for the scatter, `gather` for
  // the rest; chunks of one (source, tag) match in posting order (MPI's non-overtaking rule).
  void run_broadcast(const Call& c) {
    const int n = world_size_, r = rank_, root = c.root;
    if (n == 1 || c.count == 0) return;
    const DType dt = c.dtype;
    const size_t elt = dtype_size(dt);
    char* buf = static_cast<char*>(c.recv);
    if (n == 2 || c.count * elt <= opts_.small_broadcast_bytes) {  // one receiver: nothing to share
      const size_t step = size_t(1) << 30;                            // elements per MPI call
      for (size_t off = 0; off < c.count; off += step) {
        const int cnt = static_cast<int>(std::min(step, c.count - off));
        ZT_MPI_CHECK(MPI_Bcast(buf + off * elt, cnt, mpi_type(dt), root, comm_));
      }
      return;
    }
    const Blocks b = near_equal_blocks(c.count, n);
    const Tags tags = tags_for(c.op, c.count, c.dtype, c.reduce);
    // Blocks travel in chunks of `ch` elements so forwarding overlaps the scatter.
    const size_t ch = std::max<size_t>(1, 4 * std::max<size_t>(opts_.chunk_bytes, 64) / elt);
    auto nchunks = [&](int k) { return (b.counts[k] + ch - 1) / ch; };
    size_t max_chunks = 0;
    for (int k = 0; k < n; ++k) max_chunks = std::max(max_chunks, nchunks(k));
    std::vector<MPI_Request> own, rest;  // own: this rank's block from the root, chunk by chunk
    auto chunk = [&](int k, size_t ci) { return buf + (b.offs[k] + ci * ch) * elt; };
    auto chunk_elems = [&](int k, size_t ci) { return std::min(ch, b.counts[k] - ci * ch); };
    auto send_chunk = [&](std::vector<MPI_Request>& rq, int k, size_t ci, int peer, int tag) {  // chunk ci of block k
      isend(rq, chunk(k, ci), chunk_elems(k, ci), dt, peer, tag);
    };
    auto recv_chunk = [&](std::vector<MPI_Request>& rq, int k, size_t ci, int peer, int tag) {
      irecv(rq, chunk(k, ci), chunk_elems(k, ci), dt, peer, tag);
    };
    if (r == root) {
      for (size_t ci = 0; ci < max_chunks; ++ci) {
        for (int i = 1; i < n; ++i) {
          const int k = (root + i) % n;
          if (ci < nchunks(k)) send_chunk(rest, k, ci, k, tags.reduce);
        }
        for (int i = 1; i < n; ++i) {
          if (ci < nchunks(root)) send_chunk(rest, root, ci, (root + i) % n, tags.gather);
        }
      }
      wait_all(rest);
      return;
    }
    for (size_t ci = 0; ci < nchunks(r); ++ci) recv_chunk(own, r, ci, root, tags.reduce);
    for (size_t ci = 0; ci < nchunks(root); ++ci) recv_chunk(rest, root, ci, root, tags.gather);
    for (int i = 1; i < n; ++i) {
      const int src = (r - i + n) % n;
      if (src == root) continue;
      for (size_t ci = 0; ci < nchunks(src); ++ci) recv_chunk(rest, src, ci, src, tags.gather);
    }
    for (size_t ci = 0; ci < nchunks(r); ++ci) {
      wait_all(&own[ci], 1);  // forward each chunk of this rank's block once it is here
      for (int i = 1; i < n; ++i) {
        const int dst = (r + i) % n;
        if (dst != root) send_chunk(rest, r, ci, dst, tags.gather);
      }
    }
    wait_all(rest);
  }

  MPI_Comm comm_;
  // Comm-thread-only staging (reduce_scatter_blocks, small all_reduce), mpi_scratch_bytes; empty at one rank.
  DeviceBuffer scratch_;
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
