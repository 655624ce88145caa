// ckpt_fs.h — the file-system steps that make checkpoint saves crash-safe (POSIX). Every
// failure is an InputError naming the path and the system's reason.
//
// Durability rule used by the checkpoint code: a file is complete once written, fsynced and
// renamed into place, and the rename is durable once the directory holding it is fsynced.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zt::ckptfs {

std::string join(const std::string& dir, const std::string& name);
bool exists(const std::string& path);
bool is_dir(const std::string& path);
bool is_file(const std::string& path);
int64_t file_size(const std::string& path);  // -1 when missing or not a regular file
// mkdir -p (mode 0755).
void make_dirs(const std::string& dir);
// rm -rf; a missing path is fine.
void remove_tree(const std::string& path);
// fsync a file or a directory.
void fsync_path(const std::string& path);
// Writes `text` through an AtomicFile (core/file_io.h): a unique temporary beside `path`,
// fsynced, renamed onto `path` (refused when `path` is a symlink or not a regular file), and the
// directory fsynced.
void write_file_atomically(const std::string& path, const std::string& text);
// Whole small file (meta.json, latest); InputError naming `what` when it cannot be read.
std::string read_file(const std::string& path, const std::string& what);
// Names in a directory (no "." / ".."), sorted.
std::vector<std::string> list_dir(const std::string& dir);
// Puts directory `from` at `to` atomically: a plain rename when `to` does not exist, else an
// atomic exchange (renameat2 RENAME_EXCHANGE) after which `from` holds the old directory and is
// removed. Then fsyncs the parent. At every instant `to` is either the old or the new directory.
void install_dir(const std::string& from, const std::string& to);
// Creates and removes a new probe file in `dir` (created first; mkstemp, so nothing planted in
// `dir` is followed): InputError when it cannot.
void check_writable_dir(const std::string& dir);

}  // namespace zt::ckptfs
