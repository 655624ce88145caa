// monitor_keys.h — every key of DeepSpeed's monitor sections (tensorboard, csv_monitor, wandb,
// comet), declared once. An X-macro list with no include guard, as config/zero_keys.h: a file
// defines ZT_MONITOR_KEY and/or ZT_MONITOR_SPECIAL, includes this file, and gets one expansion per
// entry (both are #undef'd at the end; an undefined one expands to nothing). Expansions:
//   ds_config.h     the typed fields of MonitorConfig (FILE entries), with DeepSpeed's defaults
//   cfg_monitor.cpp the reader of each section, in list order (unknown keys are errors)
//   key_table.cpp   the rows of `zerotrain check-config --keys` / docs/config-keys.md, in list
//                   order; FILE entries once per file monitor, tensorboard then csv_monitor
//
// ZT_MONITOR_KEY(sec, name, type, default, read, use, why, probe, effects, context)
//   an ordinary key of section `sec`, read by `read`: kFlag, kInt (config_reader.h), kString (a
//   string, no coercion) or kNullableString (a string or null; absent or null resolves to null).
// ZT_MONITOR_SPECIAL(sec, name, use, why, probe, effects, context)
//   a key-table row only: a key read by hand in csrc/config/cfg_monitor.cpp after the ordinary ones.
// sec: FILE (tensorboard and csv_monitor: the fields of MonitorConfig; in why / context, `what` is
// the monitor's own description and `on` the patch that enables it), WANDB, COMET. use, why,
// probe, effects, context: the key table's columns (config/key_table.h).

#ifndef ZT_MONITOR_KEY
#define ZT_MONITOR_KEY(sec, name, type, def, read, use, why, probe, effects, context)
#endif
#ifndef ZT_MONITOR_SPECIAL
#define ZT_MONITOR_SPECIAL(sec, name, use, why, probe, effects, context)
#endif

ZT_MONITOR_KEY(FILE, enabled, bool, false, kFlag, kImplemented, what, "true", "O", "")
// rank 0 writes output_path/job_name/ ("" -> job_name relative to the working directory)
ZT_MONITOR_KEY(FILE, output_path, std::string, "", kString, kImplemented,
               "directory above job_name (\"\": the working directory)", "\"mon\"", "O", on)
ZT_MONITOR_KEY(FILE, job_name, std::string, "DeepSpeedJobName", kString, kImplemented, "directory the files go in",
               "\"job2\"", "O", on)
ZT_MONITOR_KEY(WANDB, enabled, bool, false, kFlag, kNotUsed, kNoNetwork, "true", "", "")
ZT_MONITOR_KEY(WANDB, group, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"g\"", "", "")
ZT_MONITOR_KEY(WANDB, team, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"t\"", "", "")
ZT_MONITOR_KEY(WANDB, project, std::string, "deepspeed", kString, kNotUsed, kNoNetwork, "\"p\"", "", "")
ZT_MONITOR_KEY(COMET, enabled, bool, false, kFlag, kNotUsed, kNoNetwork, "true", "", "")
ZT_MONITOR_KEY(COMET, samples_log_interval, int64_t, 100, kInt, kNotUsed, kNoNetwork, "10", "", "")
ZT_MONITOR_KEY(COMET, project, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"p\"", "", "")
ZT_MONITOR_KEY(COMET, workspace, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"w\"", "", "")
ZT_MONITOR_KEY(COMET, api_key, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"k\"", "", "")
ZT_MONITOR_KEY(COMET, experiment_name, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"e\"", "", "")
ZT_MONITOR_KEY(COMET, experiment_key, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"k\"", "", "")
ZT_MONITOR_SPECIAL(COMET, online, kNotUsed, kNoNetwork, "false", "", "")  // Optional[bool]
ZT_MONITOR_KEY(COMET, mode, std::string, "", kNullableString, kNotUsed, kNoNetwork, "\"get\"", "", "")

#undef ZT_MONITOR_KEY
#undef ZT_MONITOR_SPECIAL
