// docs/config.md: zero_optimization with offload_param / offload_optimizer (§8, §13.1 #9 #16-21,
// §13.2, §17.3, §17.5).
#include "cfg_test.h"

using namespace zt_test;
using zt::Json;

namespace {
zt::DsConfig zero(const std::string& body) { return resolve(tb("\"zero_optimization\": " + body)); }
#define EXPECT_ZERO_REJECTED(body, ...) EXPECT_REJECTED(tb("\"zero_optimization\": " + std::string(body)), __VA_ARGS__)
}  // namespace

TEST(Zero, Defaults) {
  zt::DsConfig c = zero("{}");
  const zt::ZeroConfig& z = c.zero;
  EXPECT_EQ(z.stage, 0);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.reduce_bucket_size, 500000000);
  EXPECT_EQ(z.allgather_bucket_size, 500000000);
  EXPECT_FALSE(z.overlap_comm);
  EXPECT_TRUE(z.load_from_fp32_weights);
  EXPECT_EQ(z.sub_group_size, 1000000000);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, 50000000);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 100000);
  EXPECT_EQ(z.stage3_model_persistence_threshold, INT64_MAX);
  EXPECT_EQ(z.stage3_max_live_parameters, 1000000000);
  EXPECT_EQ(z.stage3_max_reuse_distance, 1000000000);
  EXPECT_FALSE(z.stage3_gather_16bit_weights_on_model_save);
  EXPECT_EQ(z.stage3_module_granularity_threshold, 0);
  EXPECT_TRUE(z.ignore_unused_parameters);
  EXPECT_FALSE(z.round_robin_gradients);
  EXPECT_FALSE(z.offload_param.has_value());
  EXPECT_FALSE(z.offload_optimizer.has_value());
  const Json& r = c.resolved["zero_optimization"];
  EXPECT_EQ(r["zero_hpz_partition_size"], 1);
  EXPECT_EQ(r["mics_shard_size"], -1);
  EXPECT_EQ(r["use_multi_rank_bucket_allreduce"], true);
  EXPECT_EQ(r["memory_efficient_linear"], true);
  EXPECT_EQ(r["leaf_module"]["classes"].size(), 3u);
}

TEST(Zero, StageCoercions) {  // §13.2
  EXPECT_EQ(zero(R"({"stage": "2"})").zero.stage, 2);
  EXPECT_EQ(zero(R"({"stage": 2.0})").zero.stage, 2);
  EXPECT_EQ(zero(R"({"stage": true})").zero.stage, 1);
  EXPECT_ZERO_REJECTED(R"({"stage": 4})", "zero_optimization.stage", "found 4", "0, 1, 2 or 3");
  EXPECT_ZERO_REJECTED(R"({"stage": -1})", "zero_optimization.stage");
  EXPECT_ZERO_REJECTED(R"({"stage": null})", "zero_optimization.stage");  // §17.5
  EXPECT_ZERO_REJECTED(R"({"stage": 1.5})", "zero_optimization.stage", "fractional");
}

TEST(Zero, LegacyBooleanForm) {  // §8, §13.2
  zt::DsConfig c = resolve(R"({"train_batch_size": 8, "zero_optimization": true, "allgather_size": 1000})");
  EXPECT_EQ(c.zero.stage, 1);
  EXPECT_EQ(c.zero.allgather_bucket_size, 1000);
  EXPECT_TRUE(has_warning(c, "deprecated"));
  zt::DsConfig d = resolve(R"({"train_batch_size": 8, "zero_optimization": true})");
  EXPECT_EQ(d.zero.allgather_bucket_size, 500000000);
  EXPECT_EQ(resolve(R"({"train_batch_size": 8, "zero_optimization": false})").zero.stage, 0);
  EXPECT_REJECTED(R"({"train_batch_size": 8, "zero_optimization": null})", "zero_optimization", "found null");
  EXPECT_REJECTED(R"({"train_batch_size": 8, "zero_optimization": 2})", "zero_optimization", "expected an object");
}

