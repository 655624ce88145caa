// Defaults that exist both in a lower layer's type and in the config layer agree: a config that
// sets nothing yields default-constructed engine options, optimizer hyper-parameters and schedule
// parameters, field by field.
#include <gtest/gtest.h>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/config/ds_config.h"
#include "zerotrain/config/optim_inputs.h"

namespace {

zt::DsConfig empty_config() {
  zt::ConfigOptions opt;
  return zt::parse_ds_config(R"({"train_batch_size": 1})", "defaults.json", opt);
}

}  // namespace

TEST(DefaultsAgree, EmptyConfigGivesDefaultEngineOptions) {
  const zt::EngineOptions got = zt::engine_options_from(empty_config());
  const zt::EngineOptions want;
  EXPECT_EQ(got.stage, want.stage);
  EXPECT_EQ(got.overlap_comm, want.overlap_comm);
  EXPECT_EQ(got.contiguous_gradients, want.contiguous_gradients);
  EXPECT_EQ(got.reduce_bucket_size, want.reduce_bucket_size);
  EXPECT_EQ(got.allgather_bucket_size, want.allgather_bucket_size);
  EXPECT_EQ(got.sub_group_size, want.sub_group_size);
  EXPECT_EQ(got.prefetch_bucket_size, want.prefetch_bucket_size);
  EXPECT_EQ(got.max_live_parameters, want.max_live_parameters);
  EXPECT_EQ(got.max_reuse_distance, want.max_reuse_distance);
  EXPECT_EQ(got.param_persistence_threshold, want.param_persistence_threshold);
  EXPECT_EQ(got.gradient_accumulation_steps, want.gradient_accumulation_steps);
  EXPECT_EQ(got.gradient_clipping, want.gradient_clipping);
  EXPECT_EQ(got.prescale_gradients, want.prescale_gradients);
  EXPECT_EQ(got.gradient_predivide_factor, want.gradient_predivide_factor);
  EXPECT_EQ(got.compute_dtype, want.compute_dtype);
  EXPECT_EQ(got.master_dtype, want.master_dtype);
  EXPECT_EQ(got.moments_dtype, want.moments_dtype);
  EXPECT_EQ(got.grad_accum_dtype, want.grad_accum_dtype);
  EXPECT_EQ(got.wire_dtype, want.wire_dtype);
  EXPECT_EQ(got.offload.optimizer, want.offload.optimizer);
  EXPECT_EQ(got.offload.params, want.offload.params);
}

TEST(DefaultsAgree, EmptyAdamParamsGiveDefaultHparams) {
  const zt::OptimizerHparams got = zt::parse_optimizer("Adam", zt::Json::object());
  const zt::OptimizerHparams want;
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.lr, want.lr);
  EXPECT_EQ(got.beta1, want.beta1);
  EXPECT_EQ(got.beta2, want.beta2);
  EXPECT_EQ(got.eps, want.eps);
  EXPECT_EQ(got.weight_decay, want.weight_decay);
  EXPECT_EQ(got.bias_correction, want.bias_correction);
  EXPECT_EQ(got.adam_w_mode, want.adam_w_mode);
  const zt::OptimizerHparams sgd = zt::parse_optimizer("SGD", zt::Json::object());
  EXPECT_EQ(sgd.momentum, want.momentum);
  EXPECT_EQ(sgd.dampening, want.dampening);
  EXPECT_EQ(sgd.nesterov, want.nesterov);
  const zt::OptimizerHparams lamb = zt::parse_optimizer("LAMB", zt::Json::object());
  EXPECT_EQ(lamb.max_coeff, want.max_coeff);
  EXPECT_EQ(lamb.min_coeff, want.min_coeff);
  EXPECT_EQ(lamb.eps_inside_sqrt, want.eps_inside_sqrt);
  const zt::OptimizerHparams ada = zt::parse_optimizer("Adagrad", zt::Json::object());
  EXPECT_EQ(ada.lr_decay, want.lr_decay);
  EXPECT_EQ(ada.initial_accumulator_value, want.initial_accumulator_value);
}

TEST(DefaultsAgree, EmptyScheduleParamsGiveDefaultSpec) {
  const zt::LrScheduleSpec want;
  const zt::LrScheduleSpec warm = zt::parse_lr_schedule("WarmupLR", zt::Json::object());
  EXPECT_EQ(warm.warmup_num_steps, want.warmup_num_steps);
  EXPECT_EQ(warm.warmup_log, want.warmup_log);
  EXPECT_EQ(warm.warmup_min_lr, want.warmup_min_lr);
  EXPECT_EQ(warm.warmup_max_lr, want.warmup_max_lr);
  const zt::LrScheduleSpec cos = zt::parse_lr_schedule("WarmupCosineLR", zt::Json{{"total_num_steps", 10}});
  EXPECT_EQ(cos.warmup_min_ratio, want.warmup_min_ratio);
  EXPECT_EQ(cos.cos_min_ratio, want.cos_min_ratio);
  const zt::LrScheduleSpec range = zt::parse_lr_schedule("LRRangeTest", zt::Json::object());
  EXPECT_EQ(range.range_min_lr, want.range_min_lr);
  EXPECT_EQ(range.range_step_size, want.range_step_size);
  EXPECT_EQ(range.range_step_rate, want.range_step_rate);
  EXPECT_EQ(range.range_staircase, want.range_staircase);
  const zt::LrScheduleSpec one =
      zt::parse_lr_schedule("OneCycle", zt::Json{{"cycle_min_lr", 0.0}, {"cycle_max_lr", 0.0}});
  EXPECT_EQ(one.decay_lr_rate, want.decay_lr_rate);
  EXPECT_EQ(one.cycle_first_step_size, want.cycle_first_step_size);
  EXPECT_EQ(one.cycle_second_step_size, want.cycle_second_step_size);
  EXPECT_EQ(one.cycle_first_stair_count, want.cycle_first_stair_count);
  EXPECT_EQ(one.cycle_second_stair_count, want.cycle_second_stair_count);
  EXPECT_EQ(one.decay_step_size, want.decay_step_size);
  EXPECT_EQ(one.cycle_momentum, want.cycle_momentum);
  EXPECT_EQ(one.cycle_min_mom, want.cycle_min_mom);
  EXPECT_EQ(one.cycle_max_mom, want.cycle_max_mom);
  EXPECT_EQ(one.decay_mom_rate, want.decay_mom_rate);
}
