// "auto" resolution with provenance (docs/config.md §10) and unknown keys (§11, rule 3).
#include "cfg_test.h"

using namespace zt_test;
using zt::ConfigSource;
using zt::Json;

namespace {
zt::ConfigOptions with_hidden(int64_t h, int w = 1) {
  zt::ConfigOptions o = world(w);
  o.hidden_size = h;
  return o;
}
const char* kZeroAuto = R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
  "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto", "overlap_comm": "auto",
  "stage3_gather_16bit_weights_on_model_save": "auto"}})";
}  // namespace

TEST(Auto, ZeroKeysWithoutHiddenSizeTakeDeepSpeedDefaults) {  // §10 [run] example
  zt::DsConfig c = resolve(kZeroAuto);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 50000000);
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 100000);
  EXPECT_TRUE(c.zero.overlap_comm);
  EXPECT_FALSE(c.zero.stage3_gather_16bit_weights_on_model_save);
  EXPECT_EQ(c.provenance["zero_optimization.reduce_bucket_size"].source, ConfigSource::kAuto);
  EXPECT_NE(c.provenance["zero_optimization.reduce_bucket_size"].note.find("DeepSpeed default"), std::string::npos);
}

TEST(Auto, ZeroKeysFromHiddenSize) {  // docs/config.md §10: h*h, floor(0.9*h*h), 10*h as integers
  zt::DsConfig c = resolve(kZeroAuto, with_hidden(4096));
  EXPECT_EQ(c.zero.reduce_bucket_size, 16777216);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 15099494);  // HF's 15099494.4, which DeepSpeed itself rejects
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 40960);
  EXPECT_EQ(c.resolved["zero_optimization"]["stage3_prefetch_bucket_size"], 15099494);
  EXPECT_EQ(c.provenance["zero_optimization.stage3_prefetch_bucket_size"].source, ConfigSource::kAuto);
  zt::DsConfig s = resolve(kZeroAuto, with_hidden(768));
  EXPECT_EQ(s.zero.reduce_bucket_size, 589824);
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, 530841);
  EXPECT_EQ(s.zero.stage3_param_persistence_threshold, 7680);
}

TEST(Auto, StrictSectionAutoIsTheDefault) {  // §10 [run]
  EXPECT_EQ(resolve(tb(R"("zero_optimization": {"stage": "auto"})")).zero.stage, 0);
  EXPECT_FALSE(resolve(tb(R"("fp16": {"enabled": "auto"})")).fp16.enabled);
  EXPECT_FALSE(resolve(tb(R"("bf16": {"enabled": "auto"})")).bf16.enabled);
  zt::DsConfig c = resolve(tb(R"("zero_optimization": {"stage": 3, "offload_optimizer": {"device": "auto"}})"));
  EXPECT_EQ(c.zero.offload_optimizer->device, "none");
}

TEST(Auto, AutoKeysAreDroppedBeforeValidationInStrictSections) {  // §1.2, §10
  zt::DsConfig c = resolve(tb(R"("zero_optimization": {"stage": 2, "not_a_key": "auto"})"));
  EXPECT_TRUE(has_warning(c, "zero_optimization.not_a_key"));
  EXPECT_EQ(resolve(tb(R"("zero_optimization": {"stage3_prefetch_bucket_size": "auto", "prefetch_bucket_size": 7})"))
                .zero.stage3_prefetch_bucket_size, 7);
  zt::DsConfig d = resolve(tb(R"("zero_optimization": {"stage": 2, "cpu_offload": "auto",
                                 "offload_optimizer": {"device": "cpu"}})"));
  EXPECT_TRUE(d.zero.optimizer_offloaded());
  zt::ConfigOptions o = world(1);
  o.strict = true;
  EXPECT_REJECTED_W(tb(R"("zero_optimization": {"stage": 2, "not_a_key": "auto"})"), o, "zero_optimization.not_a_key");
}

TEST(Auto, CommandLineValueWins) {
  zt::ConfigOptions o = world(1);
  o.command_line["bf16.enabled"] = true;
  o.command_line["optimizer.params.lr"] = 3e-4;
  zt::DsConfig c = resolve(tb(R"("bf16": {"enabled": "auto"}, "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}})"), o);
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_EQ(c.provenance["bf16.enabled"].source, ConfigSource::kCommandLine);
  EXPECT_DOUBLE_EQ(c.optimizer->lr, 3e-4);
  EXPECT_EQ(c.provenance["optimizer.params.lr"].source, ConfigSource::kCommandLine);
  EXPECT_DOUBLE_EQ(c.optimizer->weight_decay, 0.0);
  EXPECT_EQ(c.provenance["optimizer.params.weight_decay"].source, ConfigSource::kAuto);
  // A command-line value is validated like a file value.
  o.command_line["optimizer.params.lr"] = "fast";
  EXPECT_REJECTED_W(tb(R"("optimizer": {"type": "AdamW", "params": {"lr": "auto"}})"), o, "optimizer.params.lr");
}

