// Several files as one stream, per-epoch shuffling, PATHS lists (dirs, globs) and jsonl: data.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/data/jsonl.h"
#include "zerotrain/data/token_stream.h"

namespace {

std::string temp_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "zt_stream_" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// Raw uint16 tokens base, base+1, ..., base+n-1.
void write_ramp(const std::string& path, int base, int n) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(base + i);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 2));
}

zt::DatasetShape shape(int64_t vocab, int64_t T, int64_t B, uint64_t seed = 5) {
  zt::DatasetShape s;
  s.vocab_size = vocab;
  s.n_ctx = T;
  s.global_batch = B;
  s.seed = seed;
  return s;
}

// First input token of global sequence g (B = 1: global batch g).
int32_t first_token(const zt::Dataset& d, int64_t g) {
  zt::Batch b;
  d.fill(g, 0, 1, b);
  return b.inputs[0];
}

void expect_error(const std::string& spec, const zt::DatasetShape& s, const std::string& needle) {
  try {
    zt::make_dataset(spec, s);
    FAIL() << "no error for " << spec;
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(WindowPermutation, EveryEpochIsAPermutation) {
  for (int64_t n : {1, 2, 3, 4, 5, 7, 13, 16, 17, 64, 97, 1000, 1031, 4097}) {
    std::vector<std::vector<int64_t>> orders;
    for (uint64_t epoch : {0, 1, 2}) {
      zt::WindowPermutation p(n, 1234, epoch);
      std::vector<bool> hit(static_cast<size_t>(n), false);
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t w = p(i);
        ASSERT_GE(w, 0);
        ASSERT_LT(w, n);
        EXPECT_FALSE(hit[static_cast<size_t>(w)]) << "n=" << n << " epoch " << epoch << ": window " << w << " twice";
        hit[static_cast<size_t>(w)] = true;
        order.push_back(w);
      }
      EXPECT_EQ(std::count(hit.begin(), hit.end(), true), n) << "n=" << n << ": a window is missing";
      orders.push_back(order);
    }
    if (n >= 5) {
      EXPECT_NE(orders[0], orders[1]) << "n=" << n << ": epochs 0 and 1 share an order";
      EXPECT_NE(orders[1], orders[2]) << "n=" << n;
    }
  }
  // A pure function of (n, seed, epoch); another seed is another order.
  zt::WindowPermutation a(1000, 7, 3), b(1000, 7, 3), c(1000, 8, 3);
  int differ = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a(i), b(i));
    differ += a(i) != c(i);
  }
  EXPECT_GT(differ, 900);
  // Not close to the identity: few fixed points.
  int fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += a(i) == i;
  EXPECT_LT(fixed, 20);
}

