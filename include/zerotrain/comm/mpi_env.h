// mpi_env.h — MPI start-up and shutdown, and node-local rank helpers.
//
// Threading rule: MpiEnvironment asks for MPI_THREAD_MULTIPLE. Collectives are called only by
// a communicator's comm thread (MPI backend); the main thread calls MPI only for set-up
// (communicator construction, NCCL id broadcast) and the watchdog thread only to exchange hang
// alerts and to abort. With MULTIPLE this is always safe. If the library provides only
// SERIALIZED, the environment still starts, watchdog alerts are switched off, and the program
// must keep to one communicator and construct/destroy it while no collective is in flight.
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace zt {

class MpiEnvironment {
 public:
  // Initialises MPI (unless already initialised by someone else, who then also finalises) and
  // sets zt::set_process_rank. Fails if the library provides less than MPI_THREAD_SERIALIZED.
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();  // MPI_Finalize, if this object initialised MPI
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int thread_level() const { return provided_; }  // MPI_THREAD_*
  static bool thread_multiple();                  // the running library provides MULTIPLE

 private:
  bool owns_ = false;
  int provided_ = 0;
  int rank_ = 0, world_size_ = 1;
};

// Where a rank runs: its node (the processes sharing memory with it) and its place there.
struct NodeLocal {
  int local_rank = 0;
  int local_size = 1;
  int node = 0;          // nodes numbered by their lowest rank: node 0 holds rank 0
  int nodes = 1;
  // Every node holds local_size ranks, numbered node·local_size + local_rank (what mpirun's
  // default --map-by slot and zt-launch --hostfile give): a ring in rank order then crosses each
  // node boundary once. False for round-robin or uneven placements.
  bool blocked = true;
};
// Node-local rank and size by MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), the node's index and
// count, and whether the placement is blocked. Collective over comm.
NodeLocal node_local(MPI_Comm comm);

// A private duplicate of `parent` (errors returned, not fatal) with this process's place in it.
// Collective over parent. The caller owns `comm` (MPI_Comm_free).
struct DupComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  NodeLocal local;
};
DupComm duplicate_comm(MPI_Comm parent);

// Every rank's string (any length, any bytes), in rank order: on `root` only (the other ranks get
// an empty vector), or on every rank when root == kAllRanks. Blocking MPI calls over comm
// (MPI_Gather[v] / MPI_Allgather[v]); every rank of comm calls it with the same root.
constexpr int kAllRanks = -1;
std::vector<std::string> exchange_strings(MPI_Comm comm, const std::string& mine, int root);

// ---- Which GPU each rank drives -----------------------------------------------------------
// The CUDA device ordinal (within this rank's visible devices) for a node-local rank:
//  * exactly one visible device (Slurm --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set per rank by
//    a wrapper): ordinal 0, whatever local_size is — check_distinct_local_devices then catches the
//    case where every rank sees the same single GPU;
//  * several visible devices: local_rank; InputError when the node runs more ranks than that
//    (NCCL cannot run two ranks on one GPU);
//  * none: InputError.
// Pure (no MPI, no CUDA calls).
int cuda_ordinal_for_local_rank(int local_rank, int local_size, int visible_devices);

// One node-local rank's GPU, by PCI bus id ("0000:1b:00.0").
struct RankBusId {
  int rank = 0;          // rank in the communicator the check ran over
  std::string bus_id;
};
// A GPU that two or more ranks ended up on, ranks ascending.
struct SharedDevice {
  std::string bus_id;
  std::vector<int> ranks;
};
// Every bus id held by more than one rank, in order of first appearance. Pure.
std::vector<SharedDevice> find_shared_devices(const std::vector<RankBusId>& ranks);
// "host H: ranks 0 and 2 share GPU 0000:1b:00.0; ranks 1, 3 and 5 share GPU ...", plus how to
// launch instead; "" when `shared` is empty. Pure.
std::string shared_devices_message(const std::vector<SharedDevice>& shared, const std::string& host);

// Collective over comm: gathers each node-local rank's PCI bus id over the node-local
// communicator and throws InputError (on every rank of comm) when two ranks on one node drive
// the same GPU, naming ranks, host and bus id. `bus_id` is this rank's (cuda_pci_bus_id).
void check_distinct_local_devices(MPI_Comm comm, const std::string& bus_id);

// PCI bus id of CUDA device `ordinal` (cudaDeviceGetPCIBusId). Fails when the CUDA backend is
// not built.
std::string cuda_pci_bus_id(int ordinal);

// Start-up helper, collective over comm: picks this rank's device (cuda_ordinal_for_local_rank
// over the node-local ranks of comm and cuda_device_count()), then check_distinct_local_devices.
// Returns the ordinal to pass to make_cuda_device.
int select_local_cuda_device(MPI_Comm comm);

}  // namespace zt
