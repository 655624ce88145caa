// The global batch is the same whatever the world size and micro-batch split (docs/data.md).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "zerotrain/data/dataset.h"

namespace {

constexpr int64_t kB = 12;

zt::DatasetShape gpt_shape() {
  zt::DatasetShape s;
  s.vocab_size = 50;
  s.n_ctx = 16;
  s.global_batch = kB;
  s.seed = 1234;
  return s;
}

zt::DatasetShape mlp_shape() {
  zt::DatasetShape s;
  s.mlp_dims = {5, 7, 3};
  s.global_batch = kB;
  s.seed = 99;
  return s;
}

// Rebuilds global batch k from every rank's micro-batches.
zt::Batch assemble(const zt::Dataset& d, int64_t k, int world, int gas) {
  const int64_t mbs = kB / (world * gas);
  zt::Batch whole, part;
  std::vector<bool> seen(kB, false);
  for (int r = 0; r < world; ++r) {
    for (int j = 0; j < gas; ++j) {
      int64_t first = zt::sample_range(r, world, j, gas, mbs);
      d.fill(k, first, mbs, part);
      EXPECT_EQ(part.B, mbs);
      if (whole.B == 0) {
        whole.T = part.T;
        whole.B = kB;
        whole.inputs.resize(part.inputs.size() / mbs * kB);
        whole.targets.resize(part.targets.size() / mbs * kB);
        whole.features.resize(part.features.size() / mbs * kB);
        whole.targets_f.resize(part.targets_f.size() / mbs * kB);
      }
      for (int64_t s = 0; s < mbs; ++s) {
        EXPECT_FALSE(seen[first + s]) << "sample " << first + s << " read twice";
        seen[first + s] = true;
      }
      auto put = [&](auto& dst, const auto& src) {
        size_t per = src.size() / mbs;
        std::copy(src.begin(), src.end(), dst.begin() + first * per);
      };
      put(whole.inputs, part.inputs);
      put(whole.targets, part.targets);
      put(whole.features, part.features);
      put(whole.targets_f, part.targets_f);
    }
  }
  for (int64_t s = 0; s < kB; ++s) EXPECT_TRUE(seen[s]) << "sample " << s << " never read";
  return whole;
}

void expect_split_invariant(const zt::Dataset& d) {
  for (int64_t k : {0, 1, 7}) {
    zt::Batch ref;
    d.fill(k, 0, kB, ref);
    for (int world : {1, 2, 3, 4}) {
      for (int gas : {1, 2, 3, 4, 6, 12}) {
        if (kB % (world * gas) != 0) continue;
        zt::Batch b = assemble(d, k, world, gas);
        EXPECT_EQ(b.inputs, ref.inputs) << "W=" << world << " GAS=" << gas << " k=" << k;
        EXPECT_EQ(b.targets, ref.targets) << "W=" << world << " GAS=" << gas << " k=" << k;
        EXPECT_EQ(b.features, ref.features) << "W=" << world << " GAS=" << gas << " k=" << k;
        EXPECT_EQ(b.targets_f, ref.targets_f) << "W=" << world << " GAS=" << gas << " k=" << k;
      }
    }
  }
}

}  // namespace

TEST(DataSplit, SampleRangeConvention) {
  // rank-major: rank r owns [r*gas*mbs, (r+1)*gas*mbs), micro-steps in order inside it.
  EXPECT_EQ(zt::sample_range(0, 2, 0, 3, 2), 0);
  EXPECT_EQ(zt::sample_range(0, 2, 2, 3, 2), 4);
  EXPECT_EQ(zt::sample_range(1, 2, 0, 3, 2), 6);
  EXPECT_EQ(zt::sample_range(1, 2, 2, 3, 2), 10);
}

TEST(DataSplit, MarkovIndependentOfWorldAndGas) {
  auto d = zt::make_dataset("markov:vocab=20,order=2", gpt_shape());
  expect_split_invariant(*d);
}

TEST(DataSplit, TeacherIndependentOfWorldAndGas) {
  auto d = zt::make_dataset("teacher:noise=0.3", mlp_shape());
  expect_split_invariant(*d);
}

