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
#include <vector>

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

// Size caps for the small text inputs (documented in docs/usage.md §6, "Error handling and exit codes").
constexpr int64_t kMaxConfigFileBytes = int64_t(16) << 20;  // DeepSpeed config
constexpr int64_t kMaxModelFileBytes = int64_t(1) << 20;    // model JSON

// Outputs (every file the program writes goes through check_output_path and one of the two
// writers below):
//  * No symbolic link is followed at the target's name, and the target is a regular file or a
//    new name. With allow_devices, two more targets are accepted: a character device named
//    directly (/dev/null, /dev/full, a terminal) and exactly "/dev/stdout" or "/dev/stderr",
//    which write to the process's own standard output or error without opening the path.
//  * Every write, fsync and close is checked: a short write, a full disk (ENOSPC) or a failed
//    fsync is an InputError naming the file, never a truncated file and success.
//  * Temporaries are named <target>.tmp.<host>.<pid>.XXXXXX (temp_owner_tag()), so a later run
//    can tell its own leftovers from anyone else's (remove_stale_temporaries).

// Whether `path` is one of the device targets above ("/dev/stdout", "/dev/stderr", or a
// character device named directly).
bool is_device_output(const std::string& path);

// Rank r's name for a per-rank output: `path` on rank 0 and for a device target (every rank
// writes to the device), else path + ".rank<r>".
std::string per_rank_output(const std::string& path, int rank);

// Checks, without leaving anything behind, that `path` can be written as an output: its
// directory exists and is writable, and `path` is absent or a regular file (or, when
// allow_devices, one of the devices above). InputError names `flag`; an empty path is one.
void check_output_path(const std::string& path, const std::string& flag, bool allow_devices = false);

// `path` made absolute with every symlink, "." and ".." resolved in the part that exists (the
// rest appended as written; trailing slashes dropped): two spellings of one file resolve alike.
// Empty when no prefix of it can be resolved.
std::string resolved_path(const std::string& path);

// Whether resolved path `p` is `dir` or lies below it (both from resolved_path).
bool path_within(const std::string& p, const std::string& dir);

// "<host>.<pid>" of this process: the host name with every character other than [A-Za-z0-9_-]
// replaced by '_'.
std::string temp_owner_tag();

// Whether `owner` ("<host>.<pid>", as temp_owner_tag writes it) names a process of this host
// that no longer exists. Another host's owner, or a live process, is never gone.
bool temp_owner_gone(const std::string& owner);

// Removes the leftovers of killed writers of `path`: regular files in its directory named
// <basename>.tmp.<host>.<pid>.XXXXXX whose owner is gone (temp_owner_gone). Nothing else is
// touched. Returns the paths removed.
std::vector<std::string> remove_stale_temporaries(const std::string& path);

// Writes a whole file atomically (see the file comment). Usage: AtomicFile f(path, what); write;
// f.commit(). Destroying it without commit() removes the temporary. With allow_devices and a
// device target (see above) the bytes go straight to the device and commit() closes it.
class AtomicFile {
 public:
  AtomicFile(const std::string& path, const std::string& what, bool allow_devices = false);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t bytes);  // InputError on a short write
  void write(const std::string& text) { write(text.data(), text.size()); }
  // Overwrites bytes already written (a header completed at the end); not for a device target.
  void write_at(int64_t offset, const void* data, size_t bytes);
  void commit();                               // fsync, rename over path, fsync the directory
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, what_, tmp_;
  UniqueFd fd_;
  bool direct_ = false;  // a device target: no temporary
};

// An output written as the run goes (metrics and comm logs, which a user may follow while it
// grows): opened in place without following a symlink and truncated; a regular file or, with
// allow_devices, a device as above. Every write is checked; close() fsyncs a regular file and
// closes it, checked. The destructor closes without checking.
class StreamFile {
 public:
  StreamFile(const std::string& path, const std::string& what, bool allow_devices);
  StreamFile(StreamFile&&) noexcept = default;
  StreamFile& operator=(StreamFile&&) noexcept = default;
  void write(const std::string& text);  // InputError on a short write or a closed file
  void close();                         // InputError when fsync or close fails; idempotent
  const std::string& path() const { return path_; }

 private:
  std::string path_, what_;
  UniqueFd fd_;
  bool regular_ = false;
};

}  // namespace zt
