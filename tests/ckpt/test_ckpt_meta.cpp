// meta.json on load: its own checksum (any edit of a value is refused), the range and type of
// every value (re-signed documents, so the range checks themselves are reached), and the older
// format without a checksum (accepted with a warning).
#include <gtest/gtest.h>

#include <string>

#include "../../csrc/ckpt/ckpt_internal.h"
#include "zerotrain/core/check.h"

using namespace zt;
using ckpt::json;

namespace {

// A complete, consistent meta.json of a one-parameter MLP saved on 2 ranks with SGD (master only).
json valid_doc() {
  json d = {
      {"format", "zerotrain-checkpoint"},
      {"version", 2},
      {"tag", "global_step3"},
      {"producer", "zerotrain"},
      {"model", {{"config", {{"type", "mlp"}, {"dims", {2, 3}}, {"activation", "gelu"}, {"task", "regression"}}},
                 {"num_params", 9},
                 {"params", {{{"name", "fc0.w"}, {"shape", {2, 3}}}, {{"name", "fc0.b"}, {"shape", {3}}}}}}},
      {"zero", {{"stage", 2}, {"world_size", 2}, {"plan_hash", "0"}, {"reduce_bucket_size", 64}, {"padded_numel", 16},
                {"shard_numel", 8}}},
      {"precision", {{"compute", "fp32"}, {"master", "fp32"}, {"moments", "fp32"}, {"grad_accum", "fp32"},
                     {"communication", "fp32"}, {"params16", "not stored"}}},
      {"optimizer", {{"type", "SGD"}, {"states", {{{"name", "master"}, {"dtype", "F32"}}}}}},
      {"steps", {{"global_steps", 3}, {"successful_steps", 2}, {"skipped_steps", 1}}},
      {"lr_schedule", {{"type", "constant"}, {"last_batch_iteration", 1}, {"lr", 0.001}}},
      {"loss_scaler", {{"flavor", "static"}, {"cur_scale", 65536.0}, {"cur_iter", 3}, {"last_overflow_iter", 1},
                       {"cur_hysteresis", 2}}},
      {"data", {{"spec", "teacher:"}, {"next_global_batch", 3}, {"train_batch_size", 8}, {"micro_batch", 4},
                {"gradient_accumulation_steps", 1}, {"samples_consumed", 24}}},
      {"seed", 42},
      {"shards", {{{"rank", 0}, {"file", "shard-00000-of-00002.safetensors"}, {"bytes", 200}, {"xxh64", "0"}},
                  {{"rank", 1}, {"file", "shard-00001-of-00002.safetensors"}, {"bytes", 200}, {"xxh64", "0"}}}},
      {"tensors", {{{"name", "master/fc0.w"}, {"state", "master"}, {"param", "fc0.w"}, {"shape", {2, 3}},
                    {"dtype", "F32"}, {"pieces", {{{"rank", 0}, {"begin", 0}, {"count", 4}}, {{"rank", 1}, {"begin", 4}, {"count", 2}}}}},
                   {{"name", "master/fc0.b"}, {"state", "master"}, {"param", "fc0.b"}, {"shape", {3}},
                    {"dtype", "F32"}, {"pieces", {{{"rank", 1}, {"begin", 0}, {"count", 3}}}}}}},
  };
  d[ckpt::kMetaChecksumKey] = ckpt::meta_checksum(d);
  return d;
}

json signed_doc(json d) {
  d[ckpt::kMetaChecksumKey] = ckpt::meta_checksum(d);
  return d;
}

std::string error_of(const std::string& text) {
  try {
    ckpt::parse_meta_doc("/ckpt/global_step3", "/ckpt/global_step3/meta.json", text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CheckpointMeta, ValidDocumentParses) {
  const ckpt::Meta m = ckpt::parse_meta_doc("/c", "/c/meta.json", valid_doc().dump(1));
  EXPECT_EQ(m.world, 2);
  EXPECT_EQ(m.stage, 2);
  EXPECT_EQ(m.seed, 42u);
  EXPECT_EQ(m.counters.global_steps, 3);
  EXPECT_EQ(m.counters.successful_steps, 2);
  EXPECT_EQ(m.counters.loss_scaler.cur_scale, 65536.0);
  EXPECT_EQ(m.pieces[0][0].size(), 2u);
  EXPECT_TRUE(m.warnings.empty());
  // The checksum is of the content, not the layout: re-indenting keeps it valid.
  EXPECT_EQ(error_of(valid_doc().dump()), "");
  EXPECT_EQ(error_of(valid_doc().dump(4)), "");
}

// A one-character edit of a value, the checksum left as it was.
TEST(CheckpointMeta, AnyEditIsAChecksumMismatch) {
  const std::string text = valid_doc().dump(1);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"seed\": 42", "\"seed\": 43"},
           {"\"successful_steps\": 2", "\"successful_steps\": 3"},
           {"\"last_batch_iteration\": 1", "\"last_batch_iteration\": 0"},
           {"\"cur_scale\": 65536.0", "\"cur_scale\": 65537.0"},
           {"\"xxh64\": \"0\"", "\"xxh64\": \"1\""}}) {
    std::string edited = text;
    const size_t at = edited.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    edited.replace(at, from.size(), to);
    const std::string e = error_of(edited);
    EXPECT_NE(e.find("meta.json checksum mismatch"), std::string::npos) << to << " -> " << e;
    EXPECT_NE(e.find("/ckpt/global_step3/meta.json"), std::string::npos) << e;
  }
  json d = valid_doc();
  d.erase(ckpt::kMetaChecksumKey);
  EXPECT_NE(error_of(d.dump()).find("missing \"meta_xxh64\""), std::string::npos) << error_of(d.dump());
}

