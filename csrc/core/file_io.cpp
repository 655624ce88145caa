// file_io.cpp — see file_io.h.
#include "zerotrain/core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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

void check_output_path(const std::string& path, const std::string& flag, bool allow_devices) {
  if (path.empty()) throw InputError(flag + ": empty path; expected a file name");
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

AtomicFile::AtomicFile(const std::string& path, const std::string& what) : path_(path), what_(what) {
  check_output_path(path, what);
  // A unique temporary in the target directory (same file system, so rename is atomic): two
  // writers to one path never share a temporary.
  std::vector<char> name(path.begin(), path.end());
  const char suffix[] = ".tmp.XXXXXX";
  name.insert(name.end(), suffix, suffix + sizeof(suffix));  // includes the NUL
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
  if (tmp_.empty()) throw InputError(what_ + " " + path_ + ": write after commit");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t got = ::write(fd_.get(), p, bytes);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError(what_ + " " + path_ + ": cannot write " + tmp_ + " (" + errno_text() + ")");
    p += got;
    bytes -= static_cast<size_t>(got);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_.get()) != 0) throw InputError(what_ + " " + path_ + ": fsync failed (" + errno_text() + ")");
  if (::close(fd_.release()) != 0) throw InputError(what_ + " " + path_ + ": close failed (" + errno_text() + ")");
  // Re-check just before replacing: the target may have become a symlink or device since.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw InputError(what_ + " " + path_ + ": the path is " + kind_of(st.st_mode) + "; refusing to replace it");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw InputError(what_ + ": cannot rename " + tmp_ + " to " + path_ + " (" + errno_text() + ")");
  tmp_.clear();
  UniqueFd dir(::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());  // best effort: the rename is durable
}

}  // namespace zt
