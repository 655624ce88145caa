// mpi_env.cpp — MPI init/finalize with the thread level the comm layer needs; node-local ranks.
#include "zerotrain/comm/mpi_env.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstring>

#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"

namespace zt {

namespace {

// The node-local sub-communicator of `comm` (MPI_COMM_TYPE_SHARED), freed on scope exit.
class LocalComm {
 public:
  explicit LocalComm(MPI_Comm comm) {
    int rank = 0;
    ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    ZT_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &comm_));
    ZT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    ZT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~LocalComm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  }
  LocalComm(const LocalComm&) = delete;
  LocalComm& operator=(const LocalComm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// True on every rank of comm when `failed_here` is true on any of them (collective).
bool any_rank(MPI_Comm comm, bool failed_here) {
  int mine = failed_here ? 1 : 0, any = 0;
  ZT_MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm));
  return any != 0;
}

// "0", "0 and 2", "1, 3 and 5".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int inited = 0;
  ZT_MPI_CHECK(MPI_Initialized(&inited));
  if (!inited) {
    ZT_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided_));
    owns_ = true;
  } else {
    ZT_MPI_CHECK(MPI_Query_thread(&provided_));
  }
  ZT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  ZT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  set_process_rank(rank_, world_size_);
  ZT_CHECK(provided_ >= MPI_THREAD_SERIALIZED,
           "MPI provides thread level " + std::to_string(provided_) +
               "; zerotrain's comm thread needs at least MPI_THREAD_SERIALIZED");
}

MpiEnvironment::~MpiEnvironment() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool MpiEnvironment::thread_multiple() {
  int provided = 0;
  return MPI_Query_thread(&provided) == MPI_SUCCESS && provided >= MPI_THREAD_MULTIPLE;
}

NodeLocal node_local(MPI_Comm comm) {
  LocalComm local(comm);
  NodeLocal out;
  out.local_rank = local.rank();
  out.local_size = local.size();
  int rank = 0;
  ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  // Each node's local rank 0 is its lowest rank (split_type keys by rank), so numbering the
  // leaders in rank order numbers the nodes; each leader then tells its node.
  const int leads = out.local_rank == 0 ? 1 : 0;
  int leaders_below = 0;
  ZT_MPI_CHECK(MPI_Exscan(&leads, &leaders_below, 1, MPI_INT, MPI_SUM, comm));
  out.node = rank == 0 ? 0 : leaders_below;  // MPI_Exscan leaves rank 0's result undefined
  ZT_MPI_CHECK(MPI_Bcast(&out.node, 1, MPI_INT, 0, local.get()));
  ZT_MPI_CHECK(MPI_Allreduce(&leads, &out.nodes, 1, MPI_INT, MPI_SUM, comm));
  // Blocked: every rank sits at node·local_size + local_rank and every node has the same size.
  int ok[3] = {rank == out.node * out.local_size + out.local_rank ? 1 : 0, out.local_size, -out.local_size};
  int all[3] = {0, 0, 0};
  ok[0] = -ok[0];  // max of −ok = −(min of ok)
  ZT_MPI_CHECK(MPI_Allreduce(ok, all, 3, MPI_INT, MPI_MAX, comm));
  out.blocked = all[0] == -1 && all[1] == -all[2];
  return out;
}

int cuda_ordinal_for_local_rank(int local_rank, int local_size, int visible_devices) {
  if (visible_devices <= 0)
    throw InputError("no CUDA device is visible to local rank " + std::to_string(local_rank) +
                     " (check CUDA_VISIBLE_DEVICES and the launcher's GPU binding)");
  // One device per rank (the launcher or a wrapper gave each rank its own): use it. Whether
  // they really are different GPUs is checked by bus id (check_distinct_local_devices).
  if (visible_devices == 1) return 0;
  if (local_size > visible_devices) {
    throw InputError("this node runs " + std::to_string(local_size) + " ranks but each sees only " +
                     std::to_string(visible_devices) +
                     " GPUs (CUDA_VISIBLE_DEVICES); launch one rank per GPU, or give each rank its own GPU "
                     "(Slurm --gpus-per-task=1)");
  }
  return local_rank;
}

std::vector<SharedDevice> find_shared_devices(const std::vector<RankBusId>& ranks) {
  std::vector<SharedDevice> groups;  // one per distinct bus id, in order of first appearance
  for (const RankBusId& r : ranks) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const SharedDevice& g) { return g.bus_id == r.bus_id; });
    if (it == groups.end()) groups.push_back({r.bus_id, {r.rank}});
    else it->ranks.push_back(r.rank);
  }
  std::vector<SharedDevice> shared;
  for (SharedDevice& g : groups) {
    if (g.ranks.size() < 2) continue;
    std::sort(g.ranks.begin(), g.ranks.end());
    shared.push_back(std::move(g));
  }
  return shared;
}

