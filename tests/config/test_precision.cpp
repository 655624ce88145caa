// docs/config.md: fp16 (§6, §13.1 #22-23, §13.2, §17.5), bf16 / bfloat16 (§7, §13.1 #10, §13.2).
#include "cfg_test.h"

using namespace zt_test;
using zt::Json;

namespace {
zt::DsConfig fp16(const std::string& body) { return resolve(tb("\"fp16\": " + body)); }
#define EXPECT_FP16_REJECTED(body, ...) EXPECT_REJECTED(tb("\"fp16\": " + std::string(body)), __VA_ARGS__)
#define EXPECT_FP16_ACCEPTED(body) EXPECT_ACCEPTED(tb("\"fp16\": " + std::string(body)))
}  // namespace

TEST(Fp16, Defaults) {
  zt::DsConfig c = fp16(R"({"enabled": true})");
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_FALSE(c.fp16.auto_cast);
  EXPECT_DOUBLE_EQ(c.fp16.loss_scale, 0.0);
  EXPECT_TRUE(c.fp16.dynamic());
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_FALSE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.fp16.min_loss_scale, 1);
  EXPECT_FALSE(c.fp16.fp16_master_weights_and_grads);
  EXPECT_EQ(c.resolved["fp16"]["loss_scale"], 0.0);
  EXPECT_TRUE(c.resolved["fp16"]["loss_scale"].is_number_float());
}

TEST(Fp16, EnabledIsALaxBool) {  // §13.2
  EXPECT_TRUE(fp16(R"({"enabled": "true"})").fp16.enabled);
  EXPECT_TRUE(fp16(R"({"enabled": 1})").fp16.enabled);
  EXPECT_FALSE(fp16(R"({"enabled": "auto"})").fp16.enabled);  // §10: "auto" dropped -> default
  EXPECT_FP16_REJECTED(R"({"enabled": 2})", "fp16.enabled", "boolean");
}

TEST(Fp16, NullSectionRejected) {  // §13.2: TypeError in DeepSpeed
  EXPECT_FP16_REJECTED("null", "fp16", "found null", "expected an object");
}

TEST(Fp16, UnknownKeyRejected) {  // §13.2
  EXPECT_FP16_REJECTED(R"({"enabled": true, "foo": 1})", "fp16.foo", "unknown key");
  EXPECT_FP16_REJECTED(R"({"enabled": true, "loss_scale_windows": 10})", "did you mean `loss_scale_window`?");
}

TEST(Fp16, LossScaleValues) {  // §13.1 #23, §13.2
  EXPECT_DOUBLE_EQ(fp16(R"({"loss_scale": 0})").fp16.loss_scale, 0.0);
  EXPECT_DOUBLE_EQ(fp16(R"({"loss_scale": 1})").fp16.loss_scale, 1.0);
  EXPECT_DOUBLE_EQ(fp16(R"({"loss_scale": 2.0})").fp16.loss_scale, 2.0);
  EXPECT_DOUBLE_EQ(fp16(R"({"loss_scale": "3"})").fp16.loss_scale, 3.0);
  EXPECT_DOUBLE_EQ(fp16(R"({"loss_scale": "128"})").fp16.loss_scale, 128.0);
  zt::DsConfig half = fp16(R"({"enabled": true, "loss_scale": 0.5})");
  EXPECT_DOUBLE_EQ(half.fp16.loss_scale, 0.5);
  EXPECT_FALSE(half.fp16.dynamic());
  EXPECT_FP16_REJECTED(R"({"loss_scale": -1})", "fp16.loss_scale", ">= 0");
  EXPECT_FP16_REJECTED(R"({"loss_scale": "inf"})", "fp16.loss_scale", "finite");
  EXPECT_FP16_REJECTED(R"({"loss_scale": "nan"})", "fp16.loss_scale");
  EXPECT_FP16_REJECTED(R"({"loss_scale": true})", "fp16.loss_scale", "not a boolean");
  EXPECT_FP16_REJECTED(R"({"loss_scale": []})", "fp16.loss_scale must be a number");
  EXPECT_FP16_REJECTED(R"({"loss_scale": {}})", "fp16.loss_scale must be a number");
  EXPECT_FP16_REJECTED(R"({"loss_scale": null})", "fp16.loss_scale");
  EXPECT_FP16_REJECTED(R"({"loss_scale": "abc"})", "fp16.loss_scale");
}

