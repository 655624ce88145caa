// docs/config.md: top-level scalars (§3), §13.2 defaults row, other loose sections (§9) and §12 config-time rows.
#include "cfg_test.h"

using namespace zt_test;
using zt::Json;

TEST(Scalars, DefaultsOfAnAlmostEmptyConfig) {  // §13.2 row `{}`
  zt::DsConfig c = resolve(R"({"train_batch_size": 8})");
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_FALSE(c.steps_per_print.has_value());
  EXPECT_TRUE(c.resolved["steps_per_print"].is_null());
  EXPECT_FALSE(c.communication_data_type.has_value());
  EXPECT_TRUE(c.resolved["communication_data_type"].is_null());
  EXPECT_FALSE(c.prescale_gradients);
  EXPECT_DOUBLE_EQ(c.gradient_predivide_factor, 1.0);
  EXPECT_EQ(c.gradient_allreduce_op, "mean");
  EXPECT_TRUE(c.managed_gradient_accumulation);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_FALSE(c.memory_breakdown);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_FALSE(c.zero.overlap_comm);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 500000000);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 50000000);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_DOUBLE_EQ(c.fp16.loss_scale, 0.0);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.fp16.min_loss_scale, 1);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_FALSE(c.bf16.immediate_grad_update);
  EXPECT_TRUE(c.bf16.check_grad_overflow);
  EXPECT_FALSE(c.optimizer.has_value());
  EXPECT_FALSE(c.scheduler.has_value());
  EXPECT_TRUE(c.warnings.empty());
  // The resolved document carries every section with its defaults, offloads as null.
  EXPECT_TRUE(c.resolved["zero_optimization"]["offload_optimizer"].is_null());
  EXPECT_TRUE(c.resolved["zero_optimization"]["offload_param"].is_null());
  EXPECT_EQ(c.resolved["gradient_clipping"], 1.0);
  EXPECT_EQ(c.provenance["gradient_clipping"].source, zt::ConfigSource::kDefault);
}

TEST(Scalars, GradientClippingValues) {  // §13.1 #24
  EXPECT_DOUBLE_EQ(resolve(tb(R"("gradient_clipping": 0.5)")).gradient_clipping, 0.5);
  EXPECT_DOUBLE_EQ(resolve(tb(R"("gradient_clipping": 0.0)")).gradient_clipping, 0.0);
  EXPECT_DOUBLE_EQ(resolve(tb(R"("gradient_clipping": 2)")).gradient_clipping, 2.0);
  EXPECT_REJECTED(tb(R"("gradient_clipping": null)"), "gradient_clipping", "found null");
  EXPECT_REJECTED(tb(R"("gradient_clipping": "1.0")"), "gradient_clipping", "expected a number");
}

TEST(Scalars, StepsPerPrint) {  // §13.2: 0 accepted
  EXPECT_EQ(resolve(tb(R"("steps_per_print": 0)")).steps_per_print, 0);
  EXPECT_EQ(resolve(tb(R"("steps_per_print": 10)")).steps_per_print, 10);
  EXPECT_FALSE(resolve(tb(R"("steps_per_print": null)")).steps_per_print.has_value());
  EXPECT_REJECTED(tb(R"("steps_per_print": -1)"), "steps_per_print");
  EXPECT_REJECTED(tb(R"("steps_per_print": 2.5)"), "steps_per_print", "fractional");
}

TEST(Scalars, CommunicationDataType) {  // §3, §13.2, §17.6
  EXPECT_EQ(resolve(tb(R"("communication_data_type": "FP16")")).communication_data_type, zt::DType::F16);
  EXPECT_EQ(resolve(tb(R"("communication_data_type": "fp16")")).resolved["communication_data_type"], "fp16");
  EXPECT_EQ(resolve(tb(R"("communication_data_type": "bf16")")).communication_data_type, zt::DType::BF16);
  EXPECT_EQ(resolve(tb(R"("communication_data_type": "Fp32")")).communication_data_type, zt::DType::F32);
  EXPECT_REJECTED(tb(R"("communication_data_type": "bfloat16")"), "communication_data_type", "\"bfloat16\"",
                  "\"fp16\", \"bf16\", \"fp32\"");
  EXPECT_REJECTED(tb(R"("communication_data_type": "fp8")"), "communication_data_type");
  EXPECT_REJECTED(tb(R"("communication_data_type": 16)"), "communication_data_type", "found 16");
  EXPECT_REJECTED(tb(R"("seq_parallel_communication_data_type": "fp64")"), "seq_parallel_communication_data_type");
}

