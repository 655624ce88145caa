// zero_keys.h — every key of zero_optimization (and its offload_optimizer / offload_param
// sections), declared once. An X-macro list with no include guard, in the style of
// kernels/op_list.h: a file defines ZT_ZERO_KEY and/or ZT_ZERO_SPECIAL, includes this file, and
// gets one expansion per entry (both are #undef'd at the end; an undefined one expands to nothing).
// Expansions:
//   ds_config.h   the typed fields of ZeroConfig / OffloadOptimizerConfig / OffloadParamConfig,
//                 with their defaults (DeepSpeed 0.19.5's; ZT_ZERO_KEY only)
//   cfg_zero.cpp  the reader: ordinary keys through one generic reader (type, bounds, alias,
//                 "auto", provenance), special keys through their named handler, in list order,
//                 then the refusals of ZT_ZERO_KEY entries that turn an unsupported feature on
//   key_table.cpp the rows of `zerotrain check-config --keys` / docs/config-keys.md, in list order
//
// ZT_ZERO_KEY(sec, name, type, default, rule, alias, refuse_above, refused, use, why, probe, effects, context)
//   an ordinary key: the field `type name = default;` of section `sec`, read by `rule`:
//     kFlag      a boolean (pydantic's lax rules: true/false, 0/1, "yes"/"no", ...)
//     kCount     an integer >= 0 (a boolean counts as 0/1)
//     kInt       an integer (a boolean counts as 0/1)
//     kFraction  a number in [0, 1]
//   alias: the other spelling DeepSpeed accepts ("" none). refuse_above / refused: a value above
//   refuse_above (a boolean counts as 0/1) ends the run with "<refused> is not supported by
//   zerotrain" (kNever: never refused).
// ZT_ZERO_SPECIAL(sec, path, handler, use, why, probe, effects, context, alias, input_only, input_default)
//   a key with its own rule (legacy forms, stage-dependent defaults, nested sections, lists):
//   read by the named handler in csrc/config/cfg_zero.cpp (kNone: read by another entry's handler).
//   input_only / input_default: as KeyEntry (config/key_table.h).
// Both: sec is Z (zero_optimization), OO (its offload_optimizer), OP (its offload_param) or TOP (the
// top level); use, why, probe, effects, context are the key table's columns (config/key_table.h).
// Units: sizes, thresholds and distances count elements (parameters).

#ifndef ZT_ZERO_KEY
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context)
#endif
#ifndef ZT_ZERO_SPECIAL
#define ZT_ZERO_SPECIAL(sec, path, handler, use, why, probe, effects, context, alias, input_only, input_default)
#endif

ZT_ZERO_SPECIAL(Z, "stage", read_stage, kImplemented, "ZeRO stage 0-3: what is sharded", "3", "MC", "", "", false, "")
ZT_ZERO_KEY(Z, contiguous_gradients, bool, true, kFlag, "", kNever, "", kImplemented,
            "false keeps a full gradient buffer next to the buckets (more memory here)", "false", "M", "")
ZT_ZERO_KEY(Z, reduce_scatter, bool, true, kFlag, "", kNever, "", kNotUsed,
            "stages 2-3 always reduce-scatter (all-reduce would move twice the bytes)", "false", "", "")
ZT_ZERO_KEY(Z, reduce_bucket_size, int64_t, 500000000, kCount, "", kNever, "", kImplemented,
            "elements per gradient bucket", "2000", "MC", "")
ZT_ZERO_KEY(Z, use_multi_rank_bucket_allreduce, bool, true, kFlag, "", kNever, "", kNotUsed,
            "buckets are reduced one collective each", "false", "", "")
ZT_ZERO_KEY(Z, allgather_partitions, bool, true, kFlag, "", kNever, "", kNotUsed,
            "stages 1-2 always all-gather (no broadcast fallback)", "false", "", "")
ZT_ZERO_KEY(Z, allgather_bucket_size, int64_t, 500000000, kCount, "", kNever, "", kImplemented,
            "elements per parameter all-gather group (stages 1-2)", "2000", "C", kStage1)
ZT_ZERO_SPECIAL(Z, "overlap_comm", read_overlap_comm, kImplemented, "reductions run on the comm stream during backward",
                "true", "=StepTiming.OverlapOnPhasesSumToTheStep", "", "", false, "")
