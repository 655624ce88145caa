// cfg_zero.cpp — zero_optimization with offload_param / offload_optimizer (docs/config.md
// §8), its aliases, deprecated keys, the legacy boolean form, and the "auto" bucket rules.
#include <algorithm>

#include "config_reader.h"

namespace zt::cfg {
namespace {

const Section::IntRule kNonNeg{BoolAsInt::kAccept, 0};

std::string read_device(Ctx& c, Section& s) {
  Section::Lookup l = s.take("device");
  std::string dev = "none";
  if (l.present()) {
    std::string p = s.key_path(l.key);
    const Json& v = *l.value;
    if (!v.is_string() || (v != "none" && v != "cpu" && v != "nvme")) {
      c.fail(p, v, "one of \"none\", \"cpu\", \"nvme\" (lower case)");
    }
    dev = v.get<std::string>();
    if (dev == "nvme") {
      c.error(p, "\"nvme\" offload is not supported by zerotrain; use \"cpu\" or \"none\"");
    }
  }
  s.put_lookup("device", dev, l);
  return dev;
}

std::optional<std::string> read_nvme_path(Ctx& c, Section& s) {
  Section::Lookup l = s.take("nvme_path");
  if (!l.present() || l.value->is_null()) {
    s.put_lookup("nvme_path", nullptr, l);
    return std::nullopt;
  }
  if (!l.value->is_string()) c.fail(s.key_path(l.key), *l.value, "a path (a string) or null");
  s.put_lookup("nvme_path", *l.value, l);
  return l.value->get<std::string>();
}

double read_fraction(Ctx& c, Section& s, const std::string& key, double def) {
  Section::Lookup l = s.take(key);
  double v = def;
  if (l.present()) {
    std::string p = s.key_path(l.key);
    v = to_float(c, p, *l.value, true, true);
    if (!(v >= 0.0 && v <= 1.0)) c.fail(p, *l.value, "a number in [0, 1]");
  }
  s.put_lookup(key, v, l);
  return v;
}

// `v`: the section's value (object, or null meaning "no offload"). Returns the resolved JSON.
Json read_offload_param(Ctx& c, const Json& v, const std::string& path, std::optional<OffloadParamConfig>* out) {
  if (v.is_null()) return nullptr;
  if (!v.is_object()) c.fail(path, v, "an object or null");
  Section s(c, &v, path, Section::Kind::kStrict);
  OffloadParamConfig o;
  o.device = read_device(c, s);
  o.nvme_path = read_nvme_path(c, s);
  o.buffer_count = s.get_int("buffer_count", ds_defaults::kOffloadParamBufferCount, kNonNeg);
  o.buffer_size = s.get_int("buffer_size", ds_defaults::kOffloadParamBufferSize, kNonNeg);
  o.max_in_cpu = s.get_int("max_in_cpu", ds_defaults::kMaxInCpu, kNonNeg);
  o.pin_memory = s.get_bool("pin_memory", ds_defaults::kOffloadPinMemory);
  s.finish();
  *out = o;
  return s.out();
}

Json read_offload_optimizer(Ctx& c, const Json& v, const std::string& path,
                            std::optional<OffloadOptimizerConfig>* out) {
  if (v.is_null()) return nullptr;
  if (!v.is_object()) c.fail(path, v, "an object or null");
  Section s(c, &v, path, Section::Kind::kStrict);
  OffloadOptimizerConfig o;
  o.device = read_device(c, s);
  o.nvme_path = read_nvme_path(c, s);
  o.buffer_count = s.get_int("buffer_count", ds_defaults::kOffloadOptimizerBufferCount, kNonNeg);
  o.pin_memory = s.get_bool("pin_memory", ds_defaults::kOffloadPinMemory);
  o.pipeline_read = s.get_bool("pipeline_read", false);
  o.pipeline_write = s.get_bool("pipeline_write", false);
  o.fast_init = s.get_bool("fast_init", false);
  o.ratio = read_fraction(c, s, "ratio", ds_defaults::kOffloadOptimizerRatio);
  o.super_offload = s.get_bool("super_offload", false);
  o.cpuadam_cores_perc = read_fraction(c, s, "cpuadam_cores_perc", ds_defaults::kCpuadamCoresPerc);
  s.finish();
  if (o.super_offload) c.error(s.key_path("super_offload"), "true is not supported by zerotrain (SuperOffload)");
  *out = o;
  return s.out();
}

void reject_enabled(Ctx& c, const std::string& path, const std::string& what) {
  c.error(path, what + " is not supported by zerotrain; remove it or set it to its default");
}

}  // namespace

void read_zero(Ctx& c, Section& top) {
  ZeroConfig& z = c.cfg.zero;
  Section::Lookup lz = top.take("zero_optimization");
  Section::Lookup lsize = top.take("allgather_size");
  Json legacy;  // synthesized object for "zero_optimization": true/false
  const Json* zin = nullptr;
  bool legacy_true = false;
  if (lz.present()) {
    const Json& v = *lz.value;
    if (v.is_boolean()) {
      legacy = Json::object();
      if (v.get<bool>()) {
        legacy_true = true;
        legacy["stage"] = 1;
        legacy["allgather_bucket_size"] = lsize.present() ? *lsize.value : Json(ds_defaults::kAllgatherBucketSize);
        c.warn("zero_optimization", "the boolean form is deprecated; true means {\"stage\": 1}");
      }
      zin = &legacy;
    } else if (v.is_object()) {
      zin = &v;
    } else {
      c.fail("zero_optimization", v, "an object (e.g. {\"stage\": 2})");
    }
  }
  Section s(c, zin, "zero_optimization", Section::Kind::kStrict);
  {
    Section::Lookup l = s.take("stage");
    int64_t st = 0;
    if (l.present()) {
      std::string p = s.key_path(l.key);
      if (l.value->is_null()) c.fail(p, *l.value, "0, 1, 2 or 3");
      st = to_int(c, p, *l.value, BoolAsInt::kAccept);
      if (st < 0 || st > 3) c.fail(p, *l.value, "0, 1, 2 or 3");
    }
    z.stage = static_cast<int>(st);
    if (legacy_true) s.put("stage", st, ConfigSource::kDerived, "legacy \"zero_optimization\": true");
    else s.put_lookup("stage", st, l);
  }
  z.contiguous_gradients = s.get_bool("contiguous_gradients", ds_defaults::kContiguousGradients);
  z.reduce_scatter = s.get_bool("reduce_scatter", ds_defaults::kReduceScatter);
  const std::optional<int64_t>& h = c.opt.hidden_size;
  if (h) {
    std::string hs = std::to_string(*h);
    s.auto_rule("reduce_bucket_size", *h * *h, "\"auto\" -> h*h with hidden size h = " + hs);
    s.auto_rule("stage3_prefetch_bucket_size", (9 * *h * *h) / 10, "\"auto\" -> floor(0.9*h*h) with hidden size h = " + hs);
    s.auto_rule("stage3_param_persistence_threshold", 10 * *h, "\"auto\" -> 10*h with hidden size h = " + hs);
  }
  z.reduce_bucket_size = s.get_int("reduce_bucket_size", ds_defaults::kReduceBucketSize, kNonNeg);
  z.use_multi_rank_bucket_allreduce = s.get_bool("use_multi_rank_bucket_allreduce", ds_defaults::kUseMultiRankBucketAllreduce);
  z.allgather_partitions = s.get_bool("allgather_partitions", ds_defaults::kAllgatherPartitions);
  z.allgather_bucket_size = s.get_int("allgather_bucket_size", ds_defaults::kAllgatherBucketSize, kNonNeg);
  if (legacy_true) {
    c.record("zero_optimization.allgather_bucket_size", lsize.present() ? ConfigSource::kFile : ConfigSource::kDefault,
             "legacy \"zero_optimization\": true takes top-level allgather_size");
  }
  {
    Section::Lookup l = s.take("overlap_comm");
    bool v = z.stage == 3;
    std::string note = "null -> true iff stage == 3";
    if (l.present() && !l.value->is_null()) {
      v = to_bool(c, s.key_path(l.key), *l.value);
      s.put_lookup("overlap_comm", v, l);
    } else {
      s.put("overlap_comm", v, l.source == ConfigSource::kFile ? ConfigSource::kDerived : l.source,
            l.source == ConfigSource::kAuto ? "\"auto\" -> true iff stage == 3" : note);
    }
    z.overlap_comm = v;
  }
  z.load_from_fp32_weights = s.get_bool("load_from_fp32_weights", ds_defaults::kLoadFromFp32Weights);
  z.elastic_checkpoint = s.get_bool("elastic_checkpoint", ds_defaults::kElasticCheckpoint);

  // Deprecated spellings (§8): both the old and the new key given is an error even when the
  // old one is false (§17.3).
  Section::Lookup l_cpu_off = s.take("cpu_offload");
  Section::Lookup l_cpu_off_param = s.take("cpu_offload_param");
  Section::Lookup l_pin = s.take("cpu_offload_use_pin_memory");
  Section::Lookup l_ofo = s.take("offload_optimizer");
  Section::Lookup l_ofp = s.take("offload_param");
  auto deprecated_pair = [&](const Section::Lookup& old_l, const char* old_key, const Section::Lookup& new_l,
                             const char* new_key) -> bool {
    if (!s.has_value(old_key)) return false;
    if (s.has_value(new_key)) {
      c.error(s.key_path(old_key), std::string("deprecated; cannot be given together with its replacement `") +
                                       new_key + "` (DeepSpeed rejects this too); keep only `" + new_key + "`");
    }
    c.warn(s.key_path(old_key), std::string("deprecated; use `") + new_key + "` instead");
    return old_l.present() && to_bool(c, s.key_path(old_key), *old_l.value);
  };
  const Json cpu_device = Json{{"device", "cpu"}};
  if (deprecated_pair(l_cpu_off, "cpu_offload", l_ofo, "offload_optimizer")) {
    s.out()["offload_optimizer"] = read_offload_optimizer(c, cpu_device, s.key_path("offload_optimizer"), &z.offload_optimizer);
    c.record(s.key_path("offload_optimizer"), ConfigSource::kDerived, "deprecated cpu_offload: true");
  } else {
    s.out()["offload_optimizer"] = l_ofo.present() ? read_offload_optimizer(c, *l_ofo.value, s.key_path("offload_optimizer"), &z.offload_optimizer) : Json(nullptr);
    if (!l_ofo.present()) c.record(s.key_path("offload_optimizer"), l_ofo.source, l_ofo.note);
  }
  if (deprecated_pair(l_cpu_off_param, "cpu_offload_param", l_ofp, "offload_param")) {
    s.out()["offload_param"] = read_offload_param(c, cpu_device, s.key_path("offload_param"), &z.offload_param);
    c.record(s.key_path("offload_param"), ConfigSource::kDerived, "deprecated cpu_offload_param: true");
  } else {
    s.out()["offload_param"] = l_ofp.present() ? read_offload_param(c, *l_ofp.value, s.key_path("offload_param"), &z.offload_param) : Json(nullptr);
    if (!l_ofp.present()) c.record(s.key_path("offload_param"), l_ofp.source, l_ofp.note);
  }
  if (l_pin.present()) {
    to_bool(c, s.key_path(l_pin.key), *l_pin.value);
    c.warn(s.key_path(l_pin.key), "deprecated and unused; use offload_optimizer.pin_memory / offload_param.pin_memory");
  }

  Section::Lookup l_zen = s.take("zenflow");
  if (l_zen.present() && !l_zen.value->is_null()) reject_enabled(c, s.key_path("zenflow"), "ZenFlow");
  s.put_lookup("zenflow", nullptr, l_zen);
  z.sub_group_size = s.get_int("sub_group_size", ds_defaults::kSubGroupSize, kNonNeg);
  z.stage3_prefetch_bucket_size = s.get_int("stage3_prefetch_bucket_size", ds_defaults::kStage3PrefetchBucketSize, kNonNeg, "prefetch_bucket_size");
  z.stage3_param_persistence_threshold =
      s.get_int("stage3_param_persistence_threshold", ds_defaults::kStage3ParamPersistenceThreshold, kNonNeg, "param_persistence_threshold");
  z.stage3_model_persistence_threshold =
      s.get_int("stage3_model_persistence_threshold", ds_defaults::kStage3ModelPersistenceThreshold, kNonNeg, "model_persistence_threshold");
  z.stage3_max_live_parameters = s.get_int("stage3_max_live_parameters", ds_defaults::kStage3MaxLiveParameters, kNonNeg, "max_live_parameters");
  z.stage3_max_reuse_distance = s.get_int("stage3_max_reuse_distance", ds_defaults::kStage3MaxReuseDistance, kNonNeg, "max_reuse_distance");
  {
    Section::Lookup l_old = s.take("stage3_gather_fp16_weights_on_model_save");
    bool both_new = s.has_value("stage3_gather_16bit_weights_on_model_save") ||
                    s.has_value("gather_16bit_weights_on_model_save");
    if (s.has_value("stage3_gather_fp16_weights_on_model_save")) {
      if (both_new) {
        c.error(s.key_path("stage3_gather_fp16_weights_on_model_save"),
                "deprecated; cannot be given together with its replacement `stage3_gather_16bit_weights_on_model_save` "
                "(DeepSpeed rejects this too); keep only the 16bit key");
      }
      c.warn(s.key_path("stage3_gather_fp16_weights_on_model_save"),
             "deprecated; use `stage3_gather_16bit_weights_on_model_save` instead");
      bool v = l_old.present() && to_bool(c, s.key_path("stage3_gather_fp16_weights_on_model_save"), *l_old.value);
      s.take("stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save");
      s.put("stage3_gather_16bit_weights_on_model_save", v, ConfigSource::kDerived,
            "from deprecated stage3_gather_fp16_weights_on_model_save");
      z.stage3_gather_16bit_weights_on_model_save = v;
    } else {
      z.stage3_gather_16bit_weights_on_model_save =
          s.get_bool("stage3_gather_16bit_weights_on_model_save", ds_defaults::kStage3Gather16bitWeightsOnModelSave, "gather_16bit_weights_on_model_save");
    }
  }
  z.stage3_module_granularity_threshold =
      s.get_int("stage3_module_granularity_threshold", ds_defaults::kStage3ModuleGranularityThreshold, {}, "module_granularity_threshold");
  z.stage3_use_all_reduce_for_fetch_params =
      s.get_bool("stage3_use_all_reduce_for_fetch_params", ds_defaults::kStage3UseAllReduceForFetchParams, "use_all_reduce_for_fetch_params");
  z.stage3_allgather_sequential = s.get_bool("stage3_allgather_sequential", ds_defaults::kStage3AllgatherSequential, "allgather_sequential");
  z.ignore_unused_parameters = s.get_bool("ignore_unused_parameters", ds_defaults::kIgnoreUnusedParameters);
  bool legacy_stage1 = s.get_bool("legacy_stage1", false);
  z.round_robin_gradients = s.get_bool("round_robin_gradients", ds_defaults::kRoundRobinGradients);
  int64_t hpz = s.get_int("zero_hpz_partition_size", 1, kNonNeg);
  bool qw = s.get_bool("zero_quantized_weights", false);
  bool qnw = s.get_bool("zero_quantized_nontrainable_weights", false);
  bool qg = s.get_bool("zero_quantized_gradients", false);
  Section::Lookup l_loco = s.take("zeropp_loco_param");
  if (l_loco.present() && !l_loco.value->is_null() && !l_loco.value->is_object()) {
    c.fail(s.key_path("zeropp_loco_param"), *l_loco.value, "an object or null");
  }
  s.put_lookup("zeropp_loco_param", l_loco.present() ? *l_loco.value : Json(nullptr), l_loco);
  int64_t mics = s.get_int("mics_shard_size", -1);
  s.get_bool("mics_hierarchical_params_gather", false);
  z.memory_efficient_linear = s.get_bool("memory_efficient_linear", ds_defaults::kMemoryEfficientLinear);
  z.pipeline_loading_checkpoint = s.get_bool("pipeline_loading_checkpoint", ds_defaults::kPipelineLoadingCheckpoint);
  s.get_bool("override_module_apply", true);
  s.get_bool("log_trace_cache_warnings", false);
  s.get_bool("enable_sanity_checks", false);
  s.get_bool("save_muon_momentum_buffer_in_memory", false);
  {
    Section::Lookup l = s.take("leaf_module");
    Json lm = Json::object();
    const Json empty = Json::object();
    if (l.present() && !l.value->is_object()) c.fail(s.key_path("leaf_module"), *l.value, "an object");
    Section ls(c, l.present() ? l.value : &empty, s.key_path("leaf_module"), Section::Kind::kStrict);
    for (const char* k : {"classes", "names", "name_suffixes"}) {
      Section::Lookup lk = ls.take(k);
      Json list = Json::array();
      if (lk.present()) {
        if (lk.value->is_string()) list.push_back(*lk.value);
        else if (lk.value->is_array()) {
          for (const Json& e : *lk.value) {
            if (!e.is_string()) c.fail(ls.key_path(k), *lk.value, "a string or a list of strings");
            if (std::find(list.begin(), list.end(), e) == list.end()) list.push_back(e);
          }
        } else {
          c.fail(ls.key_path(k), *lk.value, "a string or a list of strings");
        }
      } else if (std::string(k) == "classes") {
        list = {"transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
                "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
                "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"};
      }
      ls.put_lookup(k, list, lk);
    }
    ls.finish();
    s.out()["leaf_module"] = ls.out();
  }
  s.finish();

  // Model-level rules, then zerotrain's "known but not supported" policy.
  if (z.offload_optimizer && z.offload_optimizer->ratio < 1.0) {
    if (z.stage != 3) {
      c.error("zero_optimization.offload_optimizer.ratio",
              "found " + describe(s.out()["offload_optimizer"]["ratio"]) +
                  "; expected 1.0 below stage 3 (Partial offloading only supported for ZeRO Stage 3)");
    }
    reject_enabled(c, "zero_optimization.offload_optimizer.ratio", "partial optimizer offload (ratio < 1)");
  }
  if (z.stage == 3 && z.elastic_checkpoint) {
    c.warn("zero_optimization.elastic_checkpoint", "ZeRO-3 elastic checkpointing is deprecated (ignored)");
  }
  if (legacy_stage1) reject_enabled(c, "zero_optimization.legacy_stage1", "legacy_stage1 (also rejected by DeepSpeed since 0.5.9)");
  if (qw) reject_enabled(c, "zero_optimization.zero_quantized_weights", "ZeRO++ quantized weights (qwZ)");
  if (qnw) reject_enabled(c, "zero_optimization.zero_quantized_nontrainable_weights", "ZeRO++ quantized weights");
  if (qg) reject_enabled(c, "zero_optimization.zero_quantized_gradients", "ZeRO++ quantized gradients (qgZ)");
  if (hpz > 1) reject_enabled(c, "zero_optimization.zero_hpz_partition_size", "ZeRO++ hierarchical partitioning (hpZ > 1)");
  if (l_loco.present() && l_loco.value->is_object()) reject_enabled(c, "zero_optimization.zeropp_loco_param", "ZeRO++ LoCo");
  if (mics > 0) reject_enabled(c, "zero_optimization.mics_shard_size", "MiCS (mics_shard_size > 0)");
  if (z.params_offloaded() && z.stage != 3) {
    c.warn("zero_optimization.offload_param", "only used by stage 3; ignored at stage " + std::to_string(z.stage));
  }
  c.cfg.resolved["zero_optimization"] = s.out();
}

}  // namespace zt::cfg