TEST(Scalars, GradientAllreduceOp) {  // §13.1 #8
  EXPECT_EQ(resolve(tb(R"("gradient_allreduce_op": "mean")")).gradient_allreduce_op, "mean");
  EXPECT_EQ(resolve(tb(R"("gradient_allreduce_op": "SUM")")).gradient_allreduce_op, "sum");
  EXPECT_EQ(resolve(tb("")).gradient_allreduce_op == "mean", true);
  EXPECT_REJECTED(tb(R"("gradient_allreduce_op": "max")"), "Invalid gradient_allreduce_op");
  EXPECT_REJECTED(tb(R"("gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3})"),
                  "not supported with ZeRO stage 3");
  EXPECT_REJECTED(tb(R"("gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2, "zenflow": {}})"),
                  "ZenFlow");
  EXPECT_REJECTED(tb(R"("gradient_allreduce_op": "sum", "zero_optimization": {"stage": 1}, "compile": {"deepcompile": true})"),
                  "compile", "not supported");
  EXPECT_REJECTED(tb(R"("gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2}, "compile": {"deepcompile": true})"),
                  "compile", "not supported");
  EXPECT_ACCEPTED(tb(R"("gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2})"));
}

TEST(Scalars, LooseBoolsRejectStrings) {  // docs/config.md rule 6, §17.6
  EXPECT_REJECTED(tb(R"("prescale_gradients": "true")"), "prescale_gradients", "found \"true\"", "without quotes");
  EXPECT_REJECTED(tb(R"("wall_clock_breakdown": "yes")"), "wall_clock_breakdown");
  EXPECT_REJECTED(tb(R"("wall_clock_breakdown": null)"), "wall_clock_breakdown", "found null");
  EXPECT_TRUE(resolve(tb(R"("wall_clock_breakdown": true)")).wall_clock_breakdown);
  EXPECT_TRUE(resolve(tb(R"("memory_breakdown": 1)")).memory_breakdown);
  EXPECT_TRUE(resolve(tb(R"("prescale_gradients": true)")).prescale_gradients);
}

TEST(Scalars, PredivideFactor) {
  EXPECT_DOUBLE_EQ(resolve(tb(R"("gradient_predivide_factor": 2.0)")).gradient_predivide_factor, 2.0);
  EXPECT_REJECTED(tb(R"("gradient_predivide_factor": "2")"), "gradient_predivide_factor");
  EXPECT_REJECTED(tb(R"("gradient_predivide_factor": 0)"), "gradient_predivide_factor", "> 0");
}

TEST(Scalars, ReduceScatterRulesOfZero2And3) {  // §3 / §8 engine-time asserts, rejected at config time
  EXPECT_REJECTED(tb(R"("gradient_predivide_factor": 2.0, "zero_optimization": {"stage": 2})"),
                  "gradient_predivide_factor", "reduce_scatter");
  EXPECT_REJECTED(tb(R"("prescale_gradients": true, "zero_optimization": {"stage": 3})"), "prescale_gradients");
  EXPECT_ACCEPTED(tb(R"("prescale_gradients": true, "zero_optimization": {"stage": 2, "reduce_scatter": false})"));
  EXPECT_ACCEPTED(tb(R"("gradient_predivide_factor": 2.0, "zero_optimization": {"stage": 1})"));
}

TEST(Scalars, VocabularySizeWarning) {
  zt::DsConfig c = resolve(tb(R"("vocabulary_size": 50257)"));
  EXPECT_EQ(c.vocabulary_size, 50257);
  EXPECT_TRUE(has_warning(c, "multiple of 8"));
}

TEST(Scalars, SparseGradientsAndGraphHarvestingNotSupported) {
  EXPECT_ACCEPTED(tb(R"("sparse_gradients": false)"));
  EXPECT_REJECTED(tb(R"("sparse_gradients": true)"), "sparse_gradients", "not supported by zerotrain");
  EXPECT_REJECTED(tb(R"("graph_harvesting": true)"), "graph_harvesting", "not supported by zerotrain");
}

// §9 loose sections.
TEST(OtherSections, CheckpointTagValidation) {
  zt::DsConfig c = resolve(tb(R"("checkpoint": {"tag_validation": "fail"})"));
  EXPECT_EQ(c.checkpoint_tag_validation, "FAIL");
  EXPECT_EQ(c.resolved["checkpoint"]["tag_validation"], "FAIL");
  EXPECT_EQ(resolve(tb(R"("checkpoint": {"tag_validation": "Ignore"})")).checkpoint_tag_validation, "IGNORE");
  EXPECT_EQ(resolve(tb("")).checkpoint_tag_validation, "WARN");
  EXPECT_REJECTED(tb(R"("checkpoint": {"tag_validation": "STRICT"})"), "checkpoint.tag_validation",
                  "\"WARN\", \"IGNORE\", \"FAIL\"");
  EXPECT_REJECTED(tb(R"("checkpoint": {"tag_validation": "foo"})"), "checkpoint.tag_validation");
}