ZT_ZERO_KEY(Z, load_from_fp32_weights, bool, true, kFlag, "", kNever, "", kNotUsed,
            "checkpoints always hold fp32 master weights and resume loads them", "false", "", "")
ZT_ZERO_KEY(Z, elastic_checkpoint, bool, false, kFlag, "", kNever, "", kNotUsed,
            "every checkpoint reshards to any world size", "true", "", "")

ZT_ZERO_SPECIAL(OO, "device", read_offload_sections, kImplemented,
                "\"cpu\": master weights, moments and accumulated gradients live in host memory", "\"cpu\"", "M", "", "", false, "")
ZT_ZERO_SPECIAL(OO, "nvme_path", kNone, kNotUsed, "NVMe offload is not supported; the path is never read", "\"/tmp\"", "",
                kOffload, "", false, "")
ZT_ZERO_KEY(OO, buffer_count, int64_t, 4, kCount, "", kNever, "", kImplemented,
            "host staging slots of the offload pipeline", "8", "M", kOffload)
ZT_ZERO_KEY(OO, pin_memory, bool, true, kFlag, "", kNever, "", kImplemented, "pinned host buffers", "false", "M", kOffload)
ZT_ZERO_KEY(OO, pipeline_read, bool, false, kFlag, "", kNever, "", kNotUsed, "NVMe only", "true", "", kOffload)
ZT_ZERO_KEY(OO, pipeline_write, bool, false, kFlag, "", kNever, "", kNotUsed, "NVMe only", "true", "", kOffload)
ZT_ZERO_KEY(OO, fast_init, bool, false, kFlag, "", kNever, "", kNotUsed, "NVMe only", "true", "", kOffload)
ZT_ZERO_KEY(OO, ratio, double, 1.0, kFraction, "", kNever, "", kRejected,  // fraction of the optimizer on the CPU
            "partial optimizer offload is not supported", "0.5", "", kStage3)
ZT_ZERO_KEY(OO, super_offload, bool, false, kFlag, "", kNever, "", kRejected, "SuperOffload is not supported", "true", "",
            kOffload)
ZT_ZERO_KEY(OO, cpuadam_cores_perc, double, 0.8, kFraction, "", kNever, "", kImplemented,  // fraction of the cores
            "share of the cores the CPU optimizer uses", "0.5", "=OffloadThreads.CpuadamCoresPercSharesTheCores", kOffload)

ZT_ZERO_SPECIAL(OP, "device", kNone, kImplemented, "stage 3: the parameter shard lives in host memory", "\"cpu\"", "M",
                R"({"zero_optimization":{"stage":3,"stage3_param_persistence_threshold":0,"offload_optimizer":{"device":"cpu"}}})",
                "", false, "")
ZT_ZERO_SPECIAL(OP, "nvme_path", kNone, kNotUsed, "NVMe offload is not supported; the path is never read", "\"/tmp\"", "",
                kOffloadParam, "", false, "")
ZT_ZERO_KEY(OP, buffer_count, int64_t, 5, kCount, "", kNever, "", kNotUsed,
            "the gathered buffers of stage 3 are the staging buffers", "8", "", kOffloadParam)
ZT_ZERO_KEY(OP, buffer_size, int64_t, 100000000, kCount, "", kNever, "", kNotUsed,
            "the gathered buffers of stage 3 are the staging buffers", "1000", "", kOffloadParam)
ZT_ZERO_KEY(OP, max_in_cpu, int64_t, 1000000000, kCount, "", kNever, "", kNotUsed, "NVMe only", "1000", "", kOffloadParam)
ZT_ZERO_KEY(OP, pin_memory, bool, true, kFlag, "", kNever, "", kImplemented, "pinned host parameter shard", "false", "M",
            kOffloadParam)

ZT_ZERO_SPECIAL(Z, "zenflow", read_zenflow, kRejected, "ZenFlow is not supported", R"({"topk_ratio":0.1})", "", "", "",
                false, "")
ZT_ZERO_KEY(Z, sub_group_size, int64_t, 1000000000, kCount, "", kNever, "", kImplemented,
            "elements per optimizer kernel call / offload chunk", "1000", "M", kOffload)
