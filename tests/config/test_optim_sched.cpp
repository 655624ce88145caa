// docs/config.md: optimizer (§4, §13.2, §17.4, §17.6) and scheduler (§5 construction checks,
// §13.1 #41 #44, §13.2).
#include <cmath>

#include "cfg_test.h"

using namespace zt_test;
using zt::Json;

namespace {
zt::DsConfig opt(const std::string& body, const std::string& extra = "") {
  return resolve(tb("\"optimizer\": " + body + (extra.empty() ? "" : ", " + extra)));
}
zt::DsConfig sched(const std::string& body) {
  return resolve(tb(R"("optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "scheduler": )" + body));
}
std::string sched_error(const std::string& body) {
  return error_of(tb(R"("optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "scheduler": )" + body));
}
#define EXPECT_OPT_REJECTED(body, ...) EXPECT_REJECTED(tb("\"optimizer\": " + std::string(body)), __VA_ARGS__)
#define EXPECT_SCHED_REJECTED(body, ...) \
  EXPECT_REJECTED(tb(R"("optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "scheduler": )" + std::string(body)), __VA_ARGS__)
}  // namespace

TEST(Optimizer, TypeNormalisation) {  // §4, §13.2
  EXPECT_EQ(opt(R"({"type": "ADAMW"})").optimizer->type, "adamw");
  EXPECT_EQ(opt(R"({"type": "AdamW"})").optimizer->type, "adamw");
  EXPECT_EQ(opt(R"({"type": "Adam"})").optimizer->type, "adam");
  EXPECT_EQ(opt(R"({"type": "SGD"})").optimizer->type, "SGD");
  EXPECT_EQ(opt(R"({"type": "SGD"})").resolved["optimizer"]["type"], "SGD");
}

TEST(Optimizer, UnsupportedAndUnknownTypes) {  // §4, docs/config.md rule 5
  for (const char* t : {"OneBitAdam", "ZeroOneAdam", "OneBitLamb"})  // compressed communication: the reason
    EXPECT_OPT_REJECTED(std::string(R"({"type": ")") + t + "\"}", "optimizer.type", "compressed-communication",
                        "refuses them with ZeRO");
  EXPECT_OPT_REJECTED(R"({"type": "MuAdam"})", "optimizer.type", "not supported by zerotrain");
  EXPECT_OPT_REJECTED(R"({"type": "RMSprop"})", "not supported by zerotrain");
  EXPECT_OPT_REJECTED(R"({"type": "FusedAdam"})", "optimizer.type", "DeepSpeed does not know");
  EXPECT_OPT_REJECTED(R"({"type": "sgd"})", "optimizer.type", "did you mean `SGD`?");  // case-sensitive torch name
  EXPECT_OPT_REJECTED(R"({"type": "Adamw2"})", "did you mean `AdamW`?");
  EXPECT_OPT_REJECTED(R"({"type": 5})", "optimizer.type", "found 5");  // §17.6
}

// DeepSpeed's Lion, Adagrad and LAMB: type names lower-cased, every default filled (DeepSpeed's
// parameter names), their checks.
TEST(Optimizer, LionAdagradLambDefaultsAndChecks) {
  zt::DsConfig lion = opt(R"({"type": "Lion"})");
  EXPECT_EQ(lion.optimizer->type, "lion");
  EXPECT_EQ(lion.optimizer->kind, zt::OptimizerKind::Lion);
  EXPECT_EQ(lion.resolved["optimizer"]["params"]["betas"], Json::array({0.9, 0.999}));
  EXPECT_EQ(lion.resolved["optimizer"]["params"]["lr"], 1e-3);
  EXPECT_EQ(lion.resolved["optimizer"]["params"]["weight_decay"], 0.0);
  zt::DsConfig ada = opt(R"({"type": "ADAGRAD"})");
  EXPECT_EQ(ada.optimizer->type, "adagrad");
  EXPECT_EQ(ada.resolved["optimizer"]["params"]["lr"], 1e-2);
  EXPECT_EQ(ada.resolved["optimizer"]["params"]["eps"], 1e-10);
  EXPECT_EQ(ada.resolved["optimizer"]["params"]["initial_accumulator_value"], 0.0);
  EXPECT_EQ(ada.resolved["optimizer"]["params"]["lr_decay"], 0.0);
  zt::DsConfig lamb = opt(R"({"type": "Lamb", "params": {"max_coeff": 5, "eps_inside_sqrt": true}})");
  EXPECT_EQ(lamb.optimizer->type, "lamb");
  const Json& lp = lamb.resolved["optimizer"]["params"];
  EXPECT_EQ(lp["max_coeff"], 5);
  EXPECT_EQ(lp["min_coeff"], 0.01);
  EXPECT_EQ(lp["eps"], 1e-8);
  EXPECT_EQ(lp["bias_correction"], true);
  EXPECT_EQ(lp["eps_inside_sqrt"], true);
  EXPECT_OPT_REJECTED(R"({"type": "LAMB", "params": {"amsgrad": true}})", "optimizer.params.amsgrad", "FusedLamb");
  EXPECT_OPT_REJECTED(R"({"type": "LAMB", "params": {"min_coeff": 2, "max_coeff": 1}})", "min_coeff");
  EXPECT_REJECTED(tb(R"("optimizer": {"type": "LAMB"}, "fp16": {"enabled": true, "loss_scale": 128})"),
                  "optimizer.type", "dynamic loss scaling");
  EXPECT_OPT_REJECTED(R"({"type": "Lion", "params": {"eps": 1e-8}})", "optimizer.params.eps", "unknown");
  EXPECT_OPT_REJECTED(R"({"type": "Adagrad", "params": {"betas": [0.9, 0.99]}})", "optimizer.params.betas");
  EXPECT_OPT_REJECTED(R"({"type": "Adagrad", "params": {"lr_decay": -1}})", "optimizer.params.lr_decay");
}

TEST(Optimizer, SectionShapes) {  // §13.2, §17.6
  EXPECT_OPT_REJECTED("null", "optimizer", "found null");
  EXPECT_OPT_REJECTED(R"({"type": "Adam", "params": [1, 2]})", "optimizer.params", "found [1,2]");
  zt::DsConfig no_type = opt(R"({"params": {"lr": 0.1}})");
  EXPECT_FALSE(no_type.optimizer.has_value());
  EXPECT_FALSE(no_type.resolved.contains("optimizer"));  // absent: DeepSpeed rejects "optimizer": null
  EXPECT_TRUE(has_warning(no_type, "optimizer.params"));
  zt::DsConfig extra = opt(R"({"type": "Adam", "legacy_fusion": false, "extra": 1})");
  EXPECT_TRUE(has_warning(extra, "optimizer.extra"));  // ignored by DeepSpeed: a warning here
}

TEST(Optimizer, AdamDefaultsFilled) {  // §4 FusedAdam defaults
  zt::DsConfig c = opt(R"({"type": "Adam"})");
  const zt::OptimizerConfig& o = *c.optimizer;
  EXPECT_DOUBLE_EQ(o.lr, 1e-3);
  EXPECT_DOUBLE_EQ(o.beta1, 0.9);
  EXPECT_DOUBLE_EQ(o.beta2, 0.999);
  EXPECT_DOUBLE_EQ(o.eps, 1e-8);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.0);
  EXPECT_TRUE(o.bias_correction);
  EXPECT_TRUE(o.adam_w_mode);
  const Json& p = c.resolved["optimizer"]["params"];
  EXPECT_EQ(p["betas"], Json::array({0.9, 0.999}));
  EXPECT_EQ(p["eps"], 1e-8);
  EXPECT_EQ(p["bias_correction"], true);
  EXPECT_EQ(c.resolved["optimizer"]["legacy_fusion"], false);
}

TEST(Optimizer, AdamWModeRule) {  // §4: decoupled = type adamw || adam_w_mode
  const zt::DsConfig adam = opt(R"({"type": "Adam"})");
  EXPECT_EQ(adam.optimizer->kind, zt::OptimizerKind::Adam);
  EXPECT_TRUE(adam.optimizer->adam_w_mode);
  const zt::DsConfig coupled = opt(R"({"type": "Adam", "params": {"adam_w_mode": false}})");
  EXPECT_EQ(coupled.optimizer->kind, zt::OptimizerKind::Adam);
  EXPECT_FALSE(coupled.optimizer->adam_w_mode);
  const zt::DsConfig adamw = opt(R"({"type": "AdamW", "params": {"adam_w_mode": false}})");
  EXPECT_EQ(adamw.optimizer->kind, zt::OptimizerKind::Adam);
  EXPECT_TRUE(adamw.optimizer->adam_w_mode);
}

TEST(Optimizer, ParamsValidated) {  // unknown kwargs fail construction in DeepSpeed: rejected here
  EXPECT_OPT_REJECTED(R"({"type": "AdamW", "params": {"weight_deacy": 0.1}})", "optimizer.params.weight_deacy",
                      "did you mean `weight_decay`?");
  EXPECT_OPT_REJECTED(R"({"type": "AdamW", "params": {"betas": [0.9]}})", "optimizer.params.betas");
  EXPECT_OPT_REJECTED(R"({"type": "AdamW", "params": {"betas": [0.9, 1.0]}})", "optimizer.params.betas");
  EXPECT_OPT_REJECTED(R"({"type": "AdamW", "params": {"lr": -1}})", "optimizer.params.lr");
  EXPECT_OPT_REJECTED(R"({"type": "AdamW", "params": {"lr": "1e-3"}})", "optimizer.params.lr");
  EXPECT_OPT_REJECTED(R"({"type": "AdamW", "params": {"amsgrad": true}})", "optimizer.params.amsgrad");
  zt::DsConfig c = opt(R"({"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}})");
  EXPECT_DOUBLE_EQ(c.optimizer->lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.optimizer->beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.optimizer->eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer->weight_decay, 0.1);
}