TEST(DataSplit, TokenFileIndependentOfWorldAndGas) {
  std::string path = ::testing::TempDir() + "zt_split_tokens.bin";
  {
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < 1000; ++i) {
      uint16_t t = static_cast<uint16_t>((i * 7) % 50);
      f.write(reinterpret_cast<const char*>(&t), 2);
    }
  }
  auto d = zt::make_dataset("tokens:" + path, gpt_shape());
  expect_split_invariant(*d);
  std::remove(path.c_str());
}

// Several files, shuffled per epoch (S = 61 + 20 + 5 = 86 windows, so batches of 12 cross epochs),
// and JSON lines: the same global batches at every world size and micro-batch split.
TEST(DataSplit, ShuffledFilesAndJsonlIndependentOfWorldAndGas) {
  const std::string dir = ::testing::TempDir() + "zt_split_files";
  ::mkdir(dir.c_str(), 0755);
  const int sizes[] = {977, 321, 81};
  for (int f = 0; f < 3; ++f) {
    std::ofstream out(dir + "/part" + std::to_string(f) + ".bin", std::ios::binary);
    for (int i = 0; i < sizes[f]; ++i) {
      uint16_t t = static_cast<uint16_t>((i * 7 + f) % 50);
      out.write(reinterpret_cast<const char*>(&t), 2);
    }
  }
  auto d = zt::make_dataset("tokens:" + dir + "/part*.bin,shuffle=1", gpt_shape());
  ASSERT_EQ(d->sequences_per_epoch(), 86);
  expect_split_invariant(*d);
  const std::string jsonl = dir + "/docs.jsonl";
  {
    std::ofstream out(jsonl);
    for (int i = 0; i < 60; ++i) out << "{\"text\": \"" << std::string(static_cast<size_t>(i % 9 + 1), char('#' + i % 10)) << "\"}\n";
  }
  auto j = zt::make_dataset("jsonl:" + jsonl + ",shuffle=1", gpt_shape());
  expect_split_invariant(*j);
}

TEST(DataSplit, Determinism) {
  auto a = zt::make_dataset("markov:vocab=20,order=1", gpt_shape());
  auto b = zt::make_dataset("markov:vocab=20,order=1", gpt_shape());
  auto c = zt::make_dataset("markov:vocab=20,order=1,seed=7", gpt_shape());
  zt::Batch x, y, z, w;
  a->fill(3, 0, kB, x);
  b->fill(3, 0, kB, y);
  c->fill(3, 0, kB, z);
  a->fill(4, 0, kB, w);
  EXPECT_EQ(x.inputs, y.inputs);
  EXPECT_NE(x.inputs, z.inputs);
  EXPECT_NE(x.inputs, w.inputs);
  // targets are inputs shifted by one
  for (int64_t s = 0; s < kB; ++s)
    for (int64_t t = 0; t + 1 < x.T; ++t) EXPECT_EQ(x.targets[s * x.T + t], x.inputs[s * x.T + t + 1]);
  auto t1 = zt::make_dataset("teacher", mlp_shape());
  auto t2 = zt::make_dataset("teacher", mlp_shape());
  t1->fill(2, 3, 4, x);
  t2->fill(2, 3, 4, y);
  EXPECT_EQ(x.features, y.features);
  EXPECT_EQ(x.targets_f, y.targets_f);
}

TEST(DataSpec, BadSpecsAreInputErrors) {
  auto gpt = gpt_shape();
  auto mlp = mlp_shape();
  for (const char* spec : {"mnist", "markov:vocab", "markov:vocab=abc", "markov:vocab=51", "markov:vocab=1",
                           "markov:order=-1", "markov:temperature=0", "markov:foo=1", "markov:order=1,order=2",
                           "markov:vocab=1000000,order=3", "markov:vocab=50,order=4", "teacher:noise=0.1", "text:", "tokens:",
                           "tokens:/nonexistent/zt.bin", "tokens:/nonexistent/zt.bin,format=xyz", "markov:seed=-3"})
    EXPECT_THROW(zt::make_dataset(spec, gpt), zt::InputError) << spec;
  for (const char* spec : {"markov", "teacher:noise=-1", "teacher:sigma=1", "text:/etc/hostname"})
    EXPECT_THROW(zt::make_dataset(spec, mlp), zt::InputError) << spec;
  mlp.mlp_classification = true;
  EXPECT_THROW(zt::make_dataset("teacher", mlp), zt::InputError);
  try {
    zt::make_dataset("markov:vocab=10,colour=red", gpt);
    FAIL();
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("colour"), std::string::npos);
  }
}
