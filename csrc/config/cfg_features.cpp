// cfg_features.cpp — the remaining DeepSpeed sections (docs/config.md §9): those zerotrain
// reads (activation_checkpointing, comms_logger, checkpoint, flops_profiler: config/feature_keys.h),
// those it knows but does not implement (accepted while disabled, rejected when enabled:
// docs/config.md rule 5; config/section_keys.h), cross-section rules, and the key tables behind
// "did you mean" hints.
#include <algorithm>
#include <utility>
#include <vector>

#include "config_reader.h"

namespace zt::cfg {
namespace {

const char* const kZeroKeys[] = {
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_partitions",
    "allgather_bucket_size", "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint", "offload_param",
    "offload_optimizer", "sub_group_size", "cpu_offload", "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold", "stage3_model_persistence_threshold", "stage3_max_live_parameters",
    "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save", "round_robin_gradients",
    "ignore_unused_parameters", "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients",
    "mics_shard_size", "prefetch_bucket_size", "param_persistence_threshold", "max_live_parameters",
    "max_reuse_distance"};
const char* const kFp16Keys[] = {"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                                 "consecutive_hysteresis", "min_loss_scale", "fp16_master_weights_and_grads",
                                 "auto_cast"};
const char* const kBf16Keys[] = {"immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads",
                                 "bf16_optimizer_states"};
const char* const kOffloadKeys[] = {"device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu",
                                    "pin_memory", "pipeline_read", "pipeline_write", "fast_init", "ratio"};

// The complete key set of DeepSpeed's hybrid_engine (pydantic, extra="forbid"); kAnyKeys: any key
// (section_keys.h `keys`).
const std::vector<const char*> kHybridEngineKeys = {"enabled", "max_out_tokens", "inference_tp_size",
                                                    "release_inference_cache", "pin_parameters",
                                                    "tp_gather_partition_size", "enable_cuda_graph"};
const std::vector<const char*> kAnyKeys;

bool contains_enabled(const Json& v) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if ((it.key() == "enabled" || it.key() == "deepcompile") && it.value().is_boolean() && it.value().get<bool>()) return true;
      if (contains_enabled(it.value())) return true;
    }
  } else if (v.is_array()) {
    for (const Json& e : v)
      if (contains_enabled(e)) return true;
  }
  return false;
}

// Whether a feature section turns its feature on: any `enabled`/`deepcompile` true inside it, a
// non-boolean `enabled` that reads as true, any sparse_attention setting, tensor parallelism > 1.
bool feature_on(Ctx& c, const std::string& k, const Json& v) {
  bool on = contains_enabled(v);
  if (v.contains("enabled") && !v["enabled"].is_boolean()) on = to_bool(c, k + ".enabled", v["enabled"]);
  if (k == "sparse_attention" && !v.empty()) on = true;
  if (k == "tensor_parallel") {
    for (const char* tp : {"autotp_size", "tp_size"}) {
      if (v.contains(tp) && to_int(c, k + "." + tp, v[tp], BoolAsInt::kReject) > 1) on = true;
    }
  }
  return on;
}

// A ZT_UNSUPPORTED_SECTION of section_keys.h.
void read_unsupported(Ctx& c, Section& top, const std::string& k, const char* what,
                      const std::vector<const char*>& strict_keys) {
  Section::Lookup l = top.take(k);
  if (!l.present() || l.value->is_null()) return;
  const Json& v = *l.value;
  if (!v.is_object()) c.fail(k, v, "an object");
  if ((k == "amp" || k == "progressive_layer_drop") && !v.contains("enabled")) {
    c.error(k, "missing `enabled` (DeepSpeed requires it in this section)");
  }
  if (!strict_keys.empty()) {  // DeepSpeed validates these sections with extra="forbid"
    Section s(c, &v, k, Section::Kind::kStrict);
    for (const char* known : strict_keys) s.accept(known);
    s.finish();
  }
  if (feature_on(c, k, v)) {
    c.error(k, std::string("enables ") + what + ", which is not supported by zerotrain; remove the section or disable it");
  }
  c.cfg.resolved[k] = v;
  c.record(k, ConfigSource::kFile, "disabled");
}

// A ZT_IGNORED_SECTION of section_keys.h (and flops_profiler): kept as given.
void read_ignored(Ctx& c, Section& top, const char* k) {
  Section::Lookup l = top.take(k);
  if (!l.present() || l.value->is_null()) return;
  if (!l.value->is_object()) c.fail(k, *l.value, "an object");
  c.cfg.resolved[k] = *l.value;
  c.record(k, ConfigSource::kFile, "accepted");
}

// The handlers of the ZT_FEATURE_SPECIAL entries (feature_keys.h).

void kNone(Ctx&, Section&) {}

