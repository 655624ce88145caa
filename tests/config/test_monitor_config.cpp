// DeepSpeed's monitor sections (deepspeed/monitor/config.py): defaults, strict keys, types;
// tensorboard and csv_monitor implemented, wandb and comet "not used" with one warning.
#include "cfg_test.h"

using namespace zt_test;
using zt::Json;

namespace {
bool warns_unused(const zt::DsConfig& c, const std::string& key) {
  for (const std::string& w : c.warnings)
    if (w.find("set but not used by zerotrain") != std::string::npos && w.find(key) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST(Monitors, DefaultsAsDeepSpeed) {
  zt::DsConfig c = resolve(tb(R"("tensorboard": {"enabled": true}, "csv_monitor": {})"));
  EXPECT_TRUE(c.tensorboard.enabled);
  EXPECT_EQ(c.tensorboard.output_path, "");
  EXPECT_EQ(c.tensorboard.job_name, "DeepSpeedJobName");
  EXPECT_FALSE(c.csv_monitor.enabled);
  EXPECT_EQ(c.resolved["tensorboard"], Json::parse(R"({"enabled": true, "output_path": "", "job_name": "DeepSpeedJobName"})"));
  EXPECT_EQ(c.resolved["csv_monitor"], Json::parse(R"({"enabled": false, "output_path": "", "job_name": "DeepSpeedJobName"})"));
  EXPECT_EQ(c.provenance["tensorboard.job_name"].source, zt::ConfigSource::kDefault);
  EXPECT_TRUE(c.warnings.empty());
  // Absent sections stay absent (and off).
  zt::DsConfig d = resolve(tb(R"("steps_per_print": 1)"));
  EXPECT_FALSE(d.tensorboard.enabled || d.csv_monitor.enabled);
  EXPECT_FALSE(d.resolved.contains("tensorboard"));
}

TEST(Monitors, ValuesAndTypes) {
  zt::DsConfig c = resolve(tb(R"("csv_monitor": {"enabled": "true", "output_path": "/tmp/m", "job_name": "run1"})"));
  EXPECT_TRUE(c.csv_monitor.enabled);  // pydantic lax bool
  EXPECT_EQ(c.csv_monitor.output_path, "/tmp/m");
  EXPECT_EQ(c.csv_monitor.job_name, "run1");
  EXPECT_REJECTED(tb(R"("tensorboard": {"enabled": true, "output_path": 5})"), "tensorboard.output_path", "a string");
  EXPECT_REJECTED(tb(R"("csv_monitor": {"job_name": null})"), "csv_monitor.job_name", "a string");
  EXPECT_REJECTED(tb(R"("csv_monitor": {"output_path": "a\u0000b"})"), "csv_monitor.output_path", "NUL");
  EXPECT_REJECTED(tb(R"("tensorboard": {"enabled": "maybe"})"), "tensorboard.enabled");
  EXPECT_REJECTED(tb(R"("tensorboard": [])"), "tensorboard", "an object");
}

TEST(Monitors, UnknownKeysAreErrorsAsPydanticExtraForbid) {
  EXPECT_REJECTED(tb(R"("tensorboard": {"enabled": true, "outputpath": "/tmp"})"), "tensorboard.outputpath",
                  "did you mean `output_path`?");
  EXPECT_REJECTED(tb(R"("csv_monitor": {"job": "x"})"), "csv_monitor.job");
  EXPECT_REJECTED(tb(R"("wandb": {"projekt": "p"})"), "wandb.projekt", "did you mean `project`?");
  EXPECT_REJECTED(tb(R"("comet": {"api_kee": "k"})"), "comet.api_kee", "did you mean `api_key`?");
}

TEST(Monitors, WandbAndCometAcceptedNotUsedWithOneWarning) {
  zt::DsConfig c = resolve(tb(R"("wandb": {"enabled": true, "project": "p"}, "comet": {"enabled": true, "online": false})"));
  std::string unused_lines;
  int n = 0;
  for (const std::string& w : c.warnings)
    if (w.find("set but not used by zerotrain") != std::string::npos) ++n, unused_lines += w;
  EXPECT_EQ(n, 1) << unused_lines;
  for (const char* k : {"wandb.enabled", "wandb.project", "comet.enabled", "comet.online"})
    EXPECT_TRUE(warns_unused(c, k)) << k << ": " << unused_lines;
  EXPECT_NE(unused_lines.find("--metrics JSONL"), std::string::npos) << unused_lines;
  EXPECT_EQ(c.resolved["wandb"]["project"], "p");
  EXPECT_TRUE(c.resolved["wandb"]["group"].is_null());
  EXPECT_EQ(c.resolved["comet"]["samples_log_interval"], 100);
  // Defaults only: nothing to warn about.
  EXPECT_TRUE(resolve(tb(R"("wandb": {"enabled": false}, "comet": {})")).warnings.empty());
}
