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

struct NodeLocal {
  int local_rank = 0;
  int local_size = 1;
};
// Node-local rank and size by MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Collective over comm.
NodeLocal node_local(MPI_Comm comm);

// A private duplicate of `parent` (errors returned, not fatal) with this process's place in it.
// Collective over parent. The caller owns `comm` (MPI_Comm_free).
struct DupComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  NodeLocal local;
};
DupComm duplicate_comm(MPI_Comm parent);

// The CUDA device ordinal (within CUDA_VISIBLE_DEVICES) for this local rank: local_rank itself.
// Throws InputError when this node runs more ranks than it has visible GPUs (NCCL cannot run
// two ranks on one GPU).
int cuda_ordinal_for_local_rank(int local_rank, int local_size, int visible_devices);

}  // namespace zt
