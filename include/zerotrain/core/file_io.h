// file_io.h — hostile-input-safe file access shared by every reader and writer.
//
// Invariants:
//  * A file that is read as input is a regular file: FIFOs, devices and directories are refused
//    before any byte is read (opened with O_NONBLOCK, so a FIFO cannot block the open).
//  * Whole-file reads are capped: a file larger than the cap is refused without reading it.
//  * An output file is written to a unique temporary in the target directory, fsynced, renamed
//    over the target and the directory fsynced; the temporary is removed on every error path.
//    An existing target that is not a regular file (a symlink, a device, a directory) is refused.
// Every failure is an InputError naming `what` (e.g. "config x.json") and the reason.
#pragma once
#include <cstdint>
#include <string>

namespace zt {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }

 private:
  int fd_ = -1;
};

// Opens `path` read-only; InputError unless it is a regular file. *size_out gets its size.
UniqueFd open_regular_file(const std::string& path, const std::string& what, int64_t* size_out = nullptr);

// The whole file, refused (InputError) when it is not a regular file or larger than max_bytes.
std::string read_regular_file(const std::string& path, const std::string& what, int64_t max_bytes);

// Size caps for the small text inputs (documented in README "Error handling").
constexpr int64_t kMaxConfigFileBytes = int64_t(16) << 20;  // DeepSpeed config
constexpr int64_t kMaxModelFileBytes = int64_t(1) << 20;    // model JSON

// Checks, without leaving anything behind, that `path` can be written as an output: its
// directory exists and is writable, and `path` is absent or a regular file (or, when
// allow_devices, a character device such as /dev/null). InputError names `flag`.
void check_output_path(const std::string& path, const std::string& flag, bool allow_devices = false);

// Writes a file atomically (see the file comment). Usage: AtomicFile f(path, what); write via
// fd(); f.commit(). Destroying it without commit() removes the temporary.
class AtomicFile {
 public:
  AtomicFile(const std::string& path, const std::string& what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t bytes);  // InputError on a short write
  void commit();                               // fsync, rename over path, fsync the directory
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, what_, tmp_;
  UniqueFd fd_;
};

}  // namespace zt