TEST(Fp16, WindowAndMinScaleUnderDynamicScaling) {  // §13.1 #22
  for (const char* key : {"loss_scale_window", "min_loss_scale"}) {
    std::string k = key;
    const std::string path = "fp16." + k;
    for (const char* bad : {"0", "-1"}) {
      std::string b = bad;
      EXPECT_FP16_REJECTED("{\"enabled\": true, \"loss_scale\": 0, \"" + k + "\": " + b + "}", path.c_str(),
                           "> 0 when dynamic loss scaling is enabled");
      // static scale or disabled: accepted unchanged
      zt::DsConfig st = fp16("{\"enabled\": true, \"loss_scale\": 128, \"" + k + "\": " + b + "}");
      EXPECT_EQ(st.resolved["fp16"][k], std::stoi(b));
      zt::DsConfig off = fp16("{\"enabled\": false, \"" + k + "\": " + b + "}");
      EXPECT_EQ(off.resolved["fp16"][k], std::stoi(b));
    }
    for (const char* good : {"1", "1000"}) {
      zt::DsConfig c = fp16("{\"enabled\": true, \"loss_scale\": 0, \"" + k + "\": " + std::string(good) + "}");
      EXPECT_EQ(c.resolved["fp16"][k], std::stoi(good));
    }
    for (const char* bad : {"true", "false", "\"inf\"", "\"nan\"", "\"abc\"", "null", "0.5"}) {
      EXPECT_FP16_REJECTED("{\"enabled\": true, \"" + k + "\": " + std::string(bad) + "}", path.c_str());
    }
  }
}

TEST(Fp16, IntFieldsRules) {  // §13.2, §17.5
  EXPECT_FP16_REJECTED(R"({"initial_scale_power": 16.5})", "fp16.initial_scale_power", "fractional");
  EXPECT_EQ(fp16(R"({"initial_scale_power": -1})").fp16.initial_scale_power, -1);
  EXPECT_EQ(fp16(R"({"initial_scale_power": "8"})").fp16.initial_scale_power, 8);
  EXPECT_EQ(fp16(R"({"hysteresis": 0})").fp16.hysteresis, 0);
  EXPECT_EQ(fp16(R"({"hysteresis": -1})").fp16.hysteresis, -1);
  EXPECT_EQ(fp16(R"({"hysteresis": true})").fp16.hysteresis, 1);  // bool accepted as 1 (§17.5)
  EXPECT_EQ(fp16(R"({"min_loss_scale": 2.0})").fp16.min_loss_scale, 2);
  EXPECT_FP16_REJECTED(R"({"min_loss_scale": 0.5})", "fp16.min_loss_scale", "fractional");
}

