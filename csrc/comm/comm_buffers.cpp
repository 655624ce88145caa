// comm_buffers.cpp — the communicators' own buffers per rank (communicator.h, "The communicator's
// own buffers"): the MPI backend's chunk scratch, which it allocates from mpi_scratch_bytes, and
// an estimate of NCCL's transport buffers, which NCCL allocates itself.
#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/check.h"

namespace zt {

namespace {

// NCCL parses its integer variables with strtoll(base 0): decimal or 0x hex. Unset or empty: `dflt`.
int64_t env_positive(const char* name, int64_t dflt, int64_t hi, const char* what) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 0);
  if (end == v || *end != '\0' || errno != 0 || x < 1 || x > hi)
    throw InputError(std::string(name) + "='" + v + "': expected " + what + " from 1 to " + std::to_string(hi) +
                     " (NCCL's default: " + std::to_string(dflt) + ")");
  return x;
}

}  // namespace

NcclBufferSizes NcclBufferSizes::from_env() {
  NcclBufferSizes s;
  const int64_t int_max = 2147483647;  // NCCL keeps the sizes in an int
  s.simple = env_positive("NCCL_BUFFSIZE", s.simple, int_max, "a buffer size in bytes");
  s.ll = env_positive("NCCL_LL_BUFFSIZE", s.ll, int_max, "a buffer size in bytes");
  s.ll128 = env_positive("NCCL_LL128_BUFFSIZE", s.ll128, int_max, "a buffer size in bytes");
  s.channels = env_positive("NCCL_MAX_NCHANNELS", s.channels, 64, "a channel count");  // MAXCHANNELS is 64 (2.25+)
  return s;
}

int64_t nccl_buffer_bytes(const NcclBufferSizes& s, int world) {
  if (world <= 1) return 0;
  const int64_t connections_per_channel = 2;
  return s.channels * connections_per_channel * (s.simple + s.ll + s.ll128);
}

int64_t mpi_scratch_bytes(int world, const CommOptions& o) {
  if (world <= 1) return 0;  // one rank: every collective is a local copy or reduction
  const int64_t chunk = static_cast<int64_t>(std::max<size_t>(o.chunk_bytes, 64));
  return std::max(2 * static_cast<int64_t>(world - 1) * chunk,
                  static_cast<int64_t>(world) * static_cast<int64_t>(o.small_all_reduce_bytes));
}

std::vector<CommBufferSpec> comm_buffer_plan(CommBackend b, int world, const CommOptions& o) {
  std::vector<CommBufferSpec> out;
  if (b == CommBackend::MPI) {
    // [2][world−1][chunk] pipelined exchange slots, or [world][bytes] small all-reduce contributions.
    const int64_t scratch = mpi_scratch_bytes(world, o);
    if (scratch > 0) out.push_back({"mpi chunk scratch", scratch, false});
    return out;
  }
  out.push_back({"nccl barrier scalar", static_cast<int64_t>(sizeof(float)), false});
  const int64_t nccl = nccl_buffer_bytes(NcclBufferSizes::from_env(), world);
  if (nccl > 0) out.push_back({"nccl buffers (estimate)", nccl, true});
  return out;
}

}  // namespace zt