std::string shared_devices_message(const std::vector<SharedDevice>& shared, const std::string& host) {
  if (shared.empty()) return "";
  std::string msg = "host " + host + ": ";
  for (size_t i = 0; i < shared.size(); ++i)
    msg += (i ? "; ranks " : "ranks ") + rank_list(shared[i].ranks) + " share GPU " + shared[i].bus_id;
  return msg +
         " (NCCL needs one GPU per rank: give each rank its own device, e.g. Slurm --gpus-per-task=1 or "
         "CUDA_VISIBLE_DEVICES per rank, or run no more ranks per node than GPUs)";
}

void check_distinct_local_devices(MPI_Comm comm, const std::string& bus_id) {
  int rank = 0;
  ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  LocalComm local(comm);
  constexpr int kLen = 64;  // cudaDeviceGetPCIBusId needs 13; room for longer domains
  std::array<char, kLen> mine{};
  std::strncpy(mine.data(), bus_id.c_str(), kLen - 1);
  std::vector<char> buses(static_cast<size_t>(kLen) * static_cast<size_t>(local.size()));
  std::vector<int> ranks(static_cast<size_t>(local.size()));
  ZT_MPI_CHECK(MPI_Allgather(&rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, local.get()));
  ZT_MPI_CHECK(MPI_Allgather(mine.data(), kLen, MPI_CHAR, buses.data(), kLen, MPI_CHAR, local.get()));
  std::vector<RankBusId> all;
  for (int i = 0; i < local.size(); ++i) all.push_back({ranks[static_cast<size_t>(i)], std::string(buses.data() + i * kLen)});
  const std::string msg = shared_devices_message(find_shared_devices(all), process_info().host);
  // Every rank of comm learns the outcome, so no rank goes on into NCCL set-up alone.
  const bool any = any_rank(comm, !msg.empty());
  if (!msg.empty()) throw InputError(msg);
  if (any) throw InputError("two ranks share one GPU on another node (see that node's message); " + process_tag());
}

int select_local_cuda_device(MPI_Comm comm) {
  const NodeLocal nl = node_local(comm);
  std::string error;
  int ordinal = -1;
  std::string bus_id;
  try {
    ordinal = cuda_ordinal_for_local_rank(nl.local_rank, nl.local_size, cuda_device_count());
    bus_id = cuda_pci_bus_id(ordinal);
  } catch (const InputError& e) {
    error = e.what();
  }
  // Agree before the bus-id exchange, so a rank that failed here never leaves the others waiting.
  const bool any = any_rank(comm, !error.empty());
  if (!error.empty()) throw InputError(error + " [" + process_tag() + "]");
  if (any) throw InputError("GPU selection failed on another rank (see its message); " + process_tag());
  check_distinct_local_devices(comm, bus_id);
  return ordinal;
}

#if !defined(ZT_WITH_CUDA)
std::string cuda_pci_bus_id(int) {
  throw InputError("this zerotrain was built without the CUDA backend: no GPU bus id to read");
}
#endif

std::vector<std::string> exchange_strings(MPI_Comm comm, const std::string& mine, int root) {
  int rank = 0, n = 1;
  ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ZT_MPI_CHECK(MPI_Comm_size(comm, &n));
  ZT_CHECK(mine.size() <= static_cast<size_t>(INT_MAX), "exchange_strings: a string exceeds INT_MAX bytes");
  const bool all_ranks = root == kAllRanks, receives = all_ranks || rank == root;
  const int len = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(n)), offsets(static_cast<size_t>(n));
  if (all_ranks) ZT_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  else ZT_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm));
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    offsets[r] = static_cast<int>(total);
    total += static_cast<size_t>(lengths[r]);
    ZT_CHECK(!receives || total <= static_cast<size_t>(INT_MAX), "exchange_strings: the strings exceed INT_MAX bytes");
  }
  std::vector<char> bytes(total + 1);
  if (all_ranks)
    ZT_MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, bytes.data(), lengths.data(), offsets.data(), MPI_CHAR,
                                comm));
  else
    ZT_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, bytes.data(), lengths.data(), offsets.data(), MPI_CHAR,
                             root, comm));
  std::vector<std::string> all;
  if (!receives) return all;
  for (int r = 0; r < n; ++r) all.emplace_back(bytes.data() + offsets[r], static_cast<size_t>(lengths[r]));
  return all;
}

DupComm duplicate_comm(MPI_Comm parent) {
  DupComm d;
  ZT_MPI_CHECK(MPI_Comm_dup(parent, &d.comm));
  ZT_MPI_CHECK(MPI_Comm_set_errhandler(d.comm, MPI_ERRORS_RETURN));
  ZT_MPI_CHECK(MPI_Comm_rank(d.comm, &d.rank));
  ZT_MPI_CHECK(MPI_Comm_size(d.comm, &d.size));
  d.local = node_local(d.comm);
  return d;
}

}  // namespace zt
