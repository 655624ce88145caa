// text:/tokens: data — in-order reading, wrapping, llm.c header, raw uint16, and every error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/data/token_file.h"

namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "zt_data_" + name; }

void write_raw(const std::string& path, const std::vector<uint16_t>& toks) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(toks.data()), static_cast<std::streamsize>(toks.size() * 2));
}

void write_llmc(const std::string& path, const std::vector<uint16_t>& toks, int32_t magic = 20240520,
                int32_t version = 1, int64_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count < 0 ? static_cast<int64_t>(toks.size()) : count);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(toks.data()), static_cast<std::streamsize>(toks.size() * 2));
}

zt::DatasetShape shape(int64_t vocab, int64_t T, int64_t B) {
  zt::DatasetShape s;
  s.vocab_size = vocab;
  s.n_ctx = T;
  s.global_batch = B;
  return s;
}

// Expects InputError whose message names `path` (and contains `needle`).
void expect_file_error(const std::string& spec, const zt::DatasetShape& s, const std::string& path,
                       const std::string& needle) {
  try {
    zt::make_dataset(spec, s);
    FAIL() << "no error for " << spec;
  } catch (const zt::InputError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

std::vector<uint16_t> ramp(int n, int vocab) {
  std::vector<uint16_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<uint16_t>(i % vocab);
  return t;
}

}  // namespace

TEST(TokenFile, RawReadsInOrderAndWraps) {
  // 23 tokens, T = 4: S = floor(22 / 4) = 5 sequences per pass, starting at 0, 4, 8, 12, 16.
  std::string path = temp_path("raw.bin");
  write_raw(path, ramp(23, 1000));
  auto d = zt::make_dataset("tokens:" + path, shape(1000, 4, 3));
  auto* tf = dynamic_cast<zt::TokenFileDataset*>(d.get());
  ASSERT_NE(tf, nullptr);
  EXPECT_EQ(tf->format(), zt::TokenFileDataset::Format::Raw);
  EXPECT_EQ(tf->num_tokens(), 23);
  EXPECT_EQ(tf->sequences_per_pass(), 5);
  EXPECT_TRUE(std::isnan(d->best_loss()));
  zt::Batch b;
  for (int64_t k = 0; k < 4; ++k) {
    d->fill(k, 0, 3, b);
    for (int64_t s = 0; s < 3; ++s) {
      int64_t seq = k * 3 + s, start = (seq % 5) * 4;
      for (int64_t t = 0; t < 4; ++t) {
        EXPECT_EQ(b.inputs[s * 4 + t], start + t) << "k=" << k << " s=" << s;
        EXPECT_EQ(b.targets[s * 4 + t], start + t + 1);
      }
    }
  }
  // Sequence 5 wraps to the start of the file.
  d->fill(1, 2, 1, b);
  EXPECT_EQ(b.inputs[0], 0);
  std::remove(path.c_str());
}

TEST(TokenFile, LlmcHeaderMatchesRaw) {
  std::string raw = temp_path("same_raw.bin"), llmc = temp_path("same_llmc.bin");
  auto toks = ramp(500, 300);
  write_raw(raw, toks);
  write_llmc(llmc, toks);
  auto a = zt::make_dataset("tokens:" + raw, shape(300, 8, 4));
  auto b = zt::make_dataset("tokens:" + llmc, shape(300, 8, 4));
  auto c = zt::make_dataset("tokens:" + llmc + ",format=llmc", shape(300, 8, 4));
  EXPECT_EQ(dynamic_cast<zt::TokenFileDataset&>(*b).format(), zt::TokenFileDataset::Format::Llmc);
  zt::Batch x, y, z;
  for (int64_t k : {0, 5, 31}) {
    a->fill(k, 0, 4, x);
    b->fill(k, 0, 4, y);
    c->fill(k, 0, 4, z);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.targets, y.targets);
    EXPECT_EQ(y.inputs, z.inputs);
  }
  std::remove(raw.c_str());
  std::remove(llmc.c_str());
}

TEST(TokenFile, TextIsBytes) {
  std::string path = temp_path("text.txt");
  {
    std::ofstream f(path, std::ios::binary);
    f << "hello, world\n\xff";
  }
  auto d = zt::make_dataset("text:" + path, shape(256, 4, 2));
  EXPECT_EQ(d->vocab_size(), 256);
  zt::Batch b;
  d->fill(0, 0, 2, b);
  std::string want = "hello, wor";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.inputs[i], static_cast<unsigned char>(want[i]));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.inputs[4 + i], static_cast<unsigned char>(want[4 + i]));
  EXPECT_EQ(b.targets[3], 'o');
  // 14 bytes, T = 4: S = 3; sequence 2 starts at byte 8 and reads through byte 12.
  d->fill(1, 0, 1, b);
  EXPECT_EQ(b.inputs[0], 'o');
  EXPECT_EQ(b.targets[3], '\n');
  // A model with vocab 128 cannot take the 0xff byte.
  expect_file_error("text:" + path, shape(128, 4, 2), path, "255");
  std::remove(path.c_str());
}

