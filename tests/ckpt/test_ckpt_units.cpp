// Checkpoint layer, single process: XXH64 against the reference implementation's values, the
// crash-safe file steps, tag rules, and meta.json / consolidate input checks (InputError, never
// a crash). The multi-rank protocol is tested by tests/zero/test_checkpoint_mpi.cpp and
// tests/app/test_checkpoint_e2e.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "zerotrain/ckpt/checkpoint.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/ckpt/xxhash64.h"
#include "zerotrain/core/check.h"

using namespace zt;

namespace {
std::string tmpdir() {
  char name[] = "/tmp/zt_ckpt_unit_XXXXXX";
  EXPECT_NE(mkdtemp(name), nullptr);
  return name;
}
void put(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Values from the xxhash Python package (the reference C implementation), seed 0.
TEST(Xxh64, MatchesReference) {
  EXPECT_EQ(hex64(xxh64("", 0)), "ef46db3751d8e999");
  EXPECT_EQ(hex64(xxh64("a", 1)), "d24ec4f1a98c6e5b");
  EXPECT_EQ(hex64(xxh64("abc", 3)), "44bc2cf5ad770999");
  const std::string s33 = "0123456789abcdef0123456789abcdef0";
  EXPECT_EQ(hex64(xxh64(s33.data(), s33.size())), "e87684f08d6d0816");
  std::string s771;
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 256; ++i) s771.push_back(static_cast<char>(i));
  s771 += "xyz";
  EXPECT_EQ(hex64(xxh64(s771.data(), s771.size())), "e921a1b45bd779f8");
}

TEST(Xxh64, StreamingEqualsOneShot) {
  std::mt19937 rng(3);
  std::vector<unsigned char> data(10007);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const uint64_t want = xxh64(data.data(), data.size());
  for (int trial = 0; trial < 20; ++trial) {
    Xxh64 h;
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % 70);
      h.update(data.data() + at, n);
      at += n;
    }
    EXPECT_EQ(h.digest(), want);
  }
}

TEST(CkptFs, AtomicFileAndDirectoryInstall) {
  const std::string d = tmpdir();
  ckptfs::write_file_atomically(ckptfs::join(d, "latest"), "a\n");
  EXPECT_EQ(ckptfs::read_file(ckptfs::join(d, "latest"), "t"), "a\n");
  ckptfs::write_file_atomically(ckptfs::join(d, "latest"), "b\n");
  EXPECT_EQ(ckptfs::read_file(ckptfs::join(d, "latest"), "t"), "b\n");
  EXPECT_FALSE(ckptfs::exists(ckptfs::join(d, "latest.tmp")));
  // install_dir: a fresh name is a rename; an existing one is exchanged and the old removed.
  ckptfs::make_dirs(ckptfs::join(d, "new/x"));
  put(ckptfs::join(d, "new/x/f"), "1");
  ckptfs::install_dir(ckptfs::join(d, "new"), ckptfs::join(d, "tag"));
  EXPECT_EQ(ckptfs::read_file(ckptfs::join(d, "tag/x/f"), "t"), "1");
  ckptfs::make_dirs(ckptfs::join(d, "new2"));
  put(ckptfs::join(d, "new2/g"), "2");
  ckptfs::install_dir(ckptfs::join(d, "new2"), ckptfs::join(d, "tag"));
  EXPECT_EQ(ckptfs::read_file(ckptfs::join(d, "tag/g"), "t"), "2");
  EXPECT_FALSE(ckptfs::exists(ckptfs::join(d, "tag/x")));
  EXPECT_FALSE(ckptfs::exists(ckptfs::join(d, "new2")));
  EXPECT_EQ(ckptfs::list_dir(d), (std::vector<std::string>{"latest", "tag"}));
  // A path under a regular file is an InputError naming it.
  put(ckptfs::join(d, "file"), "x");
  EXPECT_NE(error_of([&] { ckptfs::check_writable_dir(ckptfs::join(d, "file/sub")); }).find("file"), std::string::npos);
  ckptfs::remove_tree(d);
  EXPECT_FALSE(ckptfs::exists(d));
}

TEST(CkptTags, Rules) {
  EXPECT_TRUE(valid_checkpoint_tag("global_step20"));
  EXPECT_TRUE(valid_checkpoint_tag("run-1.final"));
  for (const char* bad : {"", ".hidden", "a/b", "..", "a b", "x\n"}) EXPECT_FALSE(valid_checkpoint_tag(bad)) << bad;
  EXPECT_EQ(default_checkpoint_tag(40), "global_step40");
}

TEST(CkptMeta, BadInputsAreInputErrors) {
  const std::string d = tmpdir();
  // No checkpoint at all.
  EXPECT_NE(error_of([&] { resolve_checkpoint_path(d); }).find("no 'latest' file"), std::string::npos);
  EXPECT_NE(error_of([&] { resolve_checkpoint_path(d, "global_step3"); }).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { resolve_checkpoint_path(d, "../x"); }).find("expected one name"), std::string::npos);
  EXPECT_NE(error_of([&] { resolve_checkpoint_path(ckptfs::join(d, "nope")); }).find("does not exist"), std::string::npos);
  // latest naming nothing, or something that is not a tag.
  put(ckptfs::join(d, "latest"), "global_step9\n");
  EXPECT_NE(error_of([&] { resolve_checkpoint_path(d); }).find("names 'global_step9'"), std::string::npos);
  put(ckptfs::join(d, "latest"), "../../etc\n");
  EXPECT_NE(error_of([&] { resolve_checkpoint_path(d); }).find("is not a checkpoint tag"), std::string::npos);
  // meta.json: missing, not JSON, wrong format, missing fields -> messages naming the file.
  const std::string t = ckptfs::join(d, "global_step1");
  ckptfs::make_dirs(t);
  EXPECT_NE(error_of([&] { read_checkpoint_meta(t); }).find("no meta.json"), std::string::npos);
  const std::string meta = ckptfs::join(t, "meta.json");
  for (const char* text : {"{", "[]", R"({"format": "other"})", R"({"format": "zerotrain-checkpoint", "version": 9})",
                           R"({"format": "zerotrain-checkpoint", "version": 1, "tag": "x"})"}) {
    put(meta, text);
    const std::string e = error_of([&] { read_checkpoint_meta(t); });
    EXPECT_NE(e.find(meta), std::string::npos) << text << " -> " << e;
  }
  EXPECT_NE(error_of([&] { consolidate_checkpoint(t, ckptfs::join(d, "out.safetensors"), DType::F32); }).find(meta),
            std::string::npos);
  ckptfs::remove_tree(d);
}
