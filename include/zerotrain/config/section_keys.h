// section_keys.h — the DeepSpeed top-level sections zerotrain accepts only while they change
// nothing, declared once. An X-macro list with no include guard, as config/zero_keys.h: a file
// defines ZT_UNSUPPORTED_SECTION and/or ZT_IGNORED_SECTION, includes this file, and gets one
// expansion per entry (both are #undef'd at the end; an undefined one expands to nothing).
// Expansions:
//   cfg_features.cpp the reader, in list order (the order also decides "did you mean" ties)
//   key_table.cpp    one row per section: the ignored ones, then the unsupported ones
//
// ZT_UNSUPPORTED_SECTION(key, what, keys, probe)
//   a DeepSpeed feature zerotrain does not implement: accepted while disabled, rejected when the
//   section turns it on (docs/config.md rule 5: any `enabled`/`deepcompile` true inside it, a
//   non-boolean `enabled` that reads as true, any sparse_attention setting, tensor parallelism > 1).
//   what: the feature, as the rejection names it. keys: kAnyKeys, or the complete key set of a
//   section DeepSpeed validates with extra="forbid" (unknown keys are errors), a constant of
//   csrc/config/cfg_features.cpp. probe: the key table's probe, a value that turns it on.
// ZT_IGNORED_SECTION(key)
//   a section accepted as given and not used (no effect on training).

#ifndef ZT_UNSUPPORTED_SECTION
#define ZT_UNSUPPORTED_SECTION(key, what, keys, probe)
#endif
#ifndef ZT_IGNORED_SECTION
#define ZT_IGNORED_SECTION(key)
#endif

ZT_UNSUPPORTED_SECTION(elasticity, "elastic training", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(amp, "Apex AMP (use fp16 or bf16)", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(progressive_layer_drop, "progressive layer drop", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(compression_training, "compression training", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(quantize_training, "quantization-aware training", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(data_efficiency, "data efficiency (curriculum / random-LTD)", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(curriculum_learning, "curriculum learning", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(hybrid_engine, "the hybrid engine", kHybridEngineKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(compile, "torch.compile / DeepCompile", kAnyKeys, R"({"deepcompile":true})")
ZT_UNSUPPORTED_SECTION(autotuning, "autotuning", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(nebula, "Nebula checkpointing", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(datastates, "DataStates checkpointing", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(eigenvalue, "eigenvalue computation", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(weight_quantization, "weight quantization", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(expert_parallel, "expert parallelism", kAnyKeys, R"({"enabled":true})")
ZT_UNSUPPORTED_SECTION(tensor_parallel, "tensor parallelism", kAnyKeys, R"({"autotp_size":2})")
ZT_UNSUPPORTED_SECTION(sparse_attention, "sparse attention", kAnyKeys, R"({"mode":"fixed"})")
ZT_IGNORED_SECTION(aio)
ZT_IGNORED_SECTION(timers)
ZT_IGNORED_SECTION(pipeline)

#undef ZT_UNSUPPORTED_SECTION
#undef ZT_IGNORED_SECTION