TEST(Auto, CommandLineIgnoredWhenTheFileHasAValue) {
  zt::ConfigOptions o = world(1);
  o.command_line["optimizer.params.lr"] = 3e-4;
  zt::DsConfig c = resolve(tb(R"("optimizer": {"type": "AdamW", "params": {"lr": 0.1}})"), o);
  EXPECT_DOUBLE_EQ(c.optimizer->lr, 0.1);
  EXPECT_EQ(c.provenance["optimizer.params.lr"].source, ConfigSource::kFile);
}

TEST(Auto, GradientClipping) {  // docs/config.md §10 (DeepSpeed would crash at the first step)
  zt::DsConfig c = resolve(tb(R"("gradient_clipping": "auto")"));
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.provenance["gradient_clipping"].source, ConfigSource::kAuto);
}

TEST(Auto, BatchTriadFromTheOtherTwo) {  // docs/config.md §10 (DeepSpeed: TypeError)
  zt::DsConfig c = resolve(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4,
                               "gradient_accumulation_steps": 2})", world(2));
  EXPECT_EQ(c.train_batch_size, 16);
  EXPECT_EQ(c.provenance["train_batch_size"].source, ConfigSource::kAuto);
  zt::DsConfig g = resolve(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                               "gradient_accumulation_steps": "auto"})", world(4));
  EXPECT_EQ(g.gradient_accumulation_steps, 2);
  EXPECT_EQ(g.provenance["gradient_accumulation_steps"].source, ConfigSource::kAuto);
  zt::ConfigOptions o = world(2);
  o.command_line["train_micro_batch_size_per_gpu"] = 8;
  zt::DsConfig m = resolve(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                               "gradient_accumulation_steps": 1})", o);
  EXPECT_EQ(m.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(m.train_batch_size, 16);
  EXPECT_EQ(m.provenance["train_micro_batch_size_per_gpu"].source, ConfigSource::kCommandLine);
  EXPECT_REJECTED(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"})",
                  "train_batch_size or train_micro_batch_size_per_gpu");
}

TEST(Auto, SchedulerParams) {
  zt::DsConfig c = resolve(tb(R"("optimizer": {"type": "AdamW"}, "scheduler": {"type": "WarmupLR",
                                 "params": {"warmup_num_steps": "auto", "warmup_max_lr": "auto"}})"));
  EXPECT_EQ(c.scheduler->warmup_num_steps, 1000);
  EXPECT_EQ(c.scheduler->warmup_max_lr, std::vector<double>{1e-3});
  EXPECT_REJECTED(tb(R"("scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}})"),
                  "scheduler.params.total_num_steps", "\"auto\"");
  zt::ConfigOptions o = world(1);
  o.command_line["scheduler.params.total_num_steps"] = 500;
  EXPECT_EQ(resolve(tb(R"("scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}})"), o)
                .scheduler->total_num_steps, 500);
}

TEST(UnknownKeys, TopLevelWarnsWithSuggestion) {  // §11, docs/config.md rule 3
  zt::DsConfig c = resolve(R"({"train_batch_size": 8, "foo_bar": 1, "gradient_clip": 1.0, "reduce_bucket_size": 5})");
  EXPECT_TRUE(has_warning(c, "foo_bar: unknown key"));
  EXPECT_TRUE(has_warning(c, "gradient_clip: unknown key, ignored"));
  EXPECT_TRUE(has_warning(c, "did you mean `gradient_clipping`?"));
  EXPECT_TRUE(has_warning(c, "`reduce_bucket_size` belongs in `zero_optimization`"));
  EXPECT_FALSE(c.resolved.contains("foo_bar"));
}

TEST(UnknownKeys, TopLevelKeyInsideASection) {
  EXPECT_REJECTED(tb(R"("zero_optimization": {"stage": 2, "gradient_clipping": 1.0})"),
                  "zero_optimization.gradient_clipping", "belongs at the top level");
}

TEST(UnknownKeys, SectionErrorsComeBeforeBatchErrors) {  // §1.3: zero is parsed before the triad is checked
  std::string e = error_of(R"({"train_batch_size": 3, "train_micro_batch_size_per_gpu": 2,
                               "zero_optimization": {"stage": 9}})");
  EXPECT_NE(e.find("zero_optimization.stage"), std::string::npos) << e;
}

TEST(UnknownKeys, StrictMakesThemErrors) {
  zt::ConfigOptions o = world(1);
  o.strict = true;
  EXPECT_REJECTED_W(R"({"train_batch_size": 8, "train_batch_sise": 8})", o, "train_batch_sise",
                    "did you mean `train_batch_size`?");
  EXPECT_REJECTED_W(R"({"train_batch_size": 8, "seed": 1})", o, "seed", "unknown key");
  EXPECT_EQ(error_of(R"({"train_batch_size": 8, "fp16": {"enabled": true}})", o), "");
}