TEST(TokenStream, FilesFormOneStreamWithoutCrossingFiles) {
  const std::string d = temp_dir("cut");
  write_ramp(d + "/a.bin", 0, 10);     // T = 4: 2 windows (tokens 8, 9 unused)
  write_ramp(d + "/b.bin", 100, 17);   // 4 windows, all 17 tokens used
  write_ramp(d + "/c.bin", 200, 9);    // 2 windows
  auto s = zt::make_dataset("tokens:" + d + "/a.bin:" + d + "/b.bin:" + d + "/c.bin,format=raw", shape(1000, 4, 1));
  EXPECT_EQ(s->sequences_per_epoch(), 8);
  const std::vector<int32_t> want = {0, 4, 100, 104, 108, 112, 200, 204, 0, 4, 100};
  for (size_t g = 0; g < want.size(); ++g) EXPECT_EQ(first_token(*s, static_cast<int64_t>(g)), want[g]) << g;
  zt::Batch b;
  s->fill(5, 0, 1, b);  // the last window of b.bin ends at its last token
  EXPECT_EQ(b.targets[3], 116);
  // A directory and a glob give the same files in name order; a directory's hidden files and
  // subdirectories are not data (this odd-sized file would be an error).
  write_file(d + "/.hidden.bin", "odd");
  ::mkdir((d + "/sub").c_str(), 0755);
  auto dir = zt::make_dataset("tokens:" + d + "/,format=raw", shape(1000, 4, 1));
  auto glob = zt::make_dataset("tokens:" + d + "/*.bin", shape(1000, 4, 1));
  auto rev = zt::make_dataset("tokens:" + d + "/c.bin:" + d + "/a.bin", shape(1000, 4, 1));
  for (size_t g = 0; g < want.size(); ++g) {
    EXPECT_EQ(first_token(*dir, static_cast<int64_t>(g)), want[g]);
    EXPECT_EQ(first_token(*glob, static_cast<int64_t>(g)), want[g]);
  }
  EXPECT_EQ(first_token(*rev, 0), 200);  // a list keeps its own order
  EXPECT_EQ(first_token(*rev, 2), 0);
  EXPECT_NE(dir->describe().find("3 files"), std::string::npos) << dir->describe();
  // split=F cuts each file: the first 70% of a (7 tokens: 1 window), b (11: 2), c (6: 1).
  auto split = zt::make_dataset("tokens:" + d + "/*.bin,split=0.7", shape(1000, 4, 1));
  EXPECT_EQ(split->sequences_per_epoch(), 4);
  zt::DatasetShape held = shape(1000, 4, 1);
  held.holdout = true;
  expect_error("tokens:" + d + "/*.bin,split=0.7", held, d + "/a.bin");  // a's last 3 tokens < T + 1
}

TEST(TokenStream, ShuffleVisitsEveryWindowOncePerEpoch) {
  const std::string d = temp_dir("shuffle");
  write_ramp(d + "/a.bin", 0, 41);     // T = 4: 10 windows
  write_ramp(d + "/b.bin", 1000, 29);  // 7 windows
  auto plain = zt::make_dataset("tokens:" + d, shape(2000, 4, 1));
  auto shuf = zt::make_dataset("tokens:" + d + ",shuffle=1", shape(2000, 4, 1, 11));
  auto same = zt::make_dataset("tokens:" + d + ",shuffle=1", shape(2000, 4, 1, 11));
  auto other = zt::make_dataset("tokens:" + d + ",shuffle=1", shape(2000, 4, 1, 12));
  const int64_t S = 17;
  ASSERT_EQ(shuf->sequences_per_epoch(), S);
  std::set<int32_t> windows;
  for (int64_t g = 0; g < S; ++g) windows.insert(first_token(*plain, g));
  std::vector<int32_t> prev_epoch;
  int differ_seed = 0;
  for (int64_t e = 0; e < 3; ++e) {
    std::multiset<int32_t> seen;
    std::vector<int32_t> order;
    for (int64_t g = e * S; g < (e + 1) * S; ++g) {
      const int32_t t = first_token(*shuf, g);
      EXPECT_EQ(t, first_token(*same, g));
      differ_seed += t != first_token(*other, g);
      seen.insert(t);
      order.push_back(t);
    }
    EXPECT_EQ(std::set<int32_t>(seen.begin(), seen.end()), windows) << "epoch " << e;
    EXPECT_EQ(seen.size(), windows.size()) << "epoch " << e << ": a window read twice";
    EXPECT_NE(order, prev_epoch) << "epoch " << e << " repeats the previous order";
    prev_epoch = order;
  }
  EXPECT_GT(differ_seed, 10);
  EXPECT_NE(shuf->describe().find("shuffled"), std::string::npos) << shuf->describe();
}