TEST(Optimizer, Sgd) {
  zt::DsConfig c = opt(R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}})");
  EXPECT_EQ(c.optimizer->kind, zt::OptimizerKind::SGD);
  EXPECT_DOUBLE_EQ(c.optimizer->momentum, 0.9);
  EXPECT_TRUE(c.optimizer->nesterov);
  EXPECT_EQ(c.resolved["optimizer"]["params"]["dampening"], 0.0);
  EXPECT_OPT_REJECTED(R"({"type": "SGD", "params": {"nesterov": true}})", "Nesterov momentum requires");
  EXPECT_OPT_REJECTED(R"({"type": "SGD", "params": {"betas": [0.9, 0.99]}})", "optimizer.params.betas", "unknown key");
}

TEST(Optimizer, MaxGradNormRule) {  // §4, §13.2, §17.4, §17.6
  zt::DsConfig fp32 = opt(R"({"type": "Adam", "params": {"lr": 1e-3, "max_grad_norm": 1.0}})");
  EXPECT_EQ(fp32.resolved["optimizer"]["params"]["max_grad_norm"], 0.0);
  EXPECT_EQ(fp32.resolved["optimizer"]["params"]["lr"], 0.001);
  EXPECT_TRUE(has_warning(fp32, "gradient_clipping"));
  zt::DsConfig bf16 = opt(R"({"type": "Adam", "params": {"max_grad_norm": 1.0}})", R"("bf16": {"enabled": true})");
  EXPECT_EQ(bf16.resolved["optimizer"]["params"]["max_grad_norm"], 0.0);
  EXPECT_REJECTED(tb(R"("optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}, "fp16": {"enabled": true})"),
                  "optimizer.params.max_grad_norm", "gradient_clipping");
  EXPECT_OPT_REJECTED(R"({"type": "Adam", "params": {"max_grad_norm": "1.0"}})", "optimizer.params.max_grad_norm");
}

