// param_reader.h — typed access to a DeepSpeed `params` object (optimizer or scheduler),
// private to csrc/config (optim_inputs.cpp, sched_inputs.cpp). Keys are kwargs in DeepSpeed: an unknown key is an error (TypeError
// there, InputError here), a missing key takes the documented default.
#pragma once
#include <cmath>
#include <set>
#include <string>

#include "zerotrain/config/hjson.h"

#include "zerotrain/core/check.h"

namespace zt::cfg {

class ParamReader {
 public:
  // where: JSON path prefix for messages, e.g. "scheduler.params" (WarmupLR).
  ParamReader(const Json& params, std::string where, std::string owner)
      : params_(params), where_(std::move(where)), owner_(std::move(owner)) {
    if (!params_.is_null() && !params_.is_object())
      throw InputError(where_ + ": expected an object of " + owner_ + " parameters, found " + params_.dump());
  }

  // Present with a non-null value.
  bool has(const std::string& key) const {
    return params_.is_object() && params_.contains(key) && !params_.at(key).is_null();
  }
  // Present, possibly null. An explicit null is an error unless the reader allows it (DeepSpeed
  // passes None through as a kwarg; only some parameters give None a meaning).
  bool present(const std::string& key) const { return params_.is_object() && params_.contains(key); }
  // A number, or a one-element list (DeepSpeed's per-param-group form; we have one group).
  // null_is_default: an explicit null means "use the default" (e.g. warmup_max_lr: None).
  double number(const std::string& key, double fallback, bool null_is_default = false) {
    used_.insert(key);
    if (!present(key)) return fallback;
    if (params_.at(key).is_null()) {
      if (null_is_default) return fallback;
      throw InputError(where_ + "." + key + ": expected a number, found null");
    }
    return as_number(key, params_.at(key));
  }
  double required_number(const std::string& key) {
    used_.insert(key);
    if (!has(key)) throw InputError(where_ + "." + key + ": required by " + owner_ + " but missing");
    return as_number(key, params_.at(key));
  }
  // A JSON integer (not a float like 1e3, not a bool), as DeepSpeed's int validation.
  int64_t integer(const std::string& key, int64_t fallback) {
    used_.insert(key);
    if (!present(key)) return fallback;
    const Json& v = params_.at(key);
    if (!v.is_number_integer())
      throw InputError(where_ + "." + key + ": expected an integer, found " + v.dump());
    return v.get<int64_t>();
  }
  bool boolean(const std::string& key, bool fallback) {
    used_.insert(key);
    if (!present(key)) return fallback;
    const Json& v = params_.at(key);
    if (!v.is_boolean()) throw InputError(where_ + "." + key + ": expected true or false, found " + v.dump());
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) {
    used_.insert(key);
    if (!present(key)) return fallback;
    const Json& v = params_.at(key);
    if (!v.is_string()) throw InputError(where_ + "." + key + ": expected a string, found " + v.dump());
    return v.get<std::string>();
  }
  // Marks a key as known without reading it (e.g. accepted-and-ignored kwargs).
  void accept(const std::string& key) { used_.insert(key); }
  const Json* raw(const std::string& key) {
    used_.insert(key);
    return has(key) ? &params_.at(key) : nullptr;
  }
  // Throws on the first key nobody read: DeepSpeed passes params as kwargs (TypeError).
  void reject_unknown() const {
    if (!params_.is_object()) return;
    for (auto it = params_.begin(); it != params_.end(); ++it) {
      if (!used_.count(it.key()))
        throw InputError(where_ + "." + it.key() + ": unknown parameter for " + owner_);
    }
  }
  const std::string& where() const { return where_; }

 private:
  double as_number(const std::string& key, const Json& v0) const {
    const Json* v = &v0;
    if (v->is_array()) {
      if (v->size() != 1)
        throw InputError(where_ + "." + key + ": a list needs one entry per parameter group (zerotrain has 1), found " +
                         std::to_string(v->size()));
      v = &(*v)[0];
    }
    if (!v->is_number() || v->is_boolean())
      throw InputError(where_ + "." + key + ": expected a number, found " + v0.dump());
    double d = v->get<double>();
    if (!std::isfinite(d)) throw InputError(where_ + "." + key + ": expected a finite number, found " + v0.dump());
    return d;
  }

  const Json& params_;
  std::string where_, owner_;
  std::set<std::string> used_;
};

}  // namespace zt::cfg