ZT_ZERO_KEY(Z, stage3_prefetch_bucket_size, int64_t, 50000000, kCount, "prefetch_bucket_size", kNever, "", kImplemented,
            "stage 3: elements gathered ahead of use", "0", "=EnginePlan.Stage3GatherSchedule", kStage3)
ZT_ZERO_KEY(Z, stage3_param_persistence_threshold, int64_t, 100000, kCount, "param_persistence_threshold", kNever, "",
            kImplemented, "stage 3: parameters this small stay gathered", "0", "C", R"({"zero_optimization":{"stage":3}})")
ZT_ZERO_KEY(Z, stage3_model_persistence_threshold, int64_t, INT64_MAX, kCount, "model_persistence_threshold", kNever, "",
            kNotUsed, "persistence is decided per parameter only", "1000", "", kStage3)
ZT_ZERO_KEY(Z, stage3_max_live_parameters, int64_t, 1000000000, kCount, "max_live_parameters", kNever, "", kImplemented,
            "stage 3: gathered elements alive at once", "1000", "=EnginePlan.Stage3GatherSchedule", kStage3)
ZT_ZERO_KEY(Z, stage3_max_reuse_distance, int64_t, 1000000000, kCount, "max_reuse_distance", kNever, "", kImplemented,
            "stage 3: keep a gathered unit that is reused this soon", "0", "C", kStage3)
ZT_ZERO_SPECIAL(Z, "stage3_gather_16bit_weights_on_model_save", read_gather_16bit, kImplemented,
                "stage 3: --save-weights gathers the 16-bit weights", "true",
                "=test_checkpoint_e2e.test_hf_folders_and_16bit_export", kStage3, "gather_16bit_weights_on_model_save",
                false, "")
ZT_ZERO_SPECIAL(Z, "stage3_gather_fp16_weights_on_model_save", kNone, kImplemented,
                "deprecated spelling of stage3_gather_16bit_weights_on_model_save", "true",
                "=test_checkpoint_e2e.test_hf_folders_and_16bit_export", kStage3, "", true, "false")
ZT_ZERO_KEY(Z, stage3_module_granularity_threshold, int64_t, 0, kInt, "module_granularity_threshold", kNever, "",
            kNotUsed, kNoHooks, "1000", "", kStage3)  // 0: off
ZT_ZERO_KEY(Z, stage3_use_all_reduce_for_fetch_params, bool, false, kFlag, "use_all_reduce_for_fetch_params", kNever, "",
            kNotUsed, "stage 3 always fetches with all-gather", "true", "", kStage3)
ZT_ZERO_KEY(Z, stage3_allgather_sequential, bool, false, kFlag, "allgather_sequential", kNever, "", kNotUsed,
            "gathers follow the plan's prefetch order", "true", "", kStage3)
ZT_ZERO_KEY(Z, ignore_unused_parameters, bool, true, kFlag, "", kNever, "", kNotUsed,
            "every parameter of zerotrain's models gets a gradient", "false", "", "")
ZT_ZERO_KEY(Z, legacy_stage1, bool, false, kFlag, "", 0, "legacy_stage1 (also rejected by DeepSpeed since 0.5.9)",
            kRejected, "legacy stage 1 (DeepSpeed rejects it too)", "true", "", "")
ZT_ZERO_KEY(Z, round_robin_gradients, bool, false, kFlag, "", kNever, "", kNotUsed,
            "gradients are not copied to a CPU buffer; nothing to round-robin", "true", "", "")
ZT_ZERO_KEY(Z, zero_hpz_partition_size, int64_t, 1, kCount, "", kNever, "", kImplemented,
            "ZeRO++ hpZ: a secondary copy of the parameters sharded over blocks of this many consecutive ranks "
            "(usually the GPUs per node); a bucket's gathers after its first of a step stay inside the block",
            "2", "MC", R"({"zero_optimization":{"stage":3,"stage3_param_persistence_threshold":0,"stage3_max_reuse_distance":0}})")
ZT_ZERO_KEY(Z, zero_quantized_weights, bool, false, kFlag, "", kNever, "", kImplemented,
            "ZeRO++ qwZ: stage 3's parameter all-gathers send block-wise int8 (blocks of 8000 elements, one fp32 "
            "scale each), dequantised on arrival; master weights never quantised", "true", "LMC", kStage3)