TEST(Scheduler, TypeMustBeADeepSpeedSchedule) {  // §5, docs/config.md rule 6
  EXPECT_SCHED_REJECTED(R"({"type": "Foo", "params": {}})", "scheduler.type", "does not recognize");
  EXPECT_SCHED_REJECTED(R"({"type": "warmuplr", "params": {}})", "did you mean `WarmupLR`?");
  EXPECT_SCHED_REJECTED(R"({"type": "StepLR", "params": {}})", "not supported by zerotrain");
  EXPECT_SCHED_REJECTED(R"({"type": 5})", "scheduler.type", "found 5");
  EXPECT_SCHED_REJECTED("null", "scheduler");
  EXPECT_SCHED_REJECTED(R"({"type": "WarmupLR", "params": [1]})", "scheduler.params");
}

TEST(Scheduler, WarmupLRDefaults) {  // §5.1, §13.2 (no params)
  zt::DsConfig c = sched(R"({"type": "WarmupLR"})");
  ASSERT_TRUE(c.scheduler.has_value());
  EXPECT_EQ(c.scheduler->type, "WarmupLR");
  EXPECT_EQ(c.scheduler->warmup_min_lr, std::vector<double>{0.0});
  EXPECT_EQ(c.scheduler->warmup_max_lr, std::vector<double>{0.01});  // the optimizer's lr
  EXPECT_EQ(c.scheduler->warmup_num_steps, 1000);
  EXPECT_EQ(c.scheduler->warmup_type, "log");
  EXPECT_EQ(c.resolved["scheduler"]["params"]["warmup_max_lr"], 0.01);
  EXPECT_TRUE(has_warning(c, "scheduler.params"));
}