TEST(Zero, BucketSizeCoercions) {  // §13.2: 5e8 / 5.5 / "5e8" / "500" / -1 / 0, and §17.5 bool
  EXPECT_EQ(zero(R"({"reduce_bucket_size": 5e8})").zero.reduce_bucket_size, 500000000);
  EXPECT_ZERO_REJECTED(R"({"reduce_bucket_size": 5.5})", "zero_optimization.reduce_bucket_size", "fractional part");
  EXPECT_ZERO_REJECTED(R"({"reduce_bucket_size": "5e8"})", "zero_optimization.reduce_bucket_size", "found \"5e8\"");
  EXPECT_EQ(zero(R"({"reduce_bucket_size": "500"})").zero.reduce_bucket_size, 500);
  EXPECT_ZERO_REJECTED(R"({"reduce_bucket_size": -1})", "zero_optimization.reduce_bucket_size", ">= 0");
  EXPECT_EQ(zero(R"({"reduce_bucket_size": 0})").zero.reduce_bucket_size, 0);
  EXPECT_EQ(zero(R"({"reduce_bucket_size": true})").zero.reduce_bucket_size, 1);
  EXPECT_EQ(zero(R"({"sub_group_size": 1e12})").zero.sub_group_size, 1000000000000);
  EXPECT_ZERO_REJECTED(R"({"allgather_bucket_size": [1]})", "zero_optimization.allgather_bucket_size");
}

TEST(Zero, BoolCoercions) {  // §13.2, §17.5
  EXPECT_TRUE(zero(R"({"contiguous_gradients": "yes"})").zero.contiguous_gradients);
  EXPECT_TRUE(zero(R"({"contiguous_gradients": 1})").zero.contiguous_gradients);
  EXPECT_FALSE(zero(R"({"contiguous_gradients": "off"})").zero.contiguous_gradients);
  EXPECT_ZERO_REJECTED(R"({"contiguous_gradients": 2})", "zero_optimization.contiguous_gradients", "boolean");
  EXPECT_ZERO_REJECTED(R"({"contiguous_gradients": null})", "zero_optimization.contiguous_gradients");
}

TEST(Zero, OverlapCommDefaultFollowsStage) {  // §13.1 #19, §17.5
  for (int s : {0, 1, 2}) EXPECT_FALSE(zero("{\"stage\": " + std::to_string(s) + "}").zero.overlap_comm);
  EXPECT_TRUE(zero(R"({"stage": 3})").zero.overlap_comm);
  EXPECT_TRUE(zero(R"({"stage": 3, "overlap_comm": null})").zero.overlap_comm);
  EXPECT_FALSE(zero(R"({"stage": 2, "overlap_comm": null})").zero.overlap_comm);
  EXPECT_FALSE(zero(R"({"stage": 3, "overlap_comm": false})").zero.overlap_comm);
  EXPECT_TRUE(zero(R"({"stage": 1, "overlap_comm": true})").zero.overlap_comm);
}

TEST(Zero, PipelineLoadingCheckpointDefault) {  // §13.1 #18
  for (int s : {0, 1, 2}) EXPECT_FALSE(zero("{\"stage\": " + std::to_string(s) + "}").zero.pipeline_loading_checkpoint);
}

TEST(Zero, UnknownKeysAreErrorsWithSuggestions) {  // §11, §13.2, docs/config.md rule 2
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "foo": 1})", "zero_optimization.foo", "unknown key");
  EXPECT_ZERO_REJECTED(R"({"stage": 1, "grad_hooks": true})", "zero_optimization.grad_hooks");
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "reduce_bucket_sise": 100})", "zero_optimization.reduce_bucket_sise",
                       "did you mean `reduce_bucket_size`?");
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "overlapcomm": true})", "did you mean `overlap_comm`?");
  EXPECT_ZERO_REJECTED(R"({"offload_optimizer": {"device": "cpu", "foo": 1}})", "zero_optimization.offload_optimizer.foo");
  EXPECT_ZERO_REJECTED(R"({"offload_param": {"devise": "cpu"}})", "zero_optimization.offload_param.devise",
                       "did you mean `device`?");
}