TEST(OtherSections, CheckpointParallelWrite) {
  EXPECT_ACCEPTED(tb(R"("checkpoint": {"parallel_write": {"pipeline_stage": true}})"));
  EXPECT_ACCEPTED(tb(R"("checkpoint": {"parallel_write": {"pipeline_stage": 0}})"));
  EXPECT_REJECTED(tb(R"("checkpoint": {"parallel_write": {"pipeline_stage": "yes"}})"),
                  "checkpoint.parallel_write.pipeline_stage", "true or false");
}

TEST(OtherSections, AmpAndProgressiveLayerDropNeedEnabled) {
  EXPECT_REJECTED(tb(R"("amp": {"opt_level": "O1"})"), "amp", "missing `enabled`");
  EXPECT_REJECTED(tb(R"("progressive_layer_drop": {"theta": 0.5})"), "progressive_layer_drop", "missing `enabled`");
  EXPECT_ACCEPTED(tb(R"("amp": {"enabled": false, "opt_level": "O1"})"));
  EXPECT_REJECTED(tb(R"("amp": {"enabled": true})"), "amp", "not supported by zerotrain");
}

TEST(OtherSections, KnownButUnsupportedFeatures) {  // docs/config.md rule 5
  EXPECT_ACCEPTED(tb(R"("elasticity": {"enabled": false})"));
  EXPECT_REJECTED(tb(R"("elasticity": {"enabled": true, "max_train_batch_size": 100})"), "elasticity",
                  "not supported by zerotrain");
  EXPECT_REJECTED(tb(R"("compression_training": {"weight_quantization": {"shared_parameters": {"enabled": true}}})"),
                  "compression_training", "not supported");
  EXPECT_ACCEPTED(tb(R"("compression_training": {"weight_quantization": {"shared_parameters": {"enabled": false}}})"));
  EXPECT_REJECTED(tb(R"("tensor_parallel": {"autotp_size": 2})"), "tensor parallelism");
  EXPECT_ACCEPTED(tb(R"("tensor_parallel": {"autotp_size": 0})"));
  EXPECT_REJECTED(tb(R"("hybrid_engine": {"enabled": true})"), "hybrid engine");
  EXPECT_REJECTED(tb(R"("data_efficiency": {"enabled": true})"), "data_efficiency");
  EXPECT_REJECTED(tb(R"("sparse_attention": {"mode": "fixed"})"), "sparse_attention");
  EXPECT_REJECTED(tb(R"("torch_autocast": {"enabled": true, "dtype": "bfloat16"})"), "torch_autocast.enabled");
  EXPECT_REJECTED(tb(R"("torch_autocast": {"enabled": false, "dtype": "fp8"})"), "torch_autocast.dtype");
  EXPECT_REJECTED(tb(R"("checkpoint": {"load_universal": true})"), "load_universal", "not supported");
}

TEST(OtherSections, FlopsProfilerTurnsOnWallClockBreakdown) {  // §13.2
  zt::DsConfig c = resolve(tb(R"("flops_profiler": {"enabled": true})"));
  EXPECT_TRUE(c.wall_clock_breakdown);
  EXPECT_EQ(c.resolved["wall_clock_breakdown"], true);
  EXPECT_EQ(c.provenance["wall_clock_breakdown"].source, zt::ConfigSource::kDerived);
}

TEST(OtherSections, ActivationCheckpointingDefaultsAndUnknownKeys) {
  zt::DsConfig c = resolve(tb(R"("activation_checkpointing": {"partitioned_activations": false})"));
  EXPECT_EQ(c.resolved["activation_checkpointing"]["partition_activations"], false);
  EXPECT_TRUE(c.resolved["activation_checkpointing"]["number_checkpoints"].is_null());
  EXPECT_TRUE(has_warning(c, "activation_checkpointing.partitioned_activations"));
  EXPECT_TRUE(has_warning(c, "did you mean `partition_activations`?"));
}