TEST(Scheduler, WarmupNumStepsMustBeAPositiveInt) {  // §5.1, §13.1 #41, §17.1
  for (const char* type : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
    std::string t = type;
    std::string total = t == "WarmupLR" ? "" : "\"total_num_steps\": 2000, ";  // WarmupLR has no total
    for (const char* bad : {"null", "-5", "0", "1000.5", "\"10\"", "true"}) {
      EXPECT_SCHED_REJECTED("{\"type\": \"" + t + "\", \"params\": {" + total + "\"warmup_num_steps\": " + bad + "}}",
                            "scheduler.params.warmup_num_steps");
    }
    // 1e3 in a file is the integer 1000 (§17.1).
    EXPECT_EQ(sched("{\"type\": \"" + t + "\", \"params\": {" + total + "\"warmup_num_steps\": 1e3}}")
                  .scheduler->warmup_num_steps, 1000);
  }
}

TEST(Scheduler, WarmupDecayAndCosine) {  // §5.2, §5.3
  zt::DsConfig d = sched(R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 20, "warmup_num_steps": 10}})");
  EXPECT_EQ(d.scheduler->total_num_steps, 20);
  EXPECT_EQ(d.scheduler->warmup_max_lr, std::vector<double>{0.001});  // not inherited from the optimizer
  EXPECT_SCHED_REJECTED(R"({"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10}})",
                        "scheduler.params.total_num_steps", "missing");
  EXPECT_TRUE(has_warning(sched(R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 5, "warmup_num_steps": 10}})"),
                          "total_num_steps"));
  zt::DsConfig c = sched(R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 20, "warmup_num_steps": 5}})");
  EXPECT_DOUBLE_EQ(c.scheduler->cos_min_ratio, 0.0001);
  EXPECT_DOUBLE_EQ(c.scheduler->warmup_min_ratio, 0.0);
  EXPECT_SCHED_REJECTED(R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 20, "warmup_max_lr": 0.1}})",
                        "scheduler.params.warmup_max_lr", "unknown key");
  EXPECT_SCHED_REJECTED(R"({"type": "WarmupCosineLR", "params": {"warmup_num_steps": 5}})", "total_num_steps");
}

TEST(Scheduler, WarmupTypeUnknownFallsBackToLog) {  // §5.1, §13.1 #42
  zt::DsConfig c = sched(R"({"type": "WarmupLR", "params": {"warmup_type": "cosine"}})");
  EXPECT_EQ(c.scheduler->warmup_type, "log");
  EXPECT_TRUE(has_warning(c, "warmup_type"));
  EXPECT_EQ(sched(R"({"type": "WarmupLR", "params": {"warmup_type": "linear"}})").scheduler->warmup_type, "linear");
}