// Re-signed documents with values out of range or of the wrong type: the message names the key.
TEST(CheckpointMeta, ValuesAreRangeAndTypeChecked) {
  struct Case {
    json::json_pointer at;
    json value;
    std::string key;
  };
  const std::vector<Case> cases = {
      {json::json_pointer("/zero/world_size"), json(uint64_t(4294967298ull)), "\"zero.world_size\""},
      {json::json_pointer("/zero/world_size"), json(18446744073709551615ull), "\"zero.world_size\""},
      {json::json_pointer("/zero/world_size"), json(2.0), "\"zero.world_size\""},
      {json::json_pointer("/zero/stage"), json(99), "\"zero.stage\""},
      {json::json_pointer("/steps/global_steps"), json(-1), "\"steps.global_steps\""},
      {json::json_pointer("/steps/global_steps"), json(int64_t(1) << 61), "\"steps.global_steps\""},
      {json::json_pointer("/steps/successful_steps"), json(4), "\"steps.successful_steps\""},
      {json::json_pointer("/steps/successful_steps"), json(-2), "\"steps.successful_steps\""},
      {json::json_pointer("/steps/skipped_steps"), json(-1), "\"steps.skipped_steps\""},
      {json::json_pointer("/lr_schedule/last_batch_iteration"), json(-5), "\"lr_schedule.last_batch_iteration\""},
      {json::json_pointer("/lr_schedule/last_batch_iteration"), json(99), "\"lr_schedule.last_batch_iteration\""},
      {json::json_pointer("/loss_scaler/cur_scale"), json(0.0), "\"loss_scaler.cur_scale\""},
      {json::json_pointer("/loss_scaler/cur_scale"), json(-1.0), "\"loss_scaler.cur_scale\""},
      {json::json_pointer("/loss_scaler/cur_scale"), json("65536"), "\"loss_scaler.cur_scale\""},
      {json::json_pointer("/loss_scaler/cur_iter"), json(-1), "\"loss_scaler.cur_iter\""},
      {json::json_pointer("/loss_scaler/last_overflow_iter"), json(3), "\"loss_scaler.last_overflow_iter\""},
      {json::json_pointer("/loss_scaler/cur_hysteresis"), json(INT64_MIN), "\"loss_scaler.cur_hysteresis\""},
      {json::json_pointer("/seed"), json(-1), "\"seed\""},
      {json::json_pointer("/seed"), json(1.5), "\"seed\""},
      {json::json_pointer("/data/train_batch_size"), json(0), "\"data.train_batch_size\""},
      {json::json_pointer("/data/samples_consumed"), json(-24), "\"data.samples_consumed\""},
      {json::json_pointer("/shards/0/bytes"), json(-8), "\"shards[].bytes\""},
      {json::json_pointer("/tensors/0/pieces/0/begin"), json(int64_t(1) << 62), "\"tensors[].pieces[].begin\""},
      {json::json_pointer("/tensors/0/pieces/0/rank"), json(2), "\"tensors[].pieces[].rank\""},
      {json::json_pointer("/model/params/0/shape"), json({int64_t(1) << 40, int64_t(1) << 40}), "\"model.params[].shape\""},
      {json::json_pointer("/model/config/dims"), json("x"), "model.config"},
      {json::json_pointer("/tag"), json("../x"), "\"tag\""},
  };
  for (const Case& c : cases) {
    json d = valid_doc();
    d[c.at] = c.value;
    const std::string e = error_of(signed_doc(d).dump());
    EXPECT_NE(e.find(c.key), std::string::npos) << c.at.to_string() << " = " << c.value.dump() << " -> " << e;
  }
  // A shard list claiming fewer bytes than the tensors need (an allocation bound for consolidate).
  json d = valid_doc();
  d["shards"][0]["bytes"] = 8;
  d["shards"][1]["bytes"] = 8;
  EXPECT_NE(error_of(signed_doc(d).dump()).find("its tensors need 36 bytes"), std::string::npos);
}