TEST(Zero, DeprecatedCpuOffload) {  // §13.1 #16, §13.2
  zt::DsConfig c = zero(R"({"stage": 2, "cpu_offload": true})");
  ASSERT_TRUE(c.zero.offload_optimizer.has_value());
  EXPECT_EQ(c.zero.offload_optimizer->device, "cpu");
  EXPECT_EQ(c.zero.offload_optimizer->buffer_count, 4);
  EXPECT_TRUE(c.zero.offload_optimizer->pin_memory);
  EXPECT_EQ(c.resolved["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_FALSE(c.resolved["zero_optimization"].contains("cpu_offload"));
  EXPECT_TRUE(has_warning(c, "cpu_offload"));
  EXPECT_FALSE(zero(R"({"stage": 2, "cpu_offload": false})").zero.offload_optimizer.has_value());
  zt::DsConfig p = zero(R"({"stage": 3, "cpu_offload_param": true})");
  ASSERT_TRUE(p.zero.offload_param.has_value());
  EXPECT_EQ(p.zero.offload_param->device, "cpu");
  EXPECT_EQ(p.zero.offload_param->buffer_count, 5);
}

TEST(Zero, DeprecatedPlusReplacementRejected) {  // §13.2, §17.3 (even when the deprecated key is false)
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "cpu_offload": true, "offload_optimizer": {"device": "cpu"}})",
                       "zero_optimization.cpu_offload", "offload_optimizer");
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "cpu_offload": false, "offload_optimizer": {"device": "cpu"}})",
                       "zero_optimization.cpu_offload");
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "cpu_offload_param": false, "offload_param": {"device": "cpu"}})",
                       "zero_optimization.cpu_offload_param");
  EXPECT_ZERO_REJECTED(R"({"stage3_gather_fp16_weights_on_model_save": true, "stage3_gather_16bit_weights_on_model_save": true})",
                       "stage3_gather_fp16_weights_on_model_save");
  EXPECT_ZERO_REJECTED(R"({"stage3_gather_fp16_weights_on_model_save": false, "stage3_gather_16bit_weights_on_model_save": true})",
                       "stage3_gather_fp16_weights_on_model_save");
}

TEST(Zero, GatherWeightsSpellings) {  // §13.1 #9, #16, #17
  EXPECT_TRUE(zero(R"({"stage3_gather_16bit_weights_on_model_save": true})").zero.stage3_gather_16bit_weights_on_model_save);
  EXPECT_TRUE(zero(R"({"stage3_gather_fp16_weights_on_model_save": true})").zero.stage3_gather_16bit_weights_on_model_save);
  EXPECT_TRUE(zero(R"({"gather_16bit_weights_on_model_save": true})").zero.stage3_gather_16bit_weights_on_model_save);
}