ZT_ZERO_KEY(Z, zero_quantized_nontrainable_weights, bool, false, kFlag, "", 0, "ZeRO++ quantized weights", kRejected,
            "ZeRO++ quantized weights", "true", "", "")
ZT_ZERO_KEY(Z, zero_quantized_gradients, bool, false, kFlag, "", kNever, "", kImplemented,
            "ZeRO++ qgZ: stage 3's gradient reduce-scatter as two all_to_all hops (inside each node, then across "
            "nodes) of int4 blocks of 2048 elements with one fp32 scale each, summed in fp32", "true", "LMC", kStage3)
ZT_ZERO_SPECIAL(Z, "zeropp_loco_param", read_loco, kRejected, "ZeRO++ LoCo", R"({"err_beta":0.8})", "", "", "", false, "")
ZT_ZERO_KEY(Z, mics_shard_size, int64_t, -1, kInt, "", 0,
            "MiCS (mics_shard_size > 0: sharding within groups of ranks, replicas across them); for gathers that stay "
            "inside a node use zero_hpz_partition_size",
            kRejected, "MiCS: sharding within groups and replicating across them; zero_hpz_partition_size keeps "
            "ZeRO-3's gathers inside a node instead", "2", "", "")
ZT_ZERO_KEY(Z, mics_hierarchical_params_gather, bool, false, kFlag, "", kNever, "", kNotUsed, "MiCS is not supported",
            "true", "", "")
ZT_ZERO_KEY(Z, memory_efficient_linear, bool, true, kFlag, "", kNever, "", kNotUsed, kNoHooks, "false", "", "")
ZT_ZERO_KEY(Z, pipeline_loading_checkpoint, bool, false, kFlag, "", kNever, "", kNotUsed, "no pipeline parallelism",
            "true", "", "")
ZT_ZERO_KEY(Z, override_module_apply, bool, true, kFlag, "", kNever, "", kNotUsed, kNoHooks, "false", "", "")
ZT_ZERO_KEY(Z, log_trace_cache_warnings, bool, false, kFlag, "", kNever, "", kNotUsed,
            "there is no trace cache: the plan is static", "true", "", "")
ZT_ZERO_KEY(Z, enable_sanity_checks, bool, false, kFlag, "", kNever, "", kNotUsed,
            "the plan hash is always compared across ranks", "true", "", "")
ZT_ZERO_KEY(Z, save_muon_momentum_buffer_in_memory, bool, false, kFlag, "", kNever, "", kNotUsed,
            "zerotrain has no Muon optimizer", "true", "", "")
ZT_ZERO_SPECIAL(Z, "leaf_module.classes", read_leaf_module, kNotUsed, kNoMoE, R"(["X"])", "", "", "", false, "")
ZT_ZERO_SPECIAL(Z, "leaf_module.names", kNone, kNotUsed, kNoMoE, R"(["X"])", "", "", "", false, "")
ZT_ZERO_SPECIAL(Z, "leaf_module.name_suffixes", kNone, kNotUsed, kNoMoE, R"(["X"])", "", "", "", false, "")
ZT_ZERO_SPECIAL(Z, "cpu_offload", kNone, kImplemented, "deprecated spelling of offload_optimizer: {\"device\": \"cpu\"}",
                "true", "M", "", "", true, "false")
ZT_ZERO_SPECIAL(Z, "cpu_offload_param", kNone, kImplemented,
                "deprecated spelling of offload_param: {\"device\": \"cpu\"}", "true", "M",
                R"({"zero_optimization":{"stage":3,"stage3_param_persistence_threshold":0,"cpu_offload":true}})", "",
                true, "false")
ZT_ZERO_SPECIAL(Z, "cpu_offload_use_pin_memory", kNone, kNotUsed, "deprecated; use offload_optimizer.pin_memory", "true",
                "", "", "", true, "")
ZT_ZERO_SPECIAL(TOP, "allgather_size", kNone, kNotUsed, "read only with the legacy `\"zero_optimization\": true`",
                "1000", "", "", "", true, "500000000")

#undef ZT_ZERO_KEY
#undef ZT_ZERO_SPECIAL