// Format version 1 (no checksum) still loads, with a warning; its values are range-checked too.
TEST(CheckpointMeta, VersionOneLoadsWithAWarning) {
  json d = valid_doc();
  d.erase(ckpt::kMetaChecksumKey);
  d["version"] = 1;
  const ckpt::Meta m = ckpt::parse_meta_doc("/c", "/c/meta.json", d.dump());
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("format version 1"), std::string::npos) << m.warnings[0];
  d["zero"]["world_size"] = uint64_t(4294967298ull);
  EXPECT_NE(error_of(d.dump()).find("\"zero.world_size\" must be an integer in [1, 1048576], got 4294967298"),
            std::string::npos) << error_of(d.dump());
  d = valid_doc();
  d["version"] = 3;
  EXPECT_NE(error_of(signed_doc(d).dump()).find("version 3 is not supported"), std::string::npos);
}

// "validation": optional; the patience count and batch count of older checkpoints read as 0; its
// values are range- and type-checked.
TEST(CheckpointMeta, ValidationStateParses) {
  EXPECT_FALSE(ckpt::parse_meta_doc("/c", "/c/meta.json", valid_doc().dump()).validation.any());
  json d = valid_doc();
  d["validation"] = {{"eval_data", "markov:seed=2"}, {"best_loss", 1.25}, {"best_step", 2}};  // an older save
  ckpt::Meta m = ckpt::parse_meta_doc("/c", "/c/meta.json", signed_doc(d).dump());
  EXPECT_EQ(m.validation.eval_data, "markov:seed=2");
  EXPECT_EQ(m.validation.best_loss, 1.25);
  EXPECT_EQ(m.validation.best_step, 2);
  EXPECT_EQ(m.validation.evals_since_best, 0);
  EXPECT_EQ(m.validation.eval_batches, 0);
  d["validation"]["evals_since_best"] = 1;
  d["validation"]["eval_batches"] = 4;
  m = ckpt::parse_meta_doc("/c", "/c/meta.json", signed_doc(d).dump());
  EXPECT_EQ(m.validation.evals_since_best, 1);
  EXPECT_EQ(m.validation.eval_batches, 4);
  d["validation"] = {{"eval_data", "x"}, {"best_loss", nullptr}, {"best_step", -1}, {"evals_since_best", 3}};
  m = ckpt::parse_meta_doc("/c", "/c/meta.json", signed_doc(d).dump());
  EXPECT_TRUE(m.validation.any());
  EXPECT_EQ(m.validation.best_step, -1);
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"eval_data", "x"}, {"best_loss", 1.0}, {"best_step", 4}}, "\"validation.best_step\""},  // after step 3
      {{{"eval_data", "x"}, {"best_loss", "1"}, {"best_step", 1}}, "\"validation.best_loss\""},
      {{{"eval_data", "x"}, {"best_step", 1}}, "\"validation.best_loss\""},
      {{{"eval_data", "x"}, {"best_loss", 1.0}, {"best_step", 1}, {"evals_since_best", -1}}, "\"validation.evals_since_best\""},
      {{{"eval_data", 3}, {"best_loss", 1.0}, {"best_step", 1}}, "\"validation.eval_data\""},
  };
  for (const auto& [v, key] : bad) {
    d["validation"] = v;
    const std::string e = error_of(signed_doc(d).dump());
    EXPECT_NE(e.find(key), std::string::npos) << v.dump() << " -> " << e;
  }
}
