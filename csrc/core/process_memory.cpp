// process_memory.cpp — resident memory by kind (zerotrain/core/process_memory.h).
#include "zerotrain/core/process_memory.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

enum Kind { kLibraries, kMpiShm, kHeapAnon, kMainStack, kOther, kKinds };
const char* const kNames[kKinds] = {"libraries", "mpi_shared_memory", "heap_anonymous", "main_stack", "other"};

Kind kind_of(const std::string& path, bool executable_file) {
  if (path.empty() || path == "[heap]" || path.rfind("[anon", 0) == 0) return kHeapAnon;
  if (path == "[stack]") return kMainStack;
  if (path.rfind("/dev/shm/", 0) == 0 || path.find("vader_segment") != std::string::npos) return kMpiShm;
  const bool shared_object = path.find(".so") != std::string::npos;
  if (shared_object || executable_file) return kLibraries;
  return kOther;
}

int64_t status_kib(const std::string& key) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  return 0;
}

}  // namespace

ProcessMemory parse_smaps(const std::string& smaps) {
  ProcessMemory p;
  int64_t bytes[kKinds] = {0};
  const std::string& exe = process_info().exe;
  std::istringstream in(smaps);
  Kind current = kOther;
  for (std::string line; std::getline(in, line);) {
    // A mapping header: "start-end perms offset dev inode [path]".
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(':') > dash + 1 && std::isxdigit(static_cast<unsigned char>(line[0]))) {
      std::istringstream h(line);
      std::string range, perms, offset, dev, inode, path;
      h >> range >> perms >> offset >> dev >> inode;
      std::getline(h >> std::ws, path);
      current = kind_of(path, !exe.empty() && path == exe);
      continue;
    }
    if (line.rfind("Rss:", 0) == 0) bytes[current] += std::stoll(line.substr(4)) * 1024;
  }
  for (int k = 0; k < kKinds; ++k) {
    p.rows.push_back({kNames[k], bytes[k]});
    p.resident += bytes[k];
  }
  p.available = true;
  return p;
}

ProcessMemory read_process_memory() {
  std::ifstream f("/proc/self/smaps");
  if (!f) return {};
  std::stringstream text;
  text << f.rdbuf();
  ProcessMemory p = parse_smaps(text.str());
  p.vm_rss = status_kib("VmRSS");
  p.vm_hwm = status_kib("VmHWM");
  return p;
}

}  // namespace zt
