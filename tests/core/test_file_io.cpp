// The output writers of core/file_io.h: no symlink followed, only regular files or the allowed
// devices, every write and close checked (a full device is an InputError naming the file), and
// the stale-temporary rule (only a dead owner's temporaries of this host are removed).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

using namespace zt;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/zt_file_io_XXXXXX";
    EXPECT_NE(::mkdtemp(name), nullptr);
    path = name;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& n) const { return path + "/" + n; }
};

void put(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}
std::string get(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}
// The InputError message `fn` throws ("" when it throws none).
template <typename F> std::string error_of(F fn) {
  try { return fn(), std::string(); } catch (const InputError& e) { return e.what(); }
}
// A pid that belonged to a process of this host and is gone now.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}
std::string host_part() {
  const std::string tag = temp_owner_tag();
  return tag.substr(0, tag.rfind('.'));
}

}  // namespace

TEST(FileIo, AtomicFileWritesAndLeavesNoTemporary) {
  TempDir d;
  AtomicFile f(d / "out.json", "test output");
  EXPECT_NE(f.temp_path().find(".tmp." + temp_owner_tag() + "."), std::string::npos) << f.temp_path();
  f.write("hello\n");
  f.commit();
  EXPECT_EQ(get(d / "out.json"), "hello\n");
  EXPECT_EQ(std::system(("test $(ls -A '" + d.path + "' | wc -l) -eq 1").c_str()), 0);
}