TEST(OtherSections, CpuCheckpointingTakesEffectOnlyWithRecompute) {
  // Without recompute there are no kept block inputs to move: accepted, with one warning naming it.
  zt::DsConfig off = resolve(tb(R"("activation_checkpointing": {"cpu_checkpointing": true})"));
  EXPECT_TRUE(off.activation_cpu_checkpointing);
  EXPECT_EQ(off.activation_recompute, "none");
  EXPECT_EQ(off.resolved["activation_checkpointing"]["cpu_checkpointing"], true);
  EXPECT_TRUE(has_warning(off, "activation_checkpointing.cpu_checkpointing: true has no effect without activation recompute"));
  for (const char* on : {R"("activation_checkpointing": {"cpu_checkpointing": true, "number_checkpoints": 1})",
                         R"("activation_checkpointing": {"cpu_checkpointing": true, "zerotrain_recompute": "selective"})"}) {
    zt::DsConfig c = resolve(tb(on));
    EXPECT_TRUE(c.activation_cpu_checkpointing) << on;
    EXPECT_FALSE(has_warning(c, "cpu_checkpointing")) << on;
  }
  // train / estimate --recompute decides too: the flag turns recompute on (no warning) or off (warning).
  zt::ConfigOptions flag = zt_test::world(1);
  flag.recompute_flag = "block";
  EXPECT_FALSE(has_warning(resolve(tb(R"("activation_checkpointing": {"cpu_checkpointing": true})"), flag), "cpu_checkpointing"));
  flag.recompute_flag = "none";
  EXPECT_TRUE(has_warning(resolve(tb(R"("activation_checkpointing": {"cpu_checkpointing": true, "number_checkpoints": 1})"),
                                  flag), "no effect without activation recompute"));
  EXPECT_FALSE(resolve(tb(R"("activation_checkpointing": {})")).activation_cpu_checkpointing);
  EXPECT_REJECTED(tb(R"("activation_checkpointing": {"cpu_checkpointing": "yes"})"), "cpu_checkpointing");
}

TEST(OtherSections, DataTypes) {
  EXPECT_EQ(resolve(tb(R"("data_types": {"grad_accum_dtype": "fp32"}, "bf16": {"enabled": true},
                         "zero_optimization": {"stage": 1})")).grad_accum_dtype, zt::DType::F32);
  EXPECT_EQ(resolve(tb(R"("data_types": {"grad_accum_dtype": "bfloat16"}, "bf16": {"enabled": true})"))
                .resolved["data_types"]["grad_accum_dtype"], "bf16");
  EXPECT_REJECTED(tb(R"("data_types": {"grad_accum_dtype": "fp8"})"), "data_types.grad_accum_dtype", "found \"fp8\"");
  // §13.1 #46: without ZeRO the accumulation dtype must be the model dtype.
  EXPECT_REJECTED(tb(R"("data_types": {"grad_accum_dtype": "fp32"}, "bf16": {"enabled": true})"),
                  "data_types.grad_accum_dtype");
  EXPECT_ACCEPTED(tb(R"("data_types": {"grad_accum_dtype": "fp16"}, "fp16": {"enabled": true})"));
}

TEST(OtherSections, CompressionWithoutQuantizeTrainingAccepted) {  // §13.1 #11
  EXPECT_ACCEPTED(tb(R"("compression_training": {"sparse_pruning": {"shared_parameters": {"enabled": false}}})"));
}

TEST(Scalars, WrongTypeForAnIntField) {  // §13.1 #15: "DS" for an int -> validation error naming the path
  EXPECT_REJECTED(tb(R"("zero_optimization": {"sub_group_size": "DS"})"), "zero_optimization.sub_group_size",
                  "found \"DS\"", "expected an integer");
  EXPECT_REJECTED(tb(R"("zero_optimization": {"leaf_module": {"classes": 5}})"), "leaf_module.classes",
                  "a string or a list of strings");
}

TEST(Scalars, ManagedGradientAccumulation) {  // §3
  EXPECT_FALSE(resolve(tb(R"("managed_gradient_accumulation": false)")).managed_gradient_accumulation);
  EXPECT_ACCEPTED(tb(R"("managed_gradient_accumulation": false, "zero_optimization": {"stage": 2, "overlap_comm": true})"));
  EXPECT_REJECTED(tb(R"("managed_gradient_accumulation": false, "zero_optimization": {"stage": 3})"),
                  "managed_gradient_accumulation", "only with ZeRO stage 2");
  EXPECT_REJECTED(tb(R"("managed_gradient_accumulation": "no")"), "managed_gradient_accumulation");
}

TEST(OtherSections, PydanticMonitorSectionsRejectUnknownKeys) {  // §11
  EXPECT_ACCEPTED(tb(R"("tensorboard": {"enabled": false, "output_path": "/tmp/tb", "job_name": "x"})"));
  EXPECT_REJECTED(tb(R"("tensorboard": {"enabled": false, "outputpath": "/tmp"})"), "tensorboard.outputpath",
                  "did you mean `output_path`?");
  EXPECT_REJECTED(tb(R"("comms_logger": {"enabled": false, "foo": 1})"), "comms_logger.foo");
  EXPECT_REJECTED(tb(R"("wandb": {"enabled": false, "projekt": "p"})"), "did you mean `project`?");
  EXPECT_REJECTED(tb(R"("hybrid_engine": {"enabled": false, "max_out_token": 5})"), "did you mean `max_out_tokens`?");
}