TEST(TokenStream, PathErrorsNameTheInput) {
  const std::string d = temp_dir("errors");
  const std::string empty = temp_dir("errors_empty");
  write_ramp(d + "/good.bin", 0, 100);
  write_ramp(d + "/short.bin", 0, 3);
  const auto s = shape(1000, 4, 1);
  expect_error("tokens:" + d + "/nothing_*.bin", s, "matches no file");
  expect_error("tokens:" + empty, s, "holds no regular file");
  expect_error("tokens:" + d + "/good.bin::" + d + "/good.bin", s, "empty path");
  expect_error("tokens:" + d + "/good.bin:" + d + "/short.bin", s, d + "/short.bin");
  expect_error("tokens:" + d + "/good.bin:" + d + "/missing.bin", s, d + "/missing.bin");
  expect_error("tokens:" + d + "/good.bin,shuffle=2", s, "shuffle must be 0 or 1");
  expect_error("text:" + d + "/good.bin,field=x", s, d + "/good.bin,field=x");  // field= is jsonl's: part of the path
}

TEST(Jsonl, DocumentsAreBytesWithSeparators) {
  zt::JsonlOptions opt;
  const auto t = zt::jsonl_tokens("{\"text\": \"ab\"}\n\n{\"id\": 3, \"text\": \"\\u00e9\\n\"}\r\n", "x", opt, 256);
  EXPECT_EQ(t, (std::vector<int32_t>{'a', 'b', 0, 0xc3, 0xa9, '\n', 0}));
  opt.field = "body";
  opt.sep = 300;
  EXPECT_EQ(zt::jsonl_tokens("{\"body\":\"hi\"}", "x", opt, 512), (std::vector<int32_t>{'h', 'i', 300}));
}

TEST(Jsonl, BadLinesNameFileAndLine) {
  zt::JsonlOptions opt;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\":\"a\"}\nnot json\n", "line 2: not a JSON value"},
      {"{\"text\":\"a\"}\n{\"text\":\"b\"} x\n", "line 2: not a JSON value"},
      {"[1, 2]\n", "line 1: an array, expected a JSON object"},
      {"{\"text\":\"a\"}\n\n{\"txt\":\"a\"}\n", "line 3: the object has no field \"text\""},
      {"{\"text\": 5}\n", "line 1: the field \"text\" is a number, expected a string"},
      {"{\"text\": \"\\u00e9\"}\n", "line 1: byte 195 is >= the model's vocab_size 128"},
  };
  for (const auto& [text, needle] : cases) {
    try {
      zt::jsonl_tokens(text, "docs.jsonl", opt, 128);
      FAIL() << "no error for " << text;
    } catch (const zt::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("'docs.jsonl' " + needle), std::string::npos) << e.what();
    }
  }
}

TEST(Jsonl, FilesAsAStream) {
  const std::string d = temp_dir("jsonl");
  write_file(d + "/a.jsonl", "{\"text\":\"abcdefgh\"}\n{\"text\":\"ij\"}\n");  // 12 tokens: T = 4 -> 2 windows
  write_file(d + "/b.jsonl", "{\"body\":\"klmn\",\"text\":\"z\"}\n");           // with field=body: 5 tokens, 1
  auto a = zt::make_dataset("jsonl:" + d + "/a.jsonl", shape(256, 4, 1));
  EXPECT_EQ(a->sequences_per_epoch(), 2);
  zt::Batch b;
  a->fill(1, 0, 1, b);  // tokens 4..8: e f g h <sep>
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{'e', 'f', 'g', 'h'}));
  EXPECT_EQ(b.targets.back(), 0);
  auto body = zt::make_dataset("jsonl:" + d + "/b.jsonl,sep=10,field=body", shape(256, 4, 1));
  body->fill(0, 0, 1, b);
  EXPECT_EQ(b.inputs, (std::vector<int32_t>{'k', 'l', 'm', 'n'}));
  EXPECT_EQ(b.targets.back(), 10);
  expect_error("jsonl:" + d + "/a.jsonl:" + d + "/b.jsonl", shape(256, 4, 1), d + "/b.jsonl': holds 2 tokens");
  expect_error("jsonl:" + d + "/*.jsonl,field=body", shape(256, 4, 1), d + "/a.jsonl' line 1: the object has no field");
  expect_error("jsonl:" + d + "/a.jsonl,sep=256", shape(256, 4, 1), "sep=256");
}