TEST(FileIo, SymlinkTargetsAreRefusedAndTheirTargetsUntouched) {
  TempDir d;
  put(d / "victim", "precious");
  ASSERT_EQ(::symlink((d / "victim").c_str(), (d / "link").c_str()), 0);
  for (bool devices : {false, true}) {
    EXPECT_NE(error_of([&] { AtomicFile f(d / "link", "--x", devices); }).find("symbolic link"), std::string::npos);
    EXPECT_NE(error_of([&] { StreamFile f(d / "link", "--x", devices); }).find("symbolic link"), std::string::npos);
  }
  EXPECT_EQ(get(d / "victim"), "precious");
  // A directory or a FIFO at the name is refused as well.
  ASSERT_EQ(::mkdir((d / "dir").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0644), 0);
  EXPECT_NE(error_of([&] { StreamFile f(d / "dir", "--x", true); }).find("a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { StreamFile f(d / "fifo", "--x", true); }).find("a FIFO"), std::string::npos);
  EXPECT_NE(error_of([&] { AtomicFile f(d / "fifo", "--x", true); }).find("a FIFO"), std::string::npos);
}

TEST(FileIo, EmptyPathIsAnError) {
  EXPECT_NE(error_of([] { StreamFile f("", "--metrics", true); }).find("--metrics: empty path"), std::string::npos);
  EXPECT_NE(error_of([] { AtomicFile f("", "--trace"); }).find("--trace: empty path"), std::string::npos);
}

TEST(FileIo, DevicesOnlyWhenAllowed) {
  EXPECT_NE(error_of([] { AtomicFile f("/dev/null", "--x"); }).find("character device"), std::string::npos);
  EXPECT_NE(error_of([] { StreamFile f("/dev/null", "--x", false); }).find("character device"), std::string::npos);
  StreamFile s("/dev/null", "--x", true);
  s.write("discarded\n");
  s.close();
  AtomicFile a("/dev/null", "--x", true);
  a.write("discarded\n");
  a.commit();
  EXPECT_TRUE(is_device_output("/dev/stdout"));
  EXPECT_TRUE(is_device_output("/dev/null"));
  EXPECT_FALSE(is_device_output("/tmp"));
  EXPECT_EQ(per_rank_output("/dev/null", 3), "/dev/null");
  EXPECT_EQ(per_rank_output("m.jsonl", 0), "m.jsonl");
  EXPECT_EQ(per_rank_output("m.jsonl", 3), "m.jsonl.rank3");
}

TEST(FileIo, FullDeviceIsAnErrorNamingTheFile) {
  // /dev/full answers every write with ENOSPC, as a full disk does.
  StreamFile s("/dev/full", "train: --metrics", true);
  const std::string e1 = error_of([&] { s.write(std::string(100, 'x')); });
  EXPECT_NE(e1.find("--metrics /dev/full"), std::string::npos) << e1;
  EXPECT_NE(e1.find("No space left"), std::string::npos) << e1;
  AtomicFile a("/dev/full", "train: --memory-report", true);
  const std::string e2 = error_of([&] { a.write(std::string(100, 'x')); });
  EXPECT_NE(e2.find("--memory-report /dev/full"), std::string::npos) << e2;
}

TEST(FileIo, FullFileSystemIsAnError) {
  // A 64 KiB tmpfs when this process may mount one (root); the size limit is a real ENOSPC.
  TempDir d;
  const std::string mnt = d / "mnt";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  const bool mounted = ::geteuid() == 0 &&
                       std::system(("mount -t tmpfs -o size=64k tmpfs '" + mnt + "' 2>/dev/null").c_str()) == 0;
  const std::string big(256 * 1024, 'x');
  if (mounted) {
    {
      StreamFile s(mnt + "/metrics.jsonl", "train: --metrics", true);
      EXPECT_NE(error_of([&] { s.write(big); }).find("No space left"), std::string::npos);
    }
    {
      AtomicFile a(mnt + "/report.json", "train: --memory-report");
      EXPECT_NE(error_of([&] { a.write(big); }).find("--memory-report " + mnt + "/report.json"), std::string::npos);
    }
    EXPECT_FALSE(exists(mnt + "/report.json"));
    // The failed AtomicFile removed its temporary: only the stream's file is left.
    EXPECT_EQ(std::system(("test $(ls -A '" + mnt + "' | wc -l) -eq 1").c_str()), 0);
    EXPECT_EQ(std::system(("umount '" + mnt + "'").c_str()), 0);
  } else {
    StreamFile s("/dev/full", "train: --comm-log", true);
    EXPECT_NE(error_of([&] { s.write(big); }).find("No space left"), std::string::npos);
  }
}

TEST(FileIo, StaleTemporariesOfDeadOwnersOnlyAreRemoved) {
  TempDir d;
  const std::string host = host_part();
  const std::string target = d / "model.safetensors";
  const std::string dead = target + ".tmp." + host + "." + std::to_string(dead_pid()) + ".aB3dE9";
  const std::string alive = target + ".tmp." + temp_owner_tag() + ".Zz0000";
  const std::string parent = target + ".tmp." + host + "." + std::to_string(::getppid()) + ".Qq1111";
  const std::string other_host = target + ".tmp.another-host." + std::to_string(dead_pid()) + ".xY1234";
  const std::string foreign = target + ".tmp.mine";
  const std::string other_name = d / "other.safetensors.tmp." + host + "." + std::to_string(dead_pid()) + ".aaaaaa";
  for (const std::string& p : {dead, alive, parent, other_host, foreign, other_name}) put(p, "x");
  const std::string dead_link = target + ".tmp." + host + "." + std::to_string(dead_pid()) + ".LLLLLL";
  ASSERT_EQ(::symlink((d / "victim").c_str(), dead_link.c_str()), 0);
  const std::vector<std::string> removed = remove_stale_temporaries(target);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], dead);
  EXPECT_FALSE(exists(dead));
  for (const std::string& p : {alive, parent, other_host, foreign, other_name, dead_link}) EXPECT_TRUE(exists(p)) << p;
  EXPECT_TRUE(temp_owner_gone(host + "." + std::to_string(dead_pid())));
  EXPECT_FALSE(temp_owner_gone(temp_owner_tag()));
  EXPECT_FALSE(temp_owner_gone("another-host." + std::to_string(dead_pid())));
  EXPECT_FALSE(temp_owner_gone(host + ".12x"));
  EXPECT_FALSE(temp_owner_gone("nodot"));
}

TEST(FileIo, ResolvedPathsCompareSpellings) {
  TempDir d;
  ASSERT_EQ(::mkdir((d / "a").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((d / "a").c_str(), (d / "alias").c_str()), 0);
  const std::string a = resolved_path(d / "a");
  EXPECT_EQ(resolved_path(d / "a/./x.json"), a + "/x.json");
  EXPECT_EQ(resolved_path(d / "alias/x.json"), a + "/x.json");
  EXPECT_EQ(resolved_path(d / "a/new/../y"), a + "/y");
  EXPECT_EQ(resolved_path(d / "a/"), a);
  EXPECT_TRUE(path_within(a + "/x", a));
  EXPECT_TRUE(path_within(a, a));
  EXPECT_FALSE(path_within(a + "b", a));
  EXPECT_FALSE(path_within(resolved_path(d.path), a));
}
