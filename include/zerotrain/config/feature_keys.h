// feature_keys.h — every key of the DeepSpeed sections zerotrain reads beside the training core
// (activation_checkpointing, comms_logger, checkpoint, flops_profiler), declared once. An X-macro
// list with no include guard, as config/zero_keys.h: a file defines ZT_FEATURE_KEY and/or
// ZT_FEATURE_SPECIAL, includes this file, and gets one expansion per entry (both are #undef'd at
// the end; an undefined one expands to nothing). Expansions:
//   ds_config.h      the typed fields of STORE entries, with DeepSpeed's defaults: CommsLoggerConfig's
//                    (CL) and DsConfig's activation_<name> (AC)
//   cfg_features.cpp the reader of each section, in list order: a ZT_FEATURE_KEY through the generic
//                    reader (read_key), then its refusal; a ZT_FEATURE_SPECIAL through its handler
//   key_table.cpp    the rows of `zerotrain check-config --keys` / docs/config-keys.md, in list order
//
// ZT_FEATURE_KEY(sec, name, type, default, rule, store, refused, use, why, probe, effects, context)
//   an ordinary key of section `sec`, read by `rule` (config_reader.h). store: STORE (a typed field,
//   above) or NONE (resolved only). refused: "" or, for a boolean, the message that ends the run
//   when the file sets it true.
// ZT_FEATURE_SPECIAL(sec, path, handler, use, why, probe, effects, context)
//   a key with its own rule (enumerations, lists, nested objects, one key deciding another's
//   default), read by `void handler(Ctx&, Section&)` in csrc/config/cfg_features.cpp; kNone: read by
//   another entry's handler, or (FP) kept as given with its section by read_flops_profiler.
// sec: AC (activation_checkpointing), CL (comms_logger), CK (checkpoint), FP (flops_profiler).
// use, why, probe, effects, context: the key table's columns (config/key_table.h).

#ifndef ZT_FEATURE_KEY
#define ZT_FEATURE_KEY(sec, name, type, def, rule, store, refused, use, why, probe, effects, context)
#endif
#ifndef ZT_FEATURE_SPECIAL
#define ZT_FEATURE_SPECIAL(sec, path, handler, use, why, probe, effects, context)
#endif

ZT_FEATURE_KEY(AC, partition_activations, bool, false, kFlag, NONE, "", kNotUsed,
               "it partitions checkpoints over model-parallel ranks; data parallelism only (model-parallel size 1): "
               "nothing to partition, as in DeepSpeed", "true", "", "")
// zerotrain allocates every kept block input once at start-up (nothing to defragment)
ZT_FEATURE_KEY(AC, contiguous_memory_optimization, bool, false, kFlag, NONE, "", kNotUsed,
               "kept block inputs are already one allocation", "true", "", "")
// with recompute on, the kept block inputs live in host memory (ModelOptions::cpu_checkpointing);
// with recompute off it has no effect (a warning)
ZT_FEATURE_KEY(AC, cpu_checkpointing, bool, false, kFlag, STORE, "", kImplemented,
               "with recompute on, the kept block inputs live in pinned host memory (host_activations)", "true", "M",
               R"({"activation_checkpointing":{"zerotrain_recompute":"block"}})")
ZT_FEATURE_SPECIAL(AC, "number_checkpoints", read_recompute, kImplemented, ">= 1 recomputes every block in backward",
                   "2", "M", "")
ZT_FEATURE_SPECIAL(AC, "zerotrain_recompute", kNone, kImplemented, "zerotrain's granularity: none, block or selective",
                   "\"selective\"", "M", "")
ZT_FEATURE_KEY(AC, synchronize_checkpoint_boundary, bool, false, kFlag, NONE, "", kNotUsed,
               "recompute needs no extra synchronisation here", "true", "", "")
ZT_FEATURE_KEY(AC, profile, bool, false, kFlag, NONE, "", kNotUsed, "recompute is timed by wall_clock_breakdown's backward",
               "true", "", "")

ZT_FEATURE_KEY(CL, enabled, bool, false, kFlag, STORE, "", kImplemented, "per-op communication summary at the end of the run",
               "true", "O", "")
ZT_FEATURE_KEY(CL, verbose, bool, false, kFlag, STORE, "", kNotUsed, "the per-collective log is `--comm-log FILE`", "true",
               "", "")
// false: only the ops in prof_ops
ZT_FEATURE_KEY(CL, prof_all, bool, true, kFlag, STORE, "", kImplemented, "false: summarise only the ops in prof_ops",
               "false", "O", R"({"comms_logger":{"enabled":true}})")
ZT_FEATURE_KEY(CL, debug, bool, false, kFlag, NONE, "", kNotUsed, "the per-collective log is `--comm-log FILE`", "true",
               "", "")
ZT_FEATURE_SPECIAL(CL, "prof_ops", read_prof_ops, kImplemented, "ops summarised when prof_all is false",
                   R"(["all_gather"])", "O", kCommsLogger)

ZT_FEATURE_SPECIAL(CK, "tag_validation", read_tag_validation, kImplemented, "checks that every rank saves the same tag",
                   "\"FAIL\"", "=test_checkpoint_e2e.test_tag_validation_across_ranks", "")
ZT_FEATURE_KEY(CK, load_universal, bool, false, kFlag, NONE, "true is not supported by zerotrain (universal checkpoints)",
               kRejected, "universal checkpoints", "true", "", "")
ZT_FEATURE_KEY(CK, use_node_local_storage, bool, false, kFlag, NONE, "", kNotUsed,
               "every rank writes its own shard files under the directory given", "true", "", "")
ZT_FEATURE_SPECIAL(CK, "parallel_write.pipeline_stage", read_parallel_write, kNotUsed, "no pipeline parallelism", "true",
                   "", "")
ZT_FEATURE_SPECIAL(CK, "writer", read_writer, kNotUsed, "zerotrain has one checkpoint writer", R"({"type":"fast"})", "",
                   "")

ZT_FEATURE_SPECIAL(FP, "enabled", kNone, kImplemented,
                   "turns on wall_clock_breakdown (as DeepSpeed); progress lines already print TFLOP/s", "true", "O", "")
ZT_FEATURE_SPECIAL(FP, "recompute_fwd_factor", kNone, kNotUsed, kNoProfiler, "2", "", "")
ZT_FEATURE_SPECIAL(FP, "profile_step", kNone, kNotUsed, kNoProfiler, "2", "", "")
ZT_FEATURE_SPECIAL(FP, "module_depth", kNone, kNotUsed, kNoProfiler, "2", "", "")
ZT_FEATURE_SPECIAL(FP, "top_modules", kNone, kNotUsed, kNoProfiler, "2", "", "")
ZT_FEATURE_SPECIAL(FP, "detailed", kNone, kNotUsed, kNoProfiler, "false", "", "")
ZT_FEATURE_SPECIAL(FP, "output_file", kNone, kNotUsed, kNoProfiler, "\"profile.txt\"", "", "")

#undef ZT_FEATURE_KEY
#undef ZT_FEATURE_SPECIAL
