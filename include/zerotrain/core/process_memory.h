// process_memory.h — this process's resident memory by kind, from /proc/self/smaps and
// /proc/self/status (Linux; nothing else tells): what the memory report shows beside the tracked
// categories, so every resident byte of a rank is named.
//
// Rows (Rss of the mappings of each kind; they add up to the resident total):
//   libraries          file-backed mappings of shared libraries and of the executable
//   mpi_shared_memory  shared-memory segments (/dev/shm: Open MPI's intra-node transport)
//   heap_anonymous     [heap] and anonymous mappings: the tracked allocations, the allocator's
//                      and the libraries' own buffers (OpenBLAS, MPI), thread stacks
//   main_stack         [stack]
//   other              every other mapping (other files, vdso, ...)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zt {

struct ProcessMemoryRow {
  std::string name;
  int64_t bytes = 0;
};

struct ProcessMemory {
  std::vector<ProcessMemoryRow> rows;  // the kinds above, in that order
  int64_t resident = 0;                // Σ rows (the smaps Rss total)
  int64_t vm_rss = 0, vm_hwm = 0;      // /proc/self/status: resident now, and its peak
  bool available = false;              // false where /proc/self/smaps cannot be read
};

ProcessMemory read_process_memory();
// Parses smaps text (exposed for tests).
ProcessMemory parse_smaps(const std::string& smaps);

}  // namespace zt