TEST(Scheduler, PerGroupLists) {  // §5, §13.1 #45 (length checked when the model's groups are known)
  zt::DsConfig c = sched(R"({"type": "WarmupLR", "params": {"warmup_min_lr": [0.1, 0.2], "warmup_max_lr": [1, 2]}})");
  EXPECT_EQ(c.scheduler->warmup_min_lr, (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(c.scheduler->warmup_max_lr, (std::vector<double>{1.0, 2.0}));
  EXPECT_SCHED_REJECTED(R"({"type": "WarmupLR", "params": {"warmup_min_lr": ["a"]}})", "warmup_min_lr");
}

TEST(Scheduler, LRRangeTest) {  // §5.4, §13.1 #44
  zt::DsConfig c = sched(R"({"type": "LRRangeTest", "params": {}})");
  EXPECT_EQ(c.scheduler->lr_range_test_min_lr, std::vector<double>{1e-3});
  EXPECT_EQ(c.scheduler->lr_range_test_step_size, 2000);
  EXPECT_DOUBLE_EQ(c.scheduler->lr_range_test_step_rate, 1.0);
  EXPECT_FALSE(c.scheduler->lr_range_test_staircase);
  EXPECT_SCHED_REJECTED(R"({"type": "LRRangeTest", "params": {"lr_range_test_step_size": 0}})", "lr_range_test_step_size");
  EXPECT_SCHED_REJECTED(R"({"type": "LRRangeTest", "params": {"lr_range_test_step_size": -5}})", "lr_range_test_step_size");
}

TEST(Scheduler, OneCycle) {  // §5.5, §13.1 #44
  const std::string req = R"("cycle_min_lr": 0.001, "cycle_max_lr": 0.01)";
  zt::DsConfig c = sched("{\"type\": \"OneCycle\", \"params\": {" + req + "}}");
  const zt::SchedulerConfig& s = *c.scheduler;
  EXPECT_DOUBLE_EQ(s.cycle_first_step_size, 2000);
  EXPECT_DOUBLE_EQ(s.cycle_second_step_size, 2000);  // null -> first
  EXPECT_EQ(s.cycle_first_stair_count, 0);
  EXPECT_EQ(s.cycle_second_stair_count, 0);
  EXPECT_TRUE(s.cycle_momentum);
  EXPECT_EQ(s.cycle_min_mom, std::vector<double>{0.8});
  EXPECT_EQ(s.cycle_max_mom, std::vector<double>{0.9});
  EXPECT_DOUBLE_EQ(s.decay_lr_rate, 0.0);
  EXPECT_SCHED_REJECTED(R"({"type": "OneCycle", "params": {"cycle_max_lr": 0.01}})", "cycle_min_lr", "missing");
  EXPECT_SCHED_REJECTED(R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.01}})", "cycle_max_lr", "missing");
  const char* bad[][2] = {{"0", "0"}, {"0", "null"}, {"-1", "null"}, {"0", "100"}, {"100", "-1"}};
  for (auto& b : bad) {
    EXPECT_NE(sched_error("{\"type\": \"OneCycle\", \"params\": {" + req + ", \"cycle_first_step_size\": " + b[0] +
                          ", \"cycle_second_step_size\": " + b[1] + "}}"), "")
        << b[0] << "," << b[1];
  }
  zt::DsConfig ok = sched("{\"type\": \"OneCycle\", \"params\": {" + req +
                          ", \"cycle_first_step_size\": 100, \"cycle_second_step_size\": 0, \"cycle_first_stair_count\": 2}}");
  EXPECT_DOUBLE_EQ(ok.scheduler->cycle_second_step_size, 0.0);
  EXPECT_EQ(ok.scheduler->cycle_second_stair_count, 2);  // null -> first
}

TEST(Scheduler, NoTypeMeansNoScheduler) {
  zt::DsConfig c = sched(R"({"params": {"warmup_num_steps": 5}})");
  EXPECT_FALSE(c.scheduler.has_value());
  EXPECT_FALSE(c.resolved.contains("scheduler"));
}