TEST(Zero, Aliases) {  // §13.1 #17, §8 "alias/name"
  zt::DsConfig a = zero(R"({"stage3_prefetch_bucket_size": 12345, "stage3_param_persistence_threshold": 12345,
                            "stage3_max_reuse_distance": 12345})");
  EXPECT_EQ(a.zero.stage3_prefetch_bucket_size, 12345);
  EXPECT_EQ(a.zero.stage3_param_persistence_threshold, 12345);
  EXPECT_EQ(a.zero.stage3_max_reuse_distance, 12345);
  zt::DsConfig b = zero(R"({"prefetch_bucket_size": 7, "param_persistence_threshold": 8, "max_live_parameters": 9,
                            "max_reuse_distance": 10, "model_persistence_threshold": 11,
                            "module_granularity_threshold": 12, "use_all_reduce_for_fetch_params": true,
                            "allgather_sequential": true})");
  EXPECT_EQ(b.zero.stage3_prefetch_bucket_size, 7);
  EXPECT_EQ(b.zero.stage3_param_persistence_threshold, 8);
  EXPECT_EQ(b.zero.stage3_max_live_parameters, 9);
  EXPECT_EQ(b.zero.stage3_max_reuse_distance, 10);
  EXPECT_EQ(b.zero.stage3_model_persistence_threshold, 11);
  EXPECT_EQ(b.zero.stage3_module_granularity_threshold, 12);
  EXPECT_TRUE(b.zero.stage3_use_all_reduce_for_fetch_params);
  EXPECT_TRUE(b.zero.stage3_allgather_sequential);
  // Resolved under DeepSpeed's JSON name.
  EXPECT_EQ(b.resolved["zero_optimization"]["stage3_prefetch_bucket_size"], 7);
  EXPECT_FALSE(b.resolved["zero_optimization"].contains("prefetch_bucket_size"));
  // Both spellings at once -> error (§13.2).
  EXPECT_ZERO_REJECTED(R"({"stage3_prefetch_bucket_size": 5, "prefetch_bucket_size": 7})",
                       "zero_optimization.prefetch_bucket_size", "only one");
  EXPECT_ZERO_REJECTED(R"({"stage3_prefetch_bucket_size": 15099494.4})", "stage3_prefetch_bucket_size", "fractional");
}

TEST(Zero, OffloadSectionsAbsentNullEmpty) {  // §13.1 #20, §8.1, §8.2
  EXPECT_FALSE(zero(R"({"stage": 3})").zero.offload_param.has_value());
  EXPECT_FALSE(zero(R"({"stage": 3, "offload_param": null, "offload_optimizer": null})").zero.offload_optimizer.has_value());
  zt::DsConfig c = zero(R"({"stage": 3, "offload_param": {}, "offload_optimizer": {}})");
  ASSERT_TRUE(c.zero.offload_param.has_value());
  ASSERT_TRUE(c.zero.offload_optimizer.has_value());
  const zt::OffloadParamConfig& p = *c.zero.offload_param;
  EXPECT_EQ(p.device, "none");
  EXPECT_FALSE(p.nvme_path.has_value());
  EXPECT_EQ(p.buffer_count, 5);
  EXPECT_EQ(p.buffer_size, 100000000);
  EXPECT_EQ(p.max_in_cpu, 1000000000);
  EXPECT_TRUE(p.pin_memory);
  const zt::OffloadOptimizerConfig& o = *c.zero.offload_optimizer;
  EXPECT_EQ(o.device, "none");
  EXPECT_EQ(o.buffer_count, 4);
  EXPECT_TRUE(o.pin_memory);
  EXPECT_DOUBLE_EQ(o.ratio, 1.0);
  EXPECT_DOUBLE_EQ(o.cpuadam_cores_perc, 0.8);
  EXPECT_FALSE(c.zero.optimizer_offloaded());
  EXPECT_TRUE(c.resolved["zero_optimization"]["offload_param"]["nvme_path"].is_null());
  EXPECT_EQ(c.resolved["zero_optimization"]["offload_param"]["device"], "none");
}

TEST(Zero, OffloadPipelineFlags) {  // §13.1 #21
  auto flags = [](const std::string& o) {
    zt::DsConfig c = zero("{\"offload_optimizer\": " + o + "}");
    return c.zero.offload_optimizer->pipeline_read || c.zero.offload_optimizer->pipeline_write;
  };
  EXPECT_FALSE(flags(R"({"device": "cpu"})"));
  EXPECT_TRUE(flags(R"({"device": "cpu", "pipeline_read": true})"));
  EXPECT_TRUE(flags(R"({"device": "cpu", "pipeline_write": true})"));
  EXPECT_TRUE(flags(R"({"device": "cpu", "pipeline_read": true, "pipeline_write": true})"));
}

