// precision_keys.h — every key of fp16 and bf16 (and the rows of the deprecated `bfloat16`
// spelling, data_types and torch_autocast), declared once. An X-macro list with no include guard,
// as config/zero_keys.h (which describes the expansions and the columns): a file defines
// ZT_PRECISION_KEY and/or ZT_PRECISION_SPECIAL, includes this file, and gets one expansion per
// entry (both are #undef'd at the end).
//
// ZT_PRECISION_KEY(sec, name, type, default, rule, use, why, probe, effects, context)
//   an ordinary key: the field `type name = default;` of section `sec`, read by `rule` (as in
//   zero_keys.h, plus kIntNoBool: an integer, a boolean rejected). Never refused by the reader.
// ZT_PRECISION_SPECIAL(sec, path, use, why, probe, effects, context, input_only, input_default)
//   a key with its own rule, read by hand in csrc/config/cfg_precision.cpp.
// sec: F16 (fp16), B16 (bf16), DT (data_types), TA (torch_autocast), TOP (the top level).

#ifndef ZT_PRECISION_KEY
#define ZT_PRECISION_KEY(sec, name, type, def, rule, use, why, probe, effects, context)
#endif
#ifndef ZT_PRECISION_SPECIAL
#define ZT_PRECISION_SPECIAL(sec, path, use, why, probe, effects, context, input_only, input_default)
#endif

ZT_PRECISION_KEY(F16, enabled, bool, false, kFlag, kImplemented, "fp16 compute with dynamic loss scaling", "true", "LM",
                 "")
ZT_PRECISION_SPECIAL(TOP, "bfloat16", kImplemented, "deprecated spelling of the bf16 section", R"({"enabled":true})",
                     "LM", "", true, "")
ZT_PRECISION_KEY(F16, auto_cast, bool, false, kFlag, kNotUsed, "zerotrain's kernels cast explicitly; there is no autocast",
                 "true", "", kFp16)
ZT_PRECISION_SPECIAL(F16, "loss_scale", kImplemented, "a static loss scale (0: dynamic)", "128", "L", kFp16, false, "")
ZT_PRECISION_KEY(F16, initial_scale_power, int64_t, 16, kInt, kImplemented, "dynamic scaling starts at 2^power", "8", "L",
                 kFp16)  // initial dynamic scale 2^16
ZT_PRECISION_KEY(F16, loss_scale_window, int64_t, 1000, kIntNoBool, kImplemented, "clean steps before the scale doubles",
                 "1", "L", kFp16)  // steps
ZT_PRECISION_KEY(F16, hysteresis, int64_t, 2, kInt, kImplemented, "overflows tolerated before the scale halves", "1", "L",
                 kFp16Overflow)  // overflows
ZT_PRECISION_KEY(F16, consecutive_hysteresis, bool, false, kFlag, kImplemented,
                 "refill the hysteresis after each clean step", "true", "=LossScaler.Item27And29", kFp16Overflow)
ZT_PRECISION_KEY(F16, min_loss_scale, int64_t, 1, kIntNoBool, kImplemented, "floor of the dynamic scale",
                 "1099511627776", "=LossScaler.Item26And28NonZeroFloorsWithoutError", kFp16Overflow)
ZT_PRECISION_KEY(F16, fp16_master_weights_and_grads, bool, false, kFlag, kRejected,
                 "fp16 master weights are not supported (use bf16 or fp32)", "true", "", kFp16)
ZT_PRECISION_KEY(B16, enabled, bool, false, kFlag, kImplemented, "bf16 compute", "true", "LM", "")
ZT_PRECISION_KEY(B16, immediate_grad_update, bool, false, kFlag, kNotUsed,
                 "gradients always accumulate in grad_accum_dtype buffers (no hooks)", "true", "", kBf16)
ZT_PRECISION_KEY(B16, check_grad_overflow, bool, true, kFlag, kImplemented, "bf16 steps check the gradients for NaN/Inf",
                 "false", "=Engine.Fp16InjectedOverflowSkipsOnEveryRank", kBf16)
ZT_PRECISION_KEY(B16, bf16_master_weights_and_grads, bool, false, kFlag, kImplemented, "bf16 master weights and gradients",
                 "true", "LM", kBf16)
ZT_PRECISION_KEY(B16, bf16_optimizer_states, bool, false, kFlag, kImplemented, "bf16 Adam moments", "true", "LM",
                 R"({"bf16":{"enabled":true,"bf16_master_weights_and_grads":true}})")
ZT_PRECISION_SPECIAL(DT, "grad_accum_dtype", kImplemented, "dtype gradients accumulate in", "\"bf16\"", "M", kBf16, false,
                     "")
ZT_PRECISION_SPECIAL(DT, "param_dtype", kRejected, "parameter dtypes follow fp16/bf16", "\"bf16\"", "", "", false, "")
ZT_PRECISION_SPECIAL(DT, "buffer_dtype", kRejected, "buffer dtypes follow fp16/bf16", "\"bf16\"", "", "", false, "")
ZT_PRECISION_SPECIAL(TA, "enabled", kRejected, "no torch autocast (use fp16 or bf16)", "true", "", "", false, "")
ZT_PRECISION_SPECIAL(TA, "dtype", kNotUsed,
                     "torch autocast is not supported; the section is only accepted while disabled",
                     "\"torch.float16\"", "", "", false, "")
ZT_PRECISION_SPECIAL(TA, "lower_precision_safe_modules", kNotUsed, "torch autocast is not supported",
                     R"(["torch.nn.Linear"])", "", "", false, "")

#undef ZT_PRECISION_KEY
#undef ZT_PRECISION_SPECIAL