TEST(TokenFile, Errors) {
  const auto s = shape(1000, 8, 2);
  std::string missing = temp_path("does_not_exist.bin");
  expect_file_error("tokens:" + missing, s, missing, "cannot open");
  expect_file_error("text:" + missing, s, missing, "cannot open");

  std::string empty = temp_path("empty.bin");
  { std::ofstream f(empty, std::ios::binary | std::ios::trunc); }
  expect_file_error("tokens:" + empty, s, empty, "empty");
  expect_file_error("text:" + empty, s, empty, "empty");

  std::string shortf = temp_path("short.bin");
  write_raw(shortf, ramp(8, 1000));  // needs T + 1 = 9
  expect_file_error("tokens:" + shortf, s, shortf, "fewer than n_ctx + 1");
  write_llmc(shortf, ramp(8, 1000));
  expect_file_error("tokens:" + shortf, s, shortf, "fewer than n_ctx + 1");

  std::string odd = temp_path("odd.bin");
  { std::ofstream f(odd, std::ios::binary | std::ios::trunc); f << "abcdefghijklmnopqrstu"; }
  expect_file_error("tokens:" + odd, s, odd, "odd size");

  std::string magic = temp_path("bad_magic.bin");
  write_llmc(magic, ramp(100, 1000), 12345);
  expect_file_error("tokens:" + magic + ",format=llmc", s, magic, "bad magic");

  std::string version = temp_path("bad_version.bin");
  write_llmc(version, ramp(100, 1000), 20240520, 3);
  expect_file_error("tokens:" + version, s, version, "version");

  std::string count = temp_path("bad_count.bin");
  write_llmc(count, ramp(100, 1000), 20240520, 1, 150);
  expect_file_error("tokens:" + count, s, count, "header says 150 tokens");

  std::string hdr = temp_path("tiny_header.bin");
  write_raw(hdr, ramp(10, 1000));
  expect_file_error("tokens:" + hdr + ",format=llmc", s, hdr, "too short for an llm.c header");

  std::string big = temp_path("big_token.bin");
  auto toks = ramp(100, 1000);
  toks[57] = 1000;
  write_raw(big, toks);
  expect_file_error("tokens:" + big, s, big, "token 1000 at position 57");
  write_llmc(big, toks);
  expect_file_error("tokens:" + big, s, big, "token 1000 at position 57");

  for (const std::string& p : {empty, shortf, odd, magic, version, count, hdr, big}) std::remove(p.c_str());
}

// split=F: --data reads the first floor(F*N) tokens, the holdout (train --eval-data) the rest;
// each part is its own stream, and both options may follow the path in either order.
TEST(TokenFile, HoldoutSplit) {
  const std::string path = temp_path("split.bin");
  write_raw(path, ramp(100, 1000));
  zt::DatasetShape train = shape(1000, 4, 1), held = train;
  held.holdout = true;
  auto a = zt::make_dataset("tokens:" + path + ",split=0.7,format=raw", train);
  auto b = zt::make_dataset("tokens:" + path + ",format=raw,split=0.7", held);
  auto whole = zt::make_dataset("tokens:" + path + ",format=raw", held);  // no split: the holdout flag is moot
  zt::Batch x;
  a->fill(0, 0, 1, x);
  EXPECT_EQ(x.inputs[0], 0);
  a->fill(16, 0, 1, x);  // 70 tokens, T = 4: S = 17 sequences; 16 is the last one of a pass
  EXPECT_EQ(x.inputs[0], 64);
  a->fill(17, 0, 1, x);  // wraps inside the first part, never into the holdout
  EXPECT_EQ(x.inputs[0], 0);
  b->fill(0, 0, 1, x);
  EXPECT_EQ(x.inputs[0], 70);
  b->fill(7, 0, 1, x);  // 30 tokens: S = 7, so sequence 7 wraps to the holdout's start
  EXPECT_EQ(x.inputs[0], 70);
  whole->fill(0, 0, 1, x);
  EXPECT_EQ(x.inputs[0], 0);
  EXPECT_NE(a->describe().find("first 70%"), std::string::npos) << a->describe();
  EXPECT_NE(b->describe().find("last 30%"), std::string::npos) << b->describe();
  for (const char* bad : {",split=0", ",split=1", ",split=-0.5", ",split=x", ",split="})
    expect_file_error("tokens:" + path + bad, train, "split=", "split must be a number between 0 and 1");
  expect_file_error("tokens:" + path + ",split=0.97", held, path, "fewer than n_ctx + 1");  // 3 tokens left
  std::remove(path.c_str());
}
