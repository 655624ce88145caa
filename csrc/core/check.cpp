#include "zerotrain/core/check.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace zt {

namespace {
ProcessInfo& mutable_info() {
  static ProcessInfo info = [] {
    ProcessInfo p;
    char host[256] = {0};
    p.host = gethostname(host, sizeof(host) - 1) == 0 && host[0] ? host : "localhost";
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) p.exe.assign(exe, static_cast<size_t>(n));
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
      if (const char* v = std::getenv(var)) { p.rank = std::atoi(v); break; }
    }
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
      if (const char* v = std::getenv(var)) { p.world_size = std::atoi(v); break; }
    }
    return p;
  }();
  return info;
}
}  // namespace

const ProcessInfo& process_info() { return mutable_info(); }

void set_process_rank(int rank, int world_size) {
  mutable_info().rank = rank;
  mutable_info().world_size = world_size;
}

std::string process_tag() {
  const ProcessInfo& p = process_info();
  return "rank " + (p.rank < 0 ? std::string("?") : std::to_string(p.rank)) + " host " + p.host;
}

std::string mpi_error_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<size_t>(len));
}

[[noreturn]] void fatal(const char* file, int line, const std::string& call, const std::string& detail) {
  static std::mutex mu;  // one line per failure even when several threads fail at once
  {
    std::lock_guard<std::mutex> lock(mu);
    std::fprintf(stderr, "[zerotrain %s] %s:%d: %s failed%s%s\n", process_tag().c_str(), file, line,
                 call.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stderr);
  }
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace zt