TEST(UnknownKeys, KnownDeepSpeedTopLevelKeysDoNotWarn) {
  zt::DsConfig c = resolve(R"({"train_batch_size": 8, "steps_per_print": 10, "wall_clock_breakdown": false,
    "dump_state": false, "zero_allow_untested_optimizer": true, "aio": {"block_size": 1048576},
    "tensorboard": {"enabled": false}, "comms_logger": {"enabled": false}, "elasticity": {"enabled": false},
    "flops_profiler": {"enabled": false}, "data_types": {}, "checkpoint": {}, "activation_checkpointing": {},
    "sequence_parallel_size": 1, "memory_breakdown": false, "dataloader_drop_last": false})");
  // No "unknown key" warning; the one warning lists the keys set to a value zerotrain does not use.
  ASSERT_EQ(c.warnings.size(), 1u) << c.warnings.front();
  EXPECT_NE(c.warnings[0].find("set but not used by zerotrain"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("zero_allow_untested_optimizer = true"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("aio = "), std::string::npos) << c.warnings[0];
  EXPECT_EQ(c.warnings[0].find("dump_state"), std::string::npos) << "dump_state is at its default";
  EXPECT_EQ(c.unused_keys, (std::vector<std::string>{"zero_allow_untested_optimizer", "aio"}));
}

TEST(UnknownKeys, LooseSectionsWarn) {  // §11: ignored by DeepSpeed, so warnings
  zt::DsConfig c = resolve(tb(R"("checkpoint": {"tag_validaton": "WARN"}, "data_types": {"grad_acum_dtype": "fp32"})"));
  EXPECT_TRUE(has_warning(c, "checkpoint.tag_validaton"));
  EXPECT_TRUE(has_warning(c, "did you mean `tag_validation`?"));
  EXPECT_TRUE(has_warning(c, "did you mean `grad_accum_dtype`?"));
}

TEST(Provenance, ExplainListsEveryLeafWithItsSource) {
  zt::DsConfig c = resolve(R"({"train_batch_size": 16, "gradient_accumulation_steps": 2,
                               "zero_optimization": {"stage": 2}})", world(2));
  std::string e = c.explain();
  EXPECT_NE(e.find("train_micro_batch_size_per_gpu = 4  [derived:"), std::string::npos) << e;
  EXPECT_NE(e.find("zero_optimization.stage = 2  [file]"), std::string::npos) << e;
  EXPECT_NE(e.find("zero_optimization.reduce_bucket_size = 500000000  [default]"), std::string::npos) << e;
  EXPECT_NE(e.find("zero_optimization.offload_param = null  [default]"), std::string::npos) << e;
  EXPECT_STREQ(zt::config_source_name(ConfigSource::kCommandLine), "command line");
}

TEST(Provenance, ResolvedJsonUsesDeepSpeedNamesAndIsReparseable) {
  zt::DsConfig c = resolve(R"({"train_batch_size": 16, "bfloat16": {"enabled": true},
                               "zero_optimization": {"stage": 3, "cpu_offload": true, "prefetch_bucket_size": 9}})", world(2));
  const Json& r = c.resolved;
  EXPECT_TRUE(r.contains("bf16"));
  EXPECT_EQ(r["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(r["zero_optimization"]["stage3_prefetch_bucket_size"], 9);
  // The resolved config resolves to itself (no deprecated spellings, every key known).
  zt::DsConfig again = zt::parse_ds_config(r.dump(), "resolved.json", world(2));
  EXPECT_EQ(again.resolved, r);
  EXPECT_TRUE(again.warnings.empty()) << again.warnings.front();
}

// The "not used" list: a key counts when its value differs from what resolution gives without it,
// whatever its spelling; a not-used key at its default is not listed; --explain tags every one.
TEST(UnusedKeys, ListedOnceBySpellingAndTaggedInExplain) {
  zt::DsConfig c = resolve(R"({"train_batch_size": 8, "zero_optimization": {"stage": 3,
    "round_robin_gradients": false, "model_persistence_threshold": 5, "cpu_offload_use_pin_memory": true},
    "checkpoint": {"parallel_write": {"pipeline_stage": true}}})");
  EXPECT_EQ(c.unused_keys, (std::vector<std::string>{"zero_optimization.model_persistence_threshold",
                                                     "zero_optimization.cpu_offload_use_pin_memory",
                                                     "checkpoint.parallel_write.pipeline_stage"}));
  size_t lists = 0;
  for (const std::string& w : c.warnings) lists += w.find("set but not used by zerotrain") != std::string::npos;
  EXPECT_EQ(lists, 1u);
  const std::string explain = c.explain();
  EXPECT_NE(explain.find("checkpoint.parallel_write.pipeline_stage = true  [file: not used by zerotrain"),
            std::string::npos) << explain;
  EXPECT_NE(explain.find("zero_optimization.round_robin_gradients = false  [file: not used by zerotrain"),
            std::string::npos) << explain;
  zt::DsConfig quiet = resolve(R"({"train_batch_size": 8, "zero_optimization": {"round_robin_gradients": false}})");
  EXPECT_TRUE(quiet.unused_keys.empty());
  EXPECT_TRUE(quiet.warnings.empty()) << quiet.warnings.front();
}
