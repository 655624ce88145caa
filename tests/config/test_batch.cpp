// Batch triad (docs/config.md §2, §13.1 #1-6, §17.1, §17.2).
#include "cfg_test.h"

using namespace zt_test;

namespace {
struct Triad {
  int64_t tbs, mbs, gas;
};
Triad triad(const std::string& text, int w) {
  zt::DsConfig c = resolve(text, world(w));
  EXPECT_EQ(c.train_batch_size, c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * w);
  EXPECT_EQ(c.resolved["train_batch_size"], c.train_batch_size);
  EXPECT_EQ(c.resolved["train_micro_batch_size_per_gpu"], c.train_micro_batch_size_per_gpu);
  EXPECT_EQ(c.resolved["gradient_accumulation_steps"], c.gradient_accumulation_steps);
  return {c.train_batch_size, c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps};
}
#define EXPECT_TRIAD(text, w, t, m, g)           \
  do {                                          \
    Triad r_ = triad(text, w);                  \
    EXPECT_EQ(r_.tbs, t) << (text) << " W=" << w; \
    EXPECT_EQ(r_.mbs, m) << (text) << " W=" << w; \
    EXPECT_EQ(r_.gas, g) << (text) << " W=" << w; \
  } while (0)
}  // namespace

// §2 resolution table, at several world sizes.
TEST(BatchTriad, TbsOnly) {
  EXPECT_TRIAD(R"({"train_batch_size": 32})", 1, 32, 32, 1);
  EXPECT_TRIAD(R"({"train_batch_size": 32})", 2, 32, 16, 1);
  EXPECT_TRIAD(R"({"train_batch_size": 32})", 4, 32, 8, 1);
}
TEST(BatchTriad, MbsOnly) {
  EXPECT_TRIAD(R"({"train_micro_batch_size_per_gpu": 4})", 4, 16, 4, 1);
  EXPECT_TRIAD(R"({"train_micro_batch_size_per_gpu": 4})", 1, 4, 4, 1);
  EXPECT_TRIAD(R"({"train_micro_batch_size_per_gpu": 4})", 3, 12, 4, 1);
}
TEST(BatchTriad, TbsAndMbs) {
  EXPECT_TRIAD(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 1, 32, 4, 8);
  EXPECT_TRIAD(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 2, 32, 4, 4);
  EXPECT_TRIAD(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 4, 32, 4, 2);
}
TEST(BatchTriad, TbsAndGas) {
  EXPECT_TRIAD(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 2, 32, 8, 2);
  EXPECT_TRIAD(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 1, 32, 16, 2);
}
TEST(BatchTriad, MbsAndGas) {
  EXPECT_TRIAD(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})", 4, 32, 4, 2);
  EXPECT_TRIAD(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})", 3, 24, 4, 2);
}
TEST(BatchTriad, AllThreeConsistent) {
  EXPECT_TRIAD(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})",
               3, 24, 4, 2);
}
TEST(BatchTriad, AllThreeInconsistent) {
  std::string e = error_of(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})");
  EXPECT_NE(e.find("32 != 4 * 2 * 1"), std::string::npos) << e;
  EXPECT_NE(e.find("world size 1 (test)"), std::string::npos) << e;  // where W came from (Theme 6)
}
TEST(BatchTriad, FloorDivisionThenMismatch) {
  std::string e = error_of(R"({"train_batch_size": 33, "train_micro_batch_size_per_gpu": 4})");
  EXPECT_NE(e.find("33 != 4 * 8 * 1"), std::string::npos) << e;
  e = error_of(R"({"train_batch_size": 30, "gradient_accumulation_steps": 4})", world(2));
  EXPECT_NE(e.find("30 != 3 * 4 * 2"), std::string::npos) << e;
  e = error_of(R"({"train_batch_size": 3})", world(2));
  EXPECT_NE(e.find("3 != 1 * 1 * 2"), std::string::npos) << e;
}
TEST(BatchTriad, DerivedZeroMicroBatch) {
  std::string e = error_of(R"({"train_batch_size": 3})", world(4));
  EXPECT_NE(e.find("train_micro_batch_size_per_gpu: 0 has to be greater than 0"), std::string::npos) << e;
}
TEST(BatchTriad, DerivedZeroGas) {
  for (int w : {1, 2, 4}) {
    std::string e = error_of(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 16})", world(w));
    EXPECT_NE(e.find("gradient_accumulation_steps: 0 has to be greater than 0"), std::string::npos) << e;
  }
}
TEST(BatchTriad, NonPositive) {
  EXPECT_REJECTED(R"({"train_batch_size": 0})", "train_batch_size: 0 has to be greater than 0");
  EXPECT_REJECTED(R"({"train_batch_size": -4})", "train_batch_size: -4 has to be greater than 0");
  EXPECT_REJECTED(R"({"train_micro_batch_size_per_gpu": 0})", "train_batch_size: 0 has to be greater than 0");
}
TEST(BatchTriad, ZeroDivisorsAreClearErrors) {  // DeepSpeed: ZeroDivisionError
  EXPECT_REJECTED(R"({"train_batch_size": 32, "gradient_accumulation_steps": 0})", "gradient_accumulation_steps",
                  "expected an integer > 0");
  EXPECT_REJECTED(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 0})",
                  "train_micro_batch_size_per_gpu", "expected an integer > 0");
}
TEST(BatchTriad, MissingBoth) {
  EXPECT_REJECTED(R"({"gradient_accumulation_steps": 2})", "train_batch_size or train_micro_batch_size_per_gpu");
  EXPECT_REJECTED(R"({})", "train_batch_size or train_micro_batch_size_per_gpu");
}
TEST(BatchTriad, NullCountsAsAbsent) {
  EXPECT_TRIAD(R"({"train_batch_size": null, "train_micro_batch_size_per_gpu": 4})", 2, 8, 4, 1);
}
TEST(BatchTriad, WholeFloatsFromAFileAreIntegers) {  // §17.1: 32.0 -> 32 (not floats as for dicts)
  EXPECT_TRIAD(R"({"train_batch_size": 32.0})", 2, 32, 16, 1);
  EXPECT_TRIAD(R"({"train_batch_size": 3.2e1, "gradient_accumulation_steps": 2.0})", 2, 32, 8, 2);
}
TEST(BatchTriad, GarbageRejectedAtConfigTime) {  // docs/config.md rule 6
  EXPECT_REJECTED(R"({"train_batch_size": 32.5})", "train_batch_size", "fractional part");
  EXPECT_REJECTED(R"({"train_batch_size": "32"})", "train_batch_size", "found \"32\"", "without quotes");
  EXPECT_REJECTED(R"({"train_batch_size": true})", "train_batch_size");
  EXPECT_REJECTED(R"({"train_batch_size": [32]})", "train_batch_size");
  EXPECT_REJECTED(R"({"train_micro_batch_size_per_gpu": 1e18, "gradient_accumulation_steps": 1e18})",
                  "train_micro_batch_size_per_gpu", "below 2^40");
}
TEST(BatchTriad, SequenceParallelSizeHasNoEffectForFiles) {  // §17.2 (and §13.2's dict row differs)
  zt::DsConfig c = resolve(R"({"train_batch_size": 8, "sequence_parallel_size": 2})", world(4));
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 2);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_TRUE(has_warning(c, "sequence_parallel_size"));
}
TEST(BatchTriad, ProvenanceOfDerivedValues) {
  zt::DsConfig c = resolve(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", world(2));
  EXPECT_EQ(c.provenance["train_batch_size"].source, zt::ConfigSource::kFile);
  EXPECT_EQ(c.provenance["gradient_accumulation_steps"].source, zt::ConfigSource::kDerived);
  EXPECT_NE(c.provenance["gradient_accumulation_steps"].note.find("world size 2"), std::string::npos);
}

// §13.1 #1-6: DeepSpeed's TestBatchConfig at W = 2.
TEST(BatchTriad, DeepSpeedTestBatchConfigW2) {
  const char* base = R"("optimizer": {"type": "Adam", "params": {"lr": 0.00015}}, "gradient_clipping": 1.0,
                        "fp16": {"enabled": true, "loss_scale": 0})";
  auto cfg = [&](const std::string& triad_keys) { return "{" + triad_keys + ", " + base + "}"; };
  auto ok = [&](const std::string& keys, int64_t t, int64_t m, int64_t g) { EXPECT_TRIAD(cfg(keys), 2, t, m, g); };
  auto bad = [&](const std::string& keys) { EXPECT_NE(error_of(cfg(keys), world(2)), "") << keys; };
  // (32, 16, 1)
  ok(R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1)", 32, 16, 1);
  ok(R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 16)", 32, 16, 1);
  ok(R"("train_batch_size": 32, "gradient_accumulation_steps": 1)", 32, 16, 1);
  ok(R"("train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1)", 32, 16, 1);
  ok(R"("train_micro_batch_size_per_gpu": 16)", 32, 16, 1);
  ok(R"("train_batch_size": 32)", 32, 16, 1);
  // (32, 8, 2)
  ok(R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2)", 32, 8, 2);
  ok(R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 8)", 32, 8, 2);
  ok(R"("train_batch_size": 32, "gradient_accumulation_steps": 2)", 32, 8, 2);
  ok(R"("train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2)", 32, 8, 2);
  // (33, 17, 2)
  bad(R"("train_batch_size": 33, "train_micro_batch_size_per_gpu": 17, "gradient_accumulation_steps": 2)");
  bad(R"("train_batch_size": 33, "train_micro_batch_size_per_gpu": 17)");
  bad(R"("gradient_accumulation_steps": 2)");
  bad(R"("train_batch_size": 33, "gradient_accumulation_steps": 2)");
  // (32, 18, 1)
  bad(R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 18, "gradient_accumulation_steps": 1)");
  bad(R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 18)");
  bad(R"("gradient_accumulation_steps": 1)");
}
TEST(BatchTriad, OnlyRequiredField) {  // §13.1 #6
  EXPECT_TRIAD(R"({"train_batch_size": 64})", 1, 64, 64, 1);
}
