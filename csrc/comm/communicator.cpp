// communicator.cpp — backend-independent half of the Communicator: argument checks, in-place
// rules, sequence numbers and the log, the schedule-hash check, and the factory.
#include "zerotrain/comm/communicator.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <algorithm>
#include <vector>

#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/check.h"

namespace zt {

const char* comm_backend_name(CommBackend b) { return b == CommBackend::MPI ? "mpi" : "nccl"; }

double CommOptions::default_timeout_s() {
  const char* v = std::getenv("ZT_COMM_TIMEOUT_S");
  if (!v || !*v) return 300.0;
  const std::string s = v;
  if (s == "off") return 0.0;  // the one spelling that disables the watchdog
  // A typo must not become "kill the job after 0 s" or "never": plain decimal seconds only (no
  // sign, exponent, hex, inf or nan), at least kMinTimeoutS so a healthy step is never a hang.
  const size_t dot = s.find('.');
  const std::string whole = s.substr(0, dot), frac = dot == std::string::npos ? "" : s.substr(dot + 1);
  auto digits = [](const std::string& d) { return d.find_first_not_of("0123456789") == std::string::npos; };
  const bool decimal = !whole.empty() && digits(whole) && digits(frac) && (dot == std::string::npos || !frac.empty());
  const double t = decimal ? std::strtod(v, nullptr) : 0.0;
  if (!decimal || !std::isfinite(t) || t < kMinTimeoutS || t > kMaxTimeoutS) {
    char range[96];
    std::snprintf(range, sizeof(range), "%g to %g", kMinTimeoutS, kMaxTimeoutS);
    throw InputError(std::string("ZT_COMM_TIMEOUT_S='") + v + "': expected decimal seconds from " + range +
                     " (e.g. 300 or 2.5), or \"off\" to disable the hang watchdog");
  }
  return t;
}

double node_send_bytes(CommBackend b, const CommOptions& o, CommOp op, double bytes, int world, int local_size) {
  if (local_size >= world || local_size < 1) return 0.0;
  const double n = world, L = local_size;
  switch (op) {
    case CommOp::ReduceScatter:
    case CommOp::AllGather:
      return b == CommBackend::NCCL ? (n - 1) / n * bytes : L * (n - L) / n * bytes;
    case CommOp::AllToAll: return L * (n - L) / n * bytes;  // every rank's blocks straight to every peer
    case CommOp::AllReduce:
      if (b == CommBackend::NCCL) return 2 * (n - 1) / n * bytes;
      return bytes <= static_cast<double>(o.small_all_reduce_bytes) ? L * (n - L) * bytes : 2 * L * (n - L) / n * bytes;
    case CommOp::Broadcast:
      if (b == CommBackend::NCCL || bytes <= static_cast<double>(o.small_broadcast_bytes) || world == 2) return bytes;
      return L * (n - L) / n * bytes;
    default: return 0.0;
  }
}

double group_node_send_bytes(CommBackend b, const CommOptions& o, CommOp op, double bytes, int world, int local_size,
                             RankGroup group) {
  if (group.block == 0) return node_send_bytes(b, o, op, bytes, world, local_size);
  if (local_size < 1 || local_size >= world) return 0.0;
  const int g = group.size(world);
  double off_members = 0, off_links = 0;  // over node 0's ranks: group members elsewhere, ring successors elsewhere
  for (int r = 0; r < local_size; ++r) {
    for (int j = 0; j < g; ++j) off_members += group.member(r, j) / local_size != 0 ? 1 : 0;
    off_links += group.member(r, (group.index(r) + 1) % g) / local_size != 0 ? 1 : 0;
  }
  const double share = bytes / g, ring = static_cast<double>(g - 1) / g * bytes;
  switch (op) {
    case CommOp::AllToAll: return off_members * share;
    case CommOp::ReduceScatter:
    case CommOp::AllGather: return b == CommBackend::NCCL ? off_links * ring : off_members * share;
    case CommOp::AllReduce: return 2 * (b == CommBackend::NCCL ? off_links * ring : off_members * share);
    default: return 0.0;
  }
}

Communicator::Communicator(const CommOptions& opts, int rank, int world_size, const NodeLocal& node)
    : opts_(opts), log_(opts.log_capacity), rank_(rank), world_size_(world_size), node_(node) {}

namespace {
// [a, a+na) and [b, b+nb) share a byte.
bool overlaps(const void* a, size_t na, const void* b, size_t nb) {
  if (na == 0 || nb == 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + nb && pb < pa + na;
}
std::string where(CommOp op, const std::string& label) {
  return std::string(comm_op_name(op)) + " label=\"" + label + "\"";
}
}  // namespace

uint64_t Communicator::issue(Call c, const std::string& label, size_t bytes, Event* done) {
  const bool across = node_.nodes > 1 && node_.blocked;
  const double leaves = !across ? 0.0
                        : c.group.block ? group_node_send_bytes(backend(), opts_, c.op, static_cast<double>(bytes),
                                                                world_size_, node_.local_size, c.group)
                                        : node_send_bytes(c.op, bytes);
  c.seq = log_.issue(c.op, label, c.count, bytes, c.dtype, leaves, c.group.block ? c.group.size(world_size_) : 0,
                     c.group.across);
  launch(c);
  if (done) record_done(*done);
  return c.seq;
}

uint64_t Communicator::all_reduce(const void* send, void* recv, size_t count, DType dt, ReduceOp op,
                                  const std::string& label, Event* done) {
  const size_t bytes = count * dtype_size(dt);
  ZT_CHECK(count == 0 || (send && recv), where(CommOp::AllReduce, label) + ": null buffer");
  const bool in_place = send == recv;
  ZT_CHECK(in_place || !overlaps(send, bytes, recv, bytes),
           where(CommOp::AllReduce, label) + ": send and recv overlap without being the same buffer");
  Call c;
  c.op = CommOp::AllReduce;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dt;
  c.reduce = op;
  c.in_place = in_place;
  return issue(c, label, bytes, done);
}

uint64_t Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dt, ReduceOp op,
                                      const std::string& label, Event* done) {
  const size_t elt = dtype_size(dt);
  const size_t send_bytes = recv_count * elt * static_cast<size_t>(world_size_);
  ZT_CHECK(op == ReduceOp::Sum || op == ReduceOp::Avg,
           where(CommOp::ReduceScatter, label) + ": reduce op must be sum or avg, got " + reduce_op_name(op));
  ZT_CHECK(recv_count == 0 || (send && recv), where(CommOp::ReduceScatter, label) + ": null buffer");
  const char* own = recv_count ? static_cast<const char*>(send) + static_cast<size_t>(rank_) * recv_count * elt
                               : nullptr;
  const bool in_place = recv_count > 0 && own == recv;
  ZT_CHECK(in_place || !overlaps(send, send_bytes, recv, recv_count * elt),
           where(CommOp::ReduceScatter, label) +
               ": recv overlaps send; in place needs recv == send + rank*recv_count");
  Call c;
  c.op = CommOp::ReduceScatter;
  c.send = send;
  c.recv = recv;
  c.count = recv_count;
  c.dtype = dt;
  c.reduce = op;
  c.in_place = in_place;
  return issue(c, label, send_bytes, done);
}

uint64_t Communicator::all_gather(const void* send, void* recv, size_t send_count, DType dt,
                                  const std::string& label, Event* done) {
  return all_gather_over(RankGroup::world(), send, recv, send_count, dt, label, done);
}

uint64_t Communicator::all_gather_over(RankGroup group, const void* send, void* recv, size_t send_count, DType dt,
                                       const std::string& label, Event* done) {
  const size_t elt = dtype_size(dt);
  const size_t recv_bytes = send_count * elt * static_cast<size_t>(group.size(world_size_));
  const size_t index = static_cast<size_t>(group.index(rank_));
  ZT_CHECK(send_count == 0 || (send && recv), where(CommOp::AllGather, label) + ": null buffer");
  const char* own = send_count ? static_cast<const char*>(recv) + index * send_count * elt : nullptr;
  const bool in_place = send_count > 0 && own == send;
  ZT_CHECK(in_place || !overlaps(send, send_count * elt, recv, recv_bytes),
           where(CommOp::AllGather, label) +
               ": send overlaps recv; in place needs send == recv + index*send_count (index: the rank's in its group)");
  Call c;
  c.op = CommOp::AllGather;
  c.send = send;
  c.recv = recv;
  c.count = send_count;
  c.dtype = dt;
  c.in_place = in_place;
  c.group = group;
  return issue(c, label, recv_bytes, done);
}

void Communicator::prepare_block(int block) {
  ZT_CHECK(block >= 1 && world_size_ % block == 0, "prepare_block: a block of " + std::to_string(block) +
                                                       " ranks does not divide the world of " + std::to_string(world_size_));
  if (block_prepared(block)) return;
  prepare_block_backend(block);
  blocks_.push_back(block);
}

bool Communicator::block_prepared(int block) const {
  return std::find(blocks_.begin(), blocks_.end(), block) != blocks_.end();
}

void Communicator::require_prepared(RankGroup group, CommOp op, const std::string& label) const {
  ZT_CHECK(group.block == 0 || block_prepared(group.block),
           where(op, label) + ": blocks of " + std::to_string(group.block) + " ranks were not prepared (prepare_block)");
}

uint64_t Communicator::all_gather_in_block(int block, const void* send, void* recv, size_t send_count, DType dt,
                                           const std::string& label, Event* done) {
  require_prepared(RankGroup::within(block), CommOp::AllGather, label);
  return all_gather_over(RankGroup::within(block), send, recv, send_count, dt, label, done);
}

uint64_t Communicator::all_to_all(const void* send, void* recv, size_t count, DType dt, RankGroup group,
                                  const std::string& label, Event* done) {
  require_prepared(group, CommOp::AllToAll, label);
  const size_t bytes = count * dtype_size(dt) * static_cast<size_t>(group.size(world_size_));
  ZT_CHECK(count == 0 || (send && recv), where(CommOp::AllToAll, label) + ": null buffer");
  ZT_CHECK(!overlaps(send, bytes, recv, bytes), where(CommOp::AllToAll, label) + ": send and recv overlap");
  Call c;
  c.op = CommOp::AllToAll;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dt;
  c.group = group;
  return issue(c, label, bytes, done);
}

uint64_t Communicator::broadcast(void* buf, size_t count, DType dt, int root, const std::string& label, Event* done) {
  ZT_CHECK(root >= 0 && root < world_size_, where(CommOp::Broadcast, label) + ": root " + std::to_string(root) +
                                                " is not a rank of a world of " + std::to_string(world_size_));
  ZT_CHECK(count == 0 || buf, where(CommOp::Broadcast, label) + ": null buffer");
  Call c;
  c.op = CommOp::Broadcast;
  c.send = buf;
  c.recv = buf;
  c.count = count;
  c.dtype = dt;
  c.root = root;
  c.in_place = true;
  return issue(c, label, count * dtype_size(dt), done);
}

uint64_t Communicator::barrier(const std::string& label, Event* done) {
  Call c;
  c.op = CommOp::Barrier;
  return issue(c, label, 0, done);
}

void Communicator::verify_same_across_ranks(uint64_t hash, const std::string& what) {
  uint64_t seq = log_.issue(CommOp::VerifySame, what, 1, sizeof(uint64_t) * static_cast<size_t>(world_size_),
                            DType::F32);
  std::vector<uint64_t> all(static_cast<size_t>(world_size_));
  gather_u64_blocking(seq, hash, all.data());
  // Every rank sees the same table, so every rank decides (and throws) the same way.
  std::map<uint64_t, std::vector<int>> ranks_by_value;
  for (int r = 0; r < world_size_; ++r) ranks_by_value[all[r]].push_back(r);
  if (ranks_by_value.size() == 1) return;
  std::string msg = "ranks disagree on " + what + ":";
  for (const auto& [value, ranks] : ranks_by_value) {
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%016llx", static_cast<unsigned long long>(value));
    msg += std::string(" ") + hex + " on rank" + (ranks.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < ranks.size(); ++i) msg += (i ? "," : "") + std::to_string(ranks[i]);
    msg += ";";
  }
  msg.back() = '.';
  std::vector<int> differ;  // ranks whose value differs from rank 0's
  for (int r = 0; r < world_size_; ++r)
    if (all[r] != all[0]) differ.push_back(r);
  msg += " Ranks differing from rank 0: ";
  for (size_t i = 0; i < differ.size(); ++i) msg += (i ? "," : "") + std::to_string(differ[i]);
  throw CommMismatchError(msg);
}

std::vector<std::string> Communicator::gather_strings(const std::string& mine, int root, const std::string& label) {
  ZT_CHECK(root >= 0 && root < world_size_, "gather_strings: root " + std::to_string(root) +
                                                " is not a rank of a world of " + std::to_string(world_size_));
  std::vector<std::string> all;
  const uint64_t seq = log_.issue(CommOp::GatherStrings, label, mine.size(), mine.size(), DType::F32);
  run_host_exchange(seq, [&](MPI_Comm comm) { all = exchange_strings(comm, mine, root); });
  return all;
}

std::vector<int64_t> Communicator::max_over_ranks(const std::vector<int64_t>& mine, const std::string& label) {
  std::vector<int64_t> out(mine.size());
  const uint64_t seq =
      log_.issue(CommOp::MaxOverRanks, label, mine.size(), mine.size() * sizeof(int64_t), DType::F32);
  run_host_exchange(seq, [&](MPI_Comm comm) {
    ZT_MPI_CHECK(MPI_Allreduce(mine.data(), out.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_MAX, comm));
  });
  return out;
}

std::unique_ptr<Communicator> make_communicator(Device& dev, MPI_Comm parent, const CommOptions& opts) {
  if (dev.kind() == DeviceKind::CUDA) return make_nccl_communicator(dev, parent, opts);
  return make_mpi_communicator(dev, parent, opts);
}

#if !defined(ZT_WITH_CUDA)
std::unique_ptr<Communicator> make_nccl_communicator(Device&, MPI_Comm, const CommOptions&) {
  throw InputError("the NCCL communicator needs the CUDA backend; this zerotrain was built without it");
}
#endif

}  // namespace zt