// number_checkpoints, and zerotrain's granularity key (DeepSpeed ignores unknown keys of this
// section): "none" | "block" | "selective". Without it, number_checkpoints >= 1 turns on block
// recompute of every block.
void read_recompute(Ctx& c, Section& s) {
  Section::Lookup ln = s.take("number_checkpoints");
  int64_t checkpoints = 0;
  if (ln.present() && !ln.value->is_null()) checkpoints = to_int(c, s.key_path(ln.key), *ln.value, BoolAsInt::kReject);
  s.put_lookup("number_checkpoints", ln.present() ? *ln.value : Json(nullptr), ln);
  Section::Lookup lr = s.take("zerotrain_recompute");
  std::string recompute = checkpoints >= 1 ? "block" : "none";
  if (lr.present()) {
    const Json& v = *lr.value;
    const std::string w = v.is_string() ? v.get<std::string>() : "";
    if (w != "none" && w != "block" && w != "selective") c.fail(s.key_path("zerotrain_recompute"), v, "\"none\", \"block\" or \"selective\"");
    recompute = w;
  }
  s.put("zerotrain_recompute", recompute, lr.present() ? ConfigSource::kFile : ConfigSource::kDefault,
        lr.present() ? "" : (checkpoints >= 1 ? "number_checkpoints >= 1: block recompute" : ""));
  c.cfg.activation_recompute = recompute;
}

void read_prof_ops(Ctx& c, Section& s) {
  Section::Lookup ops = s.take("prof_ops");
  Json ops_out = Json::array();
  if (ops.present() && !ops.value->is_null()) {
    if (!ops.value->is_array()) c.fail("comms_logger.prof_ops", *ops.value, "a list of op names");
    for (const Json& o : *ops.value) {
      if (!o.is_string()) c.fail("comms_logger.prof_ops", o, "an op name (string)");
      c.cfg.comms_logger.prof_ops.push_back(o.get<std::string>());
      ops_out.push_back(o);
    }
  }
  s.put_lookup("prof_ops", ops_out, ops);
}

void read_tag_validation(Ctx& c, Section& s) {
  Section::Lookup lt = s.take("tag_validation");
  std::string tv = "WARN";
  if (lt.present()) {
    std::string p = s.key_path(lt.key);
    if (!lt.value->is_string()) c.fail(p, *lt.value, "one of \"WARN\", \"IGNORE\", \"FAIL\" (case-insensitive)");
    tv = lt.value->get<std::string>();
    std::transform(tv.begin(), tv.end(), tv.begin(), [](unsigned char ch) { return std::toupper(ch); });
    if (tv != "WARN" && tv != "IGNORE" && tv != "FAIL") {
      c.fail(p, *lt.value, "one of \"WARN\", \"IGNORE\", \"FAIL\" (case-insensitive)");
    }
  }
  s.put_lookup("tag_validation", tv, lt);
  c.cfg.checkpoint_tag_validation = tv;
}

void read_parallel_write(Ctx& c, Section& s) {
  Section::Lookup lp = s.take("parallel_write");
  Json pw = Json{{"pipeline_stage", false}};
  if (lp.present()) {
    if (!lp.value->is_object()) c.fail(s.key_path("parallel_write"), *lp.value, "an object");
    if (lp.value->contains("pipeline_stage")) {
      const Json& ps = (*lp.value)["pipeline_stage"];
      bool ok = ps.is_boolean() || (ps.is_number_integer() && (ps == 0 || ps == 1));
      if (!ok) c.fail("checkpoint.parallel_write.pipeline_stage", ps, "true or false");
      pw["pipeline_stage"] = ps.is_boolean() ? ps.get<bool>() : ps.get<int64_t>() == 1;
    }
  }
  s.put_lookup("parallel_write", pw, lp);
}

// Any value, kept as given (absent: not in the resolved document).
void read_writer(Ctx&, Section& s) {
  Section::Lookup lw = s.take("writer");
  if (lw.present()) s.put_lookup("writer", *lw.value, lw);
}

// A boolean whose true turns on a feature zerotrain does not implement (feature_keys.h: refused).
void refuse_if_on(Ctx& c, const Section& s, const char* key, bool on, const char* refused) {
  if (on && *refused) c.error(s.key_path(key), refused);
}
template <typename T>
void refuse_if_on(Ctx&, const Section&, const char*, const T&, const char*) {}

// The section's object, or nullptr when absent. Each section keeps DeepSpeed's rule for null.
const Json* section_object(Ctx& c, const Section::Lookup& l, const char* key, bool null_is_absent) {
  if (!l.present() || (null_is_absent && l.value->is_null())) return nullptr;
  if (!l.value->is_object()) c.fail(key, *l.value, "an object");
  return l.value;
}

// The sections of feature_keys.h.
enum class FeatureSec { kAC, kCL, kCK, kFP };

