// mpi_env.cpp — MPI init/finalize with the thread level the comm layer needs; node-local ranks.
#include "zerotrain/comm/mpi_env.h"

#include <cstdio>

#include "zerotrain/core/check.h"

namespace zt {

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
  MPI_Comm local;
  int rank = 0;
  ZT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ZT_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  NodeLocal out;
  ZT_MPI_CHECK(MPI_Comm_rank(local, &out.local_rank));
  ZT_MPI_CHECK(MPI_Comm_size(local, &out.local_size));
  ZT_MPI_CHECK(MPI_Comm_free(&local));
  return out;
}

int cuda_ordinal_for_local_rank(int local_rank, int local_size, int visible_devices) {
  if (visible_devices <= 0) throw InputError("no CUDA device is visible to this rank (check CUDA_VISIBLE_DEVICES)");
  if (local_size > visible_devices) {
    throw InputError("this node runs " + std::to_string(local_size) + " ranks but only " +
                     std::to_string(visible_devices) +
                     " GPUs are visible (CUDA_VISIBLE_DEVICES); launch one rank per GPU");
  }
  return local_rank;
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
