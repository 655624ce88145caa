// file_io.cpp — see file_io.h.
#include "zerotrain/core/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd open_regular_file(const std::string& path, const std::string& what, int64_t* size_out) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of blocking forever.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw InputError(what + ": cannot open " + path + " for reading (" + errno_text() + ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw InputError(what + ": cannot stat " + path + " (" + errno_text() + ")");
  if (!S_ISREG(st.st_mode))
    throw InputError(what + ": " + path + " is " + kind_of(st.st_mode) + "; expected a regular file");
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  if (size_out) *size_out = static_cast<int64_t>(st.st_size);
  return fd;
}

std::string read_regular_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  int64_t size = 0;
  UniqueFd fd = open_regular_file(path, what, &size);
  if (size > max_bytes)
    throw InputError(what + ": " + path + " has " + std::to_string(size) + " bytes; expected at most " +
                     std::to_string(max_bytes));
  std::string out(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t got = ::read(fd.get(), &out[done], out.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError(what + ": read error on " + path + " (" + errno_text() + ")");
    if (got == 0) break;  // the file shrank while reading: use what is there
    done += static_cast<size_t>(got);
  }
  out.resize(done);
  return out;
}

namespace {

bool is_std_stream_name(const std::string& path) { return path == "/dev/stdout" || path == "/dev/stderr"; }

std::string base_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void fail_io(const std::string& what, const std::string& path, const std::string& doing, int err) {
  throw InputError(what + " " + path + ": " + doing + " (" + std::strerror(err) + ")");
}

void write_all(int fd, const void* data, size_t bytes, const std::string& what, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t got = ::write(fd, p, bytes);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail_io(what, path, "cannot write", got < 0 ? errno : ENOSPC);
    p += got;
    bytes -= static_cast<size_t>(got);
  }
}

// fsync that tolerates what devices and pipes answer (EINVAL, ENOTSUP, EROFS on a device).
bool fsync_failed(int fd) {
  if (::fsync(fd) == 0) return false;
  return !(errno == EINVAL || errno == ENOTSUP || errno == EROFS);
}

// A device target opened for writing in place: the process's stdout/stderr (dup'ed) or a
// character device named directly (O_NOFOLLOW; re-checked with fstat after the open).
UniqueFd open_device_target(const std::string& path, const std::string& what) {
  if (is_std_stream_name(path)) {
    UniqueFd fd(::fcntl(path == "/dev/stdout" ? 1 : 2, F_DUPFD_CLOEXEC, 3));
    if (fd.get() < 0) fail_io(what, path, "cannot use the standard stream", errno);
    return fd;
  }
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) fail_io(what, path, "cannot open for writing", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISCHR(st.st_mode))
    throw InputError(what + " " + path + ": the path is not a character device any more; refusing to write");
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

bool is_device_output(const std::string& path) {
  if (is_std_stream_name(path)) return true;
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

std::string per_rank_output(const std::string& path, int rank) {
  return rank == 0 || is_device_output(path) ? path : path + ".rank" + std::to_string(rank);
}

void check_output_path(const std::string& path, const std::string& flag, bool allow_devices) {
  if (path.empty()) throw InputError(flag + ": empty path; expected a file name");
  if (allow_devices && is_std_stream_name(path)) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    const bool ok = S_ISREG(st.st_mode) || (allow_devices && S_ISCHR(st.st_mode));
    if (!ok)
      throw InputError(flag + " " + path + ": the path exists and is " + kind_of(st.st_mode) +
                       "; expected a regular file (or a new name) to write");
    if (::access(path.c_str(), W_OK) != 0)
      throw InputError(flag + " " + path + ": cannot write (" + errno_text() + ")");
    if (!S_ISREG(st.st_mode)) return;
  }
  const std::string dir = dir_of(path);
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
    throw InputError(flag + " " + path + ": directory " + dir + " does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError(flag + " " + path + ": cannot create files in " + dir + " (" + errno_text() + ")");
}

std::string resolved_path(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty()) return "";
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf)) return buf;
  const size_t slash = p.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
  const std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  if (parent == p) return "";
  const std::string rp = resolved_path(parent);
  if (rp.empty() || base == ".") return rp;
  if (base == "..") return rp == "/" ? rp : dir_of(rp);
  return rp == "/" ? "/" + base : rp + "/" + base;
}

bool path_within(const std::string& p, const std::string& dir) {
  if (p.empty() || dir.empty()) return false;
  if (p == dir || dir == "/") return true;
  return p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/';
}

std::string temp_owner_tag() {
  std::string h = process_info().host;
  for (char& c : h)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) c = '_';
  return h + "." + std::to_string(::getpid());
}

