// top_keys.h — every top-level scalar key of a DeepSpeed config, declared once. An X-macro list
// with no include guard, as config/zero_keys.h: a file defines ZT_TOP_KEY, ZT_TOP_SPECIAL and/or
// ZT_TOP_UNLISTED, includes this file, and gets one expansion per entry (all three are #undef'd
// at the end; an undefined one expands to nothing). Expansions:
//   ds_config.h    the typed fields of DsConfig, with their defaults (DeepSpeed 0.19.5's)
//   cfg_batch.cpp  the reader, in list order: a ZT_TOP_KEY through the generic reader (read_key)
//                  when `read` is a rule, else through the named handler; then its refusal
//   key_table.cpp  the rows of `zerotrain check-config --keys` / docs/config-keys.md, in list order
//
// ZT_TOP_KEY(name, type, default, read, refused, use, why, probe, effects, context)
//   the field `type name = default;` of DsConfig. read: a rule of config_reader.h (kFlag, ...) or
//   a handler `type handler(Ctx&, Section&, const char* key, type def)` in csrc/config/cfg_batch.cpp
//   (a key with its own rule: null, dtype names, bounds, "auto"). refused: "" or, for a boolean,
//   the message that ends the run when the file sets it true.
// ZT_TOP_SPECIAL(path, use, why, probe, effects, context)
//   a key-table row only: the batch triad, read (after every section, as DeepSpeed does) by
//   resolve_batch, whose resolved values are DsConfig's train_batch_size /
//   train_micro_batch_size_per_gpu / gradient_accumulation_steps.
// ZT_TOP_UNLISTED(handler)
//   keys read (by `handler(Ctx&, Section&)`, at this point of the list) that have no key-table row.
// use, why, probe, effects, context: the key table's columns (config/key_table.h).
// Units: steps count optimizer steps.

#ifndef ZT_TOP_KEY
#define ZT_TOP_KEY(name, type, def, read, refused, use, why, probe, effects, context)
#endif
#ifndef ZT_TOP_SPECIAL
#define ZT_TOP_SPECIAL(path, use, why, probe, effects, context)
#endif
#ifndef ZT_TOP_UNLISTED
#define ZT_TOP_UNLISTED(handler)
#endif

ZT_TOP_SPECIAL("train_batch_size", kImplemented, "global batch: micro-batch x accumulation x world size", "16", "L", "")
ZT_TOP_SPECIAL("train_micro_batch_size_per_gpu", kImplemented, "samples per rank per micro-step", "4", "LM", "")
ZT_TOP_SPECIAL("gradient_accumulation_steps", kImplemented, "micro-steps per optimizer step", "2", "L", "")
ZT_TOP_KEY(managed_gradient_accumulation, bool, true, kFlag, "", kRejected,
           "zerotrain owns the training loop; there is no user-driven step", "false", "", "")
// nullopt or 0: no periodic progress line
ZT_TOP_KEY(steps_per_print, std::optional<int64_t>, std::nullopt, read_steps_per_print, "", kImplemented,
           "steps between progress lines (unless --log-every)", "100", "O", "")
ZT_TOP_KEY(dump_state, bool, false, kFlag, "", kNotUsed,
           "zerotrain always prints its run header; the plan is `zerotrain explain`", "true", "", "")
ZT_TOP_KEY(disable_allgather, bool, false, kFlag, "", kNotUsed, "stages 1-2 always all-gather the updated parameters",
           "true", "", "")
// nullopt: the compute dtype
ZT_TOP_KEY(communication_data_type, std::optional<DType>, std::nullopt, read_dtype_choice, "", kImplemented,
           "dtype of gradient reductions on the wire", "\"bf16\"", "LC", "")
ZT_TOP_KEY(seq_parallel_communication_data_type, std::optional<DType>, DType::F32, read_dtype_choice, "", kNotUsed,
           "zerotrain has no sequence parallelism", "\"bf16\"", "", "")