// The entries of section `sec` of feature_keys.h, in list order, read from `s`: a ZT_FEATURE_KEY by
// the generic reader, into its field (STORE) or only resolved (NONE), then refused when it turns an
// unsupported feature on; a ZT_FEATURE_SPECIAL by its handler.
void read_feature_keys(Ctx& c, Section& s, FeatureSec sec) {
#define ZT_FEATURE_FIELD_AC(name) c.cfg.activation_##name
#define ZT_FEATURE_FIELD_CL(name) c.cfg.comms_logger.name
#define ZT_FEATURE_INTO_STORE(sec, name, type, def, rule) (ZT_FEATURE_FIELD_##sec(name) = read_key(s, #name, type(def), rule))
#define ZT_FEATURE_INTO_NONE(sec, name, type, def, rule) read_key(s, #name, type(def), rule)
#define ZT_FEATURE_KEY(sec_, name, type, def, rule, store, refused, ...) \
  if (sec == FeatureSec::k##sec_) refuse_if_on(c, s, #name, ZT_FEATURE_INTO_##store(sec_, name, type, def, rule), refused);
#define ZT_FEATURE_SPECIAL(sec_, path, handler, ...) \
  if (sec == FeatureSec::k##sec_) handler(c, s);
#include "zerotrain/config/feature_keys.h"
#undef ZT_FEATURE_FIELD_AC
#undef ZT_FEATURE_FIELD_CL
#undef ZT_FEATURE_INTO_STORE
#undef ZT_FEATURE_INTO_NONE
}

// One section of feature_keys.h: its object (absent, or null when `null_is_absent`: every default),
// its keys, its unknown keys, its resolved value.
void read_feature_section(Ctx& c, Section& top, const char* key, FeatureSec sec, Section::Kind kind,
                          bool null_is_absent) {
  Section::Lookup l = top.take(key);
  Section s(c, section_object(c, l, key, null_is_absent), key, kind);
  read_feature_keys(c, s, sec);
  s.finish();
  c.cfg.resolved[key] = s.out();
}

void read_activation_checkpointing(Ctx& c, Section& top) {
  read_feature_section(c, top, "activation_checkpointing", FeatureSec::kAC, Section::Kind::kLoose, false);
  // As in DeepSpeed, where it moves only the inputs of checkpointed blocks: nothing to move
  // without recompute.
  const DsConfig& g = c.cfg;
  const std::string& effective = c.opt.recompute_flag.empty() ? g.activation_recompute : c.opt.recompute_flag;
  if (g.activation_cpu_checkpointing && effective == "none")
    c.warn("activation_checkpointing.cpu_checkpointing",
           "true has no effect without activation recompute: it keeps recomputed blocks' inputs in host memory "
           "(as DeepSpeed does for checkpointed blocks only); turn recompute on with zerotrain_recompute \"block\" "
           "or \"selective\", number_checkpoints >= 1, or train --recompute block|selective");
}

// flops_profiler (feature_keys.h FP): kept as given; DeepSpeed ORs its `enabled` into
// wall_clock_breakdown.
void read_flops_profiler(Ctx& c, Section& top) {
  read_ignored(c, top, "flops_profiler");
  if (!top.has("flops_profiler")) return;
  const Json& fp = top.in()["flops_profiler"];
  if (fp.is_object() && fp.contains("enabled") && to_bool(c, "flops_profiler.enabled", fp["enabled"])) {
    c.cfg.wall_clock_breakdown = true;
    top.put("wall_clock_breakdown", true, ConfigSource::kDerived, "flops_profiler.enabled turns it on");
    c.warn("flops_profiler", "the FLOPs profiler is not implemented by zerotrain (the progress line reports "
                             "TFLOP/s); wall_clock_breakdown is on, as in DeepSpeed");
  }
}

}  // namespace

const char* const kTopLevel = "(top level)";

std::string home_section_of(const std::string& key) {
  auto in = [&](const auto& table) { return std::find(std::begin(table), std::end(table), key) != std::end(table); };
  if (in(kZeroKeys)) return "zero_optimization";
  if (in(kFp16Keys)) return "fp16";
  if (in(kBf16Keys)) return "bf16";
  if (in(kOffloadKeys)) return "zero_optimization.offload_optimizer";
  static const std::pair<const char*, const char*> kHomes[] = {
      {"lr", "optimizer.params"}, {"betas", "optimizer.params"}, {"eps", "optimizer.params"},
      {"weight_decay", "optimizer.params"}, {"warmup_num_steps", "scheduler.params"},
      {"warmup_max_lr", "scheduler.params"}, {"total_num_steps", "scheduler.params"},
      {"train_batch_size", kTopLevel}, {"train_micro_batch_size_per_gpu", kTopLevel},
      {"gradient_accumulation_steps", kTopLevel}, {"gradient_clipping", kTopLevel}, {"steps_per_print", kTopLevel},
      {"communication_data_type", kTopLevel}, {"prescale_gradients", kTopLevel},
      {"gradient_predivide_factor", kTopLevel}, {"wall_clock_breakdown", kTopLevel}};
  for (const auto& [k, home] : kHomes) {
    if (key == k) return home;
  }
  return "";
}

void read_other_sections(Ctx& c, Section& top) {
  read_activation_checkpointing(c, top);
  // comms_logger (DeepSpeed's pydantic section: strict keys): a per-op summary at the end of the
  // run from the communicator's log (docs/observability.md).
  read_feature_section(c, top, "comms_logger", FeatureSec::kCL, Section::Kind::kStrict, true);
  read_feature_section(c, top, "checkpoint", FeatureSec::kCK, Section::Kind::kLoose, false);
  read_monitors(c, top);
#define ZT_UNSUPPORTED_SECTION(key, what, keys, probe) read_unsupported(c, top, #key, what, keys);
#define ZT_IGNORED_SECTION(key) read_ignored(c, top, #key);
#include "zerotrain/config/section_keys.h"
  read_flops_profiler(c, top);
}

namespace {

void check_master_weights(Ctx& c, const DsConfig& g, int stage) {
  if (g.fp16.fp16_master_weights_and_grads && stage == 0) {
    c.error("fp16.fp16_master_weights_and_grads",
            "found true with zero_optimization.stage 0; expected ZeRO stage 1, 2 or 3 "
            "(Fp16_master_weights_and_grads is only supported with ZeRO Stage 1, 2, or 3)");
  }
  if (g.bf16.bf16_master_weights_and_grads && stage == 0) {
    c.error("bf16.bf16_master_weights_and_grads",
            "found true with zero_optimization.stage 0; expected ZeRO stage 1, 2 or 3 "
            "(Bf16_master_weights_and_grads is only supported with ZeRO Stage 1, 2, or 3)");
  }
  if (g.bf16.bf16_optimizer_states && (stage == 0 || !g.bf16.bf16_master_weights_and_grads)) {
    c.error("bf16.bf16_optimizer_states", stage == 0
                ? "requires ZeRO stage 1, 2 or 3"
                : "found true; expected bf16_master_weights_and_grads true as well (bf16_optimizer_states "
                  "requires bf16_master_weights_and_grads to be enabled)");
  }
}

// Rules DeepSpeed applies when it builds the engine or the optimizer for stages 2-3.
void check_reduction_rules(Ctx& c, const DsConfig& g, int stage) {
  if (!g.managed_gradient_accumulation && g.zero.overlap_comm && stage != 2) {
    c.error("managed_gradient_accumulation", "false supports ZeRO overlap_comm only with ZeRO stage 2 (stage is " +
            std::to_string(stage) + "; DeepSpeed rejects this when it builds the engine)");
  }
  if (g.gradient_allreduce_op == "sum" && stage == 3) {
    c.error("gradient_allreduce_op", "\"sum\" is not supported with ZeRO stage 3 (DeepSpeed rejects it too)");
  }
  if (!(stage == 2 || stage == 3) || !g.zero.reduce_scatter) return;
  if (g.gradient_predivide_factor != 1.0) {
    c.error("gradient_predivide_factor", "found " + describe(Json(g.gradient_predivide_factor)) +
            "; expected 1.0 with ZeRO stage " + std::to_string(stage) + " and reduce_scatter (DeepSpeed rejects this "
            "when it builds the optimizer)");
  }
  if (g.prescale_gradients) {
    c.error("prescale_gradients", "true is not supported with ZeRO stage " + std::to_string(stage) +
            " and reduce_scatter (DeepSpeed rejects this when it builds the optimizer)");
  }
}

void check_grad_accum_dtype(Ctx& c, const DsConfig& g, int stage) {
  if (stage != 0 || !g.grad_accum_dtype) return;
  DType model = g.fp16.enabled ? DType::F16 : g.bf16.enabled ? DType::BF16 : DType::F32;
  if (*g.grad_accum_dtype != model) {
    c.error("data_types.grad_accum_dtype",
            std::string("found \"") + dtype_name(*g.grad_accum_dtype) + "\"; expected \"" + dtype_name(model) +
            "\" (the model dtype) without ZeRO (DeepSpeed: unsupported mix of model dtype and grad_accum_dtype)");
  }
}

}  // namespace

void check_combinations(Ctx& c) {
  const DsConfig& g = c.cfg;
  check_master_weights(c, g, g.zero.stage);
  check_reduction_rules(c, g, g.zero.stage);
  check_grad_accum_dtype(c, g, g.zero.stage);
}

}  // namespace zt::cfg