TEST(Zero, OffloadDeviceAndRatio) {  // §13.2
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}})",
                       "offload_optimizer.ratio", "Partial offloading only supported for ZeRO Stage 3");
  // DeepSpeed accepts partial offload at stage 3; zerotrain does not implement it (docs/config.md rule 5).
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}})",
                       "partial optimizer offload", "not supported by zerotrain");
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 1.5}})", "ratio", "[0, 1]");
  EXPECT_ZERO_REJECTED(R"({"offload_optimizer": {"device": "gpu"}})", "offload_optimizer.device", "found \"gpu\"");
  EXPECT_ZERO_REJECTED(R"({"offload_optimizer": {"device": "CPU"}})", "offload_optimizer.device", "lower case");
  EXPECT_ZERO_REJECTED(R"({"offload_param": {"buffer_count": -1}})", "offload_param.buffer_count", ">= 0");
}

TEST(Zero, OffloadAcceptedAtAnyStage) {  // §8.3, §13.2 (offload_param below stage 3 is unused: warning)
  EXPECT_EQ(zero(R"({"stage": 0, "offload_param": {"device": "cpu"}})").zero.offload_param->device, "cpu");
  zt::DsConfig c = zero(R"({"stage": 2, "offload_param": {"device": "cpu"}})");
  EXPECT_TRUE(c.zero.params_offloaded());
  EXPECT_TRUE(has_warning(c, "only used by stage 3"));
  EXPECT_TRUE(zero(R"({"stage": 0, "offload_optimizer": {"device": "cpu"}})").zero.optimizer_offloaded());
  zt::DsConfig s3 = zero(R"({"stage": 3, "offload_param": {"device": "cpu", "pin_memory": false, "buffer_count": 6},
                             "offload_optimizer": {"device": "cpu"}})");
  EXPECT_FALSE(s3.zero.offload_param->pin_memory);
  EXPECT_EQ(s3.zero.offload_param->buffer_count, 6);
}

TEST(Zero, BoundsAsInDeepSpeed) {  // §13.2
  EXPECT_ZERO_REJECTED(R"({"zero_hpz_partition_size": -1})", "zero_hpz_partition_size", ">= 0");
  EXPECT_EQ(zero(R"({"mics_shard_size": -5})").resolved["zero_optimization"]["mics_shard_size"], -5);
  EXPECT_EQ(zero(R"({"zero_hpz_partition_size": 0})").resolved["zero_optimization"]["zero_hpz_partition_size"], 0);
  EXPECT_EQ(zero(R"({"sub_group_size": 0})").zero.sub_group_size, 0);
  EXPECT_EQ(zero(R"({"stage3_module_granularity_threshold": -5})").zero.stage3_module_granularity_threshold, -5);
}

TEST(Zero, KnownButUnsupportedRejectedWhenEnabled) {  // docs/config.md rule 5
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/x"}})", "nvme", "not supported");
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "offload_optimizer": {"device": "nvme"}})", "nvme", "not supported");
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "mics_shard_size": 4})", "MiCS");
  EXPECT_ZERO_REJECTED(R"({"stage": 2, "zenflow": {}})", "ZenFlow");
  EXPECT_ZERO_REJECTED(R"({"stage": 1, "legacy_stage1": true})", "legacy_stage1");
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "zeropp_loco_param": {"err_beta": 0.8}})", "LoCo");
  zt::DsConfig ok = zero(R"({"stage": 3, "zero_quantized_weights": false, "zero_hpz_partition_size": 1,
                             "mics_shard_size": -1, "zenflow": null, "offload_param": {"device": "none"}})");
  EXPECT_EQ(ok.zero.stage, 3);
}

TEST(Zero, HpzPartitionIsAccepted) {
  EXPECT_EQ(zero(R"({"stage": 3, "zero_hpz_partition_size": 8})").zero.zero_hpz_partition_size, 8);
  EXPECT_EQ(zero(R"({"stage": 3})").zero.zero_hpz_partition_size, 1);
  EXPECT_ZERO_REJECTED(R"({"stage": 3, "zero_hpz_partition_size": -1})", "zero_hpz_partition_size");
}