ZT_TOP_KEY(prescale_gradients, bool, false, kFlag, "", kImplemented,
           "stages 0-1: divide by gradient_predivide_factor before the reduction", "true", "L",
           R"({"zero_optimization":{"stage":1},"gradient_predivide_factor":3.0})")
ZT_TOP_KEY(gradient_predivide_factor, double, 1.0, read_predivide_factor, "", kImplemented,
           "stages 0-1: split of the 1/world-size averaging around the reduction", "3.0", "L", kStage1)
ZT_TOP_KEY(gradient_allreduce_op, std::string, "mean", read_allreduce_op, "", kRejected,
           "\"sum\" is not implemented: gradients are always averaged", "\"sum\"", "", "")  // "mean" | "sum"
ZT_TOP_KEY(sparse_gradients, bool, false, kFlag,
           "true is not supported by zerotrain (sparse CSR embedding gradients); remove it or set false", kRejected,
           "no sparse (CSR) embedding gradients", "true", "", "")
// max global L2 norm; <= 0: off (DeepSpeed < 0.19.3: 0.0)
ZT_TOP_KEY(gradient_clipping, double, 1.0, read_gradient_clipping, "", kImplemented,
           "max global L2 norm of the gradients", "0.01", "L", "")
// per-step stream-timed breakdown (docs/observability.md)
ZT_TOP_KEY(wall_clock_breakdown, bool, false, kFlag, "", kImplemented,
           "per-step fwd/bwd/optim and comm busy/exposed times", "true", "O", "")
ZT_TOP_KEY(memory_breakdown, bool, false, kFlag, "", kImplemented,
           "prints the memory report at start-up and at the end", "true", "O", "")
ZT_TOP_KEY(graph_harvesting, bool, false, kFlag,
           "true is not supported by zerotrain (CUDA graph capture); remove it or set false", kRejected,
           "no CUDA graph capture", "true", "", "")
ZT_TOP_KEY(dataloader_drop_last, bool, false, kFlag, "", kNotUsed,
           "zerotrain's data sources always yield whole micro-batches", "true", "", "")
ZT_TOP_KEY(zero_allow_untested_optimizer, bool, false, kFlag, "", kNotUsed,
           "every zerotrain optimizer (Adam, AdamW, SGD, Lion, Adagrad, LAMB) is tested with every ZeRO stage", "true",
           "", "")
ZT_TOP_KEY(zero_force_ds_cpu_optimizer, bool, true, kFlag, "", kNotUsed,
           "with offload zerotrain always runs its own CPU optimizer", "false", "", "")
ZT_TOP_KEY(use_data_before_expert_parallelism, bool, false, kFlag, "", kNotUsed, kNoMoE, "true", "", "")
ZT_TOP_KEY(log_level, Json, nullptr, read_log_level, "", kNotUsed,
           "zerotrain's log has one level; warnings and errors always print", "\"debug\"", "", "")
ZT_TOP_KEY(vocabulary_size, std::optional<int64_t>, std::nullopt, read_vocabulary_size, "", kNotUsed,
           "the model file's vocab_size sizes the embedding", "64", "", "")
ZT_TOP_UNLISTED(read_parallel_sizes)  // sequence_parallel_size, data_parallel_size
ZT_TOP_KEY(fp32_allreduce, bool, false, kFlag, "", kNotUsed, "use communication_data_type to choose the reduction dtype",
           "true", "", "")
ZT_TOP_KEY(zero_allow_comm_data_type_fp32, bool, false, kFlag, "", kNotUsed, "fp32 reductions are always allowed",
           "true", "", "")
ZT_TOP_KEY(train_micro_batch_size, Json, nullptr, read_as_given, "", kNotUsed,
           "not a DeepSpeed batch key; use train_micro_batch_size_per_gpu", "4", "", "")

#undef ZT_TOP_KEY
#undef ZT_TOP_SPECIAL
#undef ZT_TOP_UNLISTED