bool temp_owner_gone(const std::string& owner) {
  const size_t dot = owner.rfind('.');
  if (dot == std::string::npos || dot + 1 >= owner.size() || owner.size() - dot - 1 > 9) return false;
  const std::string pid_text = owner.substr(dot + 1);
  for (char c : pid_text)
    if (c < '0' || c > '9') return false;
  const std::string mine = temp_owner_tag();
  if (owner.substr(0, dot) != mine.substr(0, mine.rfind('.'))) return false;  // another host: cannot tell
  const long pid = std::stol(pid_text);
  if (pid <= 0 || pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::vector<std::string> remove_stale_temporaries(const std::string& path) {
  std::vector<std::string> removed;
  const std::string dir = dir_of(path), prefix = base_of(path) + ".tmp.";
  if (prefix.size() <= 5) return removed;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) names.push_back(e->d_name);
  ::closedir(d);
  for (const std::string& n : names) {
    // <prefix><host>.<pid>.XXXXXX: the owner is what lies between the prefix and the last '.'.
    if (n.size() <= prefix.size() + 7 || n.compare(0, prefix.size(), prefix) != 0 || n[n.size() - 7] != '.') continue;
    if (!temp_owner_gone(n.substr(prefix.size(), n.size() - 7 - prefix.size()))) continue;
    const std::string full = dir == "/" ? "/" + n : dir + "/" + n;
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(full.c_str()) == 0) removed.push_back(full);
  }
  return removed;
}

AtomicFile::AtomicFile(const std::string& path, const std::string& what, bool allow_devices)
    : path_(path), what_(what) {
  check_output_path(path, what, allow_devices);
  if (allow_devices && is_device_output(path)) {
    fd_ = open_device_target(path, what);
    direct_ = true;
    return;
  }
  remove_stale_temporaries(path);
  // A unique temporary in the target directory (same file system, so rename is atomic): two
  // writers to one path never share a temporary; mkstemp's O_EXCL never follows a symlink.
  const std::string pattern = path + ".tmp." + temp_owner_tag() + ".XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) throw InputError(what + " " + path + ": cannot create a temporary file (" + errno_text() + ")");
  fd_ = UniqueFd(fd);
  tmp_ = name.data();
  ::fchmod(fd, 0644);
}

AtomicFile::~AtomicFile() {
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (fd_.get() < 0) throw InputError(what_ + " " + path_ + ": write after commit");
  write_all(fd_.get(), data, bytes, what_, path_);
}

void AtomicFile::write_at(int64_t offset, const void* data, size_t bytes) {
  if (fd_.get() < 0 || direct_) throw InputError(what_ + " " + path_ + ": cannot rewrite a device or a committed file");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t got = ::pwrite(fd_.get(), p, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail_io(what_, path_, "cannot write", got < 0 ? errno : ENOSPC);
    p += got;
    bytes -= static_cast<size_t>(got);
    offset += got;
  }
}

void AtomicFile::commit() {
  if (fd_.get() < 0) throw InputError(what_ + " " + path_ + ": committed twice");
  if (direct_) {
    if (::close(fd_.release()) != 0) fail_io(what_, path_, "close failed", errno);
    return;
  }
  if (::fsync(fd_.get()) != 0) fail_io(what_, path_, "fsync failed", errno);
  if (::close(fd_.release()) != 0) fail_io(what_, path_, "close failed", errno);
  // Re-check just before replacing: the target may have become a symlink or device since.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw InputError(what_ + " " + path_ + ": the path is " + kind_of(st.st_mode) + "; refusing to replace it");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw InputError(what_ + ": cannot rename " + tmp_ + " to " + path_ + " (" + errno_text() + ")");
  tmp_.clear();
  UniqueFd dir(::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || fsync_failed(dir.get())) fail_io(what_, path_, "fsync of its directory failed", errno);
}

StreamFile::StreamFile(const std::string& path, const std::string& what, bool allow_devices)
    : path_(path), what_(what) {
  check_output_path(path, what, allow_devices);
  if (allow_devices && is_device_output(path)) {
    fd_ = open_device_target(path, what);
    return;
  }
  // O_NOFOLLOW: a symlink planted at the name fails the open (ELOOP) instead of being followed;
  // O_NONBLOCK: a FIFO planted since the check cannot block the open.
  fd_ = UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644));
  if (fd_.get() < 0) fail_io(what, path, "cannot open for writing", errno);
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw InputError(what + " " + path + ": the path is not a regular file; refusing to write");
  if (::ftruncate(fd_.get(), 0) != 0) fail_io(what, path, "cannot truncate", errno);
  int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd_.get(), F_SETFL, flags & ~O_NONBLOCK);
  regular_ = true;
}

void StreamFile::write(const std::string& text) {
  if (fd_.get() < 0) throw InputError(what_ + " " + path_ + ": write after close");
  write_all(fd_.get(), text.data(), text.size(), what_, path_);
}

void StreamFile::close() {
  if (fd_.get() < 0) return;
  if (regular_ && ::fsync(fd_.get()) != 0) fail_io(what_, path_, "fsync failed", errno);
  if (::close(fd_.release()) != 0) fail_io(what_, path_, "close failed", errno);
}

}  // namespace zt