TEST(Zero, QuantizedWeightsAreAccepted) {
  EXPECT_TRUE(zero(R"({"stage": 3, "zero_quantized_gradients": true})").zero.zero_quantized_gradients);
  EXPECT_TRUE(zero(R"({"stage": 3, "zero_quantized_weights": true})").zero.zero_quantized_weights);
  EXPECT_FALSE(zero(R"({"stage": 3})").zero.zero_quantized_weights);
}

TEST(Zero, ElasticCheckpointWarningAtStage3) {
  EXPECT_TRUE(has_warning(zero(R"({"stage": 3, "elastic_checkpoint": true})"), "elastic checkpointing is deprecated"));
}

TEST(Zero, LeafModule) {
  zt::DsConfig c = zero(R"({"leaf_module": {"names": "block", "classes": ["A", "A", "B"]}})");
  EXPECT_EQ(c.resolved["zero_optimization"]["leaf_module"]["names"], Json::array({"block"}));
  EXPECT_EQ(c.resolved["zero_optimization"]["leaf_module"]["classes"], Json::array({"A", "B"}));
  EXPECT_ZERO_REJECTED(R"({"leaf_module": {"name": ["x"]}})", "leaf_module.name");
}

TEST(Zero, ResolvedDefaultsExactly) {  // §8 table, §8.1, §8.2: every key with DeepSpeed 0.19.5's default
  Json expected = Json::parse(R"({
    "stage": 0, "contiguous_gradients": true, "reduce_scatter": true, "reduce_bucket_size": 500000000,
    "use_multi_rank_bucket_allreduce": true, "allgather_partitions": true, "allgather_bucket_size": 500000000,
    "overlap_comm": false, "load_from_fp32_weights": true, "elastic_checkpoint": false,
    "offload_optimizer": null, "offload_param": null, "zenflow": null, "sub_group_size": 1000000000,
    "stage3_prefetch_bucket_size": 50000000, "stage3_param_persistence_threshold": 100000,
    "stage3_model_persistence_threshold": 9223372036854775807, "stage3_max_live_parameters": 1000000000,
    "stage3_max_reuse_distance": 1000000000, "stage3_gather_16bit_weights_on_model_save": false,
    "stage3_module_granularity_threshold": 0, "stage3_use_all_reduce_for_fetch_params": false,
    "stage3_allgather_sequential": false, "ignore_unused_parameters": true, "legacy_stage1": false,
    "round_robin_gradients": false, "zero_hpz_partition_size": 1, "zero_quantized_weights": false,
    "zero_quantized_nontrainable_weights": false, "zero_quantized_gradients": false, "zeropp_loco_param": null,
    "mics_shard_size": -1, "mics_hierarchical_params_gather": false, "memory_efficient_linear": true,
    "pipeline_loading_checkpoint": false, "override_module_apply": true, "log_trace_cache_warnings": false,
    "enable_sanity_checks": false, "save_muon_momentum_buffer_in_memory": false,
    "leaf_module": {"classes": ["transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
                                "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
                                "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"],
                    "names": [], "name_suffixes": []}})");
  EXPECT_EQ(zero("{}").resolved["zero_optimization"], expected);
  Json offload = zero(R"({"stage": 3, "offload_param": {}, "offload_optimizer": {}})").resolved["zero_optimization"];
  EXPECT_EQ(offload["offload_param"], Json::parse(R"({"device": "none", "nvme_path": null, "buffer_count": 5,
      "buffer_size": 100000000, "max_in_cpu": 1000000000, "pin_memory": true})"));
  EXPECT_EQ(offload["offload_optimizer"], Json::parse(R"({"device": "none", "nvme_path": null, "buffer_count": 4,
      "pin_memory": true, "pipeline_read": false, "pipeline_write": false, "fast_init": false, "ratio": 1.0,
      "super_offload": false, "cpuadam_cores_perc": 0.8})"));
}
