// ckpt_fs.cpp — POSIX file-system steps for crash-safe checkpoints (ckpt_fs.h).
#include "zerotrain/ckpt/ckpt_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace zt::ckptfs {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw InputError("checkpoint: cannot " + what + " " + path + ": " + std::strerror(err));
}

std::string parent_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path) == 0 ? 0 : errno; }

}  // namespace

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return static_cast<int64_t>(st.st_size);
}

void make_dirs(const std::string& dir) {
  if (dir.empty() || is_dir(dir)) return;
  const std::string parent = parent_of(dir);
  if (parent != dir && !is_dir(parent)) make_dirs(parent);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail("create directory", dir, errno);
  if (!is_dir(dir)) throw InputError("checkpoint: " + dir + " exists and is not a directory");
}

void remove_tree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    if (::remove(path.c_str()) != 0) fail("remove", path, errno);
    return;
  }
  const int rc = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc != 0) fail("remove", path, rc > 0 ? rc : errno);
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open (to fsync)", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the rename is then as durable as they make it.
  if (rc != 0 && !(err == EINVAL && is_dir(path))) fail("fsync", path, err);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile f(path, "checkpoint: file");  // unique O_EXCL temporary; a symlink at `path` is refused
  f.write(text);
  f.commit();
}

std::string read_file(const std::string& path, const std::string& what) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(what + " " + path + ": cannot open: " + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw InputError(what + " " + path + ": read error");
  return out;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void install_dir(const std::string& from, const std::string& to) {
  if (!exists(to)) {
    if (::rename(from.c_str(), to.c_str()) != 0) fail("rename " + from + " to", to, errno);
  } else {
    if (::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0)
      fail("exchange " + from + " with", to, errno);
    fsync_path(parent_of(to));
    remove_tree(from);  // now the old directory
  }
  fsync_path(parent_of(to));
}

void check_writable_dir(const std::string& dir) {
  make_dirs(dir);
  // mkstemp creates a new name with O_EXCL: nothing planted in DIR is opened or followed.
  const std::string pattern = join(dir, ".zerotrain-write-probe." + temp_owner_tag() + ".XXXXXX");
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  UniqueFd fd(::mkstemp(name.data()));
  if (fd.get() < 0) fail("write into", dir, errno);
  ::unlink(name.data());
}

}  // namespace zt::ckptfs