TEST(Fp16, MasterWeightsNeedZero) {  // §6, §13.2
  EXPECT_REJECTED(tb(R"("fp16": {"enabled": true, "fp16_master_weights_and_grads": true})"),
                  "fp16.fp16_master_weights_and_grads", "ZeRO Stage 1, 2, or 3");
  EXPECT_ACCEPTED(tb(R"("fp16": {"enabled": true, "fp16_master_weights_and_grads": true},
                        "zero_optimization": {"stage": 2})"));
}

TEST(Bf16, DefaultsAndKeys) {  // §7
  zt::DsConfig c = resolve(tb(R"("bf16": {"enabled": true})"));
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_FALSE(c.bf16.immediate_grad_update);
  EXPECT_TRUE(c.bf16.check_grad_overflow);
  EXPECT_FALSE(c.bf16.bf16_master_weights_and_grads);
  EXPECT_FALSE(c.bf16.bf16_optimizer_states);
  EXPECT_EQ(c.resolved["bf16"]["check_grad_overflow"], true);
  EXPECT_FALSE(c.resolved.contains("bfloat16"));
}

TEST(Bf16, LegacyBfloat16Key) {  // §13.1 #10, §7 lookup rules
  EXPECT_TRUE(resolve(tb(R"("bfloat16": {"enabled": true})")).bf16.enabled);
  EXPECT_TRUE(resolve(tb(R"("bf16": null, "bfloat16": {"enabled": true})")).bf16.enabled);
  zt::DsConfig c = resolve(tb(R"("bf16": {"enabled": false}, "bfloat16": {"enabled": true})"));
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_EQ(resolve(tb(R"("bfloat16": {"enabled": true})")).resolved["bf16"]["enabled"], true);
}

TEST(Bf16, UnknownKeysRejected) {  // §7, §13.2
  EXPECT_REJECTED(tb(R"("bf16": {"enabled": true, "foo": 1})"), "bf16.foo");
  EXPECT_REJECTED(tb(R"("bf16": {"check_overflow": true})"), "bf16.check_overflow",
                  "did you mean `check_grad_overflow`?");
  EXPECT_REJECTED(tb(R"("bf16": {"enabled": true, "loss_scale": 0})"), "bf16.loss_scale", "belongs in `fp16`",
                  "bf16 needs no loss scaling");
}

TEST(Bf16, MasterWeightRules) {  // §7, §13.2
  EXPECT_REJECTED(tb(R"("bf16": {"enabled": false, "bf16_master_weights_and_grads": true})"),
                  "bf16.bf16_master_weights_and_grads", "ZeRO Stage 1, 2, or 3");
  EXPECT_REJECTED(tb(R"("bf16": {"enabled": true, "bf16_optimizer_states": true}, "zero_optimization": {"stage": 2})"),
                  "bf16.bf16_optimizer_states", "requires bf16_master_weights_and_grads");
  EXPECT_ACCEPTED(tb(R"("bf16": {"enabled": true, "bf16_optimizer_states": true, "bf16_master_weights_and_grads": true},
                        "zero_optimization": {"stage": 2})"));
}

TEST(Precision, Fp16AndBf16Exclusive) {  // §7, §12
  EXPECT_REJECTED(tb(R"("fp16": {"enabled": true}, "bf16": {"enabled": true})"),
                  "bfloat16 and fp16 modes cannot be simultaneously enabled");
  EXPECT_REJECTED(tb(R"("fp16": {"enabled": true}, "bfloat16": {"enabled": true})"), "cannot be simultaneously");
  EXPECT_ACCEPTED(tb(R"("fp16": {"enabled": true}, "bf16": {"enabled": false})"));
}

TEST(Precision, ResolvedDefaultsExactly) {  // §6 and §7 tables
  zt::DsConfig c = resolve(tb(""));
  EXPECT_EQ(c.resolved["fp16"], Json::parse(R"({"enabled": false, "auto_cast": false, "loss_scale": 0.0,
      "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "consecutive_hysteresis": false,
      "min_loss_scale": 1, "fp16_master_weights_and_grads": false})"));
  EXPECT_EQ(c.resolved["bf16"], Json::parse(R"({"enabled": false, "immediate_grad_update": false,
      "check_grad_overflow": true, "bf16_master_weights_and_grads": false, "bf16_optimizer_states": false})"));
}

TEST(Precision, DtypeMatrixWithoutZero) {  // §13.1 #46: config-time part (ZeRO: every mix; no ZeRO: model dtype only)
  const char* model[] = {R"("fp16": {"enabled": true})", R"("bf16": {"enabled": true})", R"("fp16": {"enabled": false})"};
  const char* model_name[] = {"fp16", "bf16", "fp32"};
  for (int m = 0; m < 3; ++m) {
    for (const char* acc : {"fp16", "bf16", "fp32"}) {
      std::string data = std::string(R"("data_types": {"grad_accum_dtype": ")") + acc + "\"}";
      for (int stage : {0, 1, 2, 3}) {
        std::string text = tb(std::string(model[m]) + ", " + data + ", \"zero_optimization\": {\"stage\": " +
                              std::to_string(stage) + "}");
        bool ok = stage > 0 || std::string(acc) == model_name[m];
        EXPECT_EQ(error_of(text).empty(), ok) << text << " -> " << error_of(text);
      }
    }
    EXPECT_ACCEPTED(tb(std::string(model[m]) + R"(, "data_types": {"grad_accum_dtype": null})"));
  }
}
