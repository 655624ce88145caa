// dataset.cpp — the --data spec parser and the batch split convention (dataset.h).
#include "zerotrain/data/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "file_spec.h"
#include "zerotrain/core/check.h"
#include "zerotrain/data/markov.h"
#include "zerotrain/data/teacher.h"

namespace zt {

void fill_token_batch(int64_t count, int64_t T, const std::function<void(int64_t i, int32_t* seq)>& sequence,
                      Batch& out) {
  out.B = count;
  out.T = T;
  out.inputs.resize(static_cast<size_t>(count * T));
  out.targets.resize(static_cast<size_t>(count * T));
  out.features.clear();
  out.targets_f.clear();
  std::vector<int32_t> seq(static_cast<size_t>(T + 1));
  for (int64_t s = 0; s < count; ++s) {
    sequence(s, seq.data());
    std::copy(seq.begin(), seq.end() - 1, out.inputs.begin() + s * T);
    std::copy(seq.begin() + 1, seq.end(), out.targets.begin() + s * T);
  }
}

namespace {

// key=value pairs of a markov:/teacher: spec; unknown or repeated keys are errors.
class SpecArgs {
 public:
  SpecArgs(const std::string& spec, const std::string& body, std::initializer_list<const char*> known)
      : spec_(spec) {
    size_t pos = 0;
    while (pos < body.size()) {
      size_t comma = body.find(',', pos);
      std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? body.size() : comma + 1;
      if (item.empty()) continue;
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        throw InputError("--data '" + spec_ + "': expected key=value, found '" + item + "'");
      std::string key = item.substr(0, eq);
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) {
        std::string list;
        for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
        throw InputError("--data '" + spec_ + "': unknown key '" + key + "' (known: " + list + ")");
      }
      if (values_.count(key)) throw InputError("--data '" + spec_ + "': key '" + key + "' given twice");
      values_[key] = item.substr(eq + 1);
    }
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || errno != 0)
      throw InputError("--data '" + spec_ + "': " + key + " must be an integer, found '" + it->second + "'");
    return v;
  }
  uint64_t unsigned_integer(const std::string& key, uint64_t fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
    if (it->second.empty() || it->second[0] == '-' || *end != '\0' || errno != 0)
      throw InputError("--data '" + spec_ + "': " + key + " must be a non-negative integer, found '" + it->second + "'");
    return v;
  }
  double number(const std::string& key, double fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
      throw InputError("--data '" + spec_ + "': " + key + " must be a number, found '" + it->second + "'");
    return v;
  }

 private:
  std::string spec_;
  std::map<std::string, std::string> values_;
};

void require_token_model(const std::string& spec, const DatasetShape& shape) {
  if (shape.vocab_size <= 0 || shape.n_ctx <= 0)
    throw InputError("--data '" + spec + "': token data needs a token model (GPT or Llama: vocab_size and n_ctx)");
}

}  // namespace

std::unique_ptr<Dataset> make_dataset(const std::string& spec, const DatasetShape& shape) {
  if (shape.global_batch <= 0) throw InputError("--data '" + spec + "': the global batch size must be > 0");
  size_t colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  std::string body = colon == std::string::npos ? std::string() : spec.substr(colon + 1);
  if (kind == "markov") {
    require_token_model(spec, shape);
    SpecArgs a(spec, body, {"vocab", "order", "seed", "temperature"});
    int64_t vocab = a.integer("vocab", shape.vocab_size);
    int64_t order = a.integer("order", 1);
    if (vocab > shape.vocab_size)
      throw InputError("--data '" + spec + "': vocab " + std::to_string(vocab) + " exceeds the model's vocab_size " +
                       std::to_string(shape.vocab_size));
    if (order < 0 || order > 16)
      throw InputError("--data '" + spec + "': order must be in 0..16, found " + std::to_string(order));
    return std::make_unique<MarkovDataset>(vocab, static_cast<int>(order), a.unsigned_integer("seed", shape.seed),
                                           a.number("temperature", 0.5), shape.n_ctx, shape.global_batch);
  }
  if (kind == "teacher") {
    if (shape.mlp_dims.size() < 2)
      throw InputError("--data '" + spec + "': teacher data needs an MLP model (dims [in, ..., out])");
    if (shape.mlp_classification)
      throw InputError("--data '" + spec + "': teacher data is regression; the MLP's task is classification");
    SpecArgs a(spec, body, {"noise", "seed"});
    double noise = a.number("noise", 0.1);
    if (noise < 0) throw InputError("--data '" + spec + "': noise must be >= 0");
    return std::make_unique<TeacherDataset>(shape.mlp_dims, shape.mlp_relu, noise, a.unsigned_integer("seed", shape.seed),
                                            shape.global_batch);
  }
  if (kind == "text" || kind == "tokens" || kind == "jsonl") {
    require_token_model(spec, shape);
    if (colon == std::string::npos || body.empty())
      throw InputError("--data '" + spec + "': expected " + kind + ":PATH");
    return make_file_dataset(spec, kind, body, shape);
  }
  throw InputError("--data '" + spec + "': unknown data kind '" + kind +
                   "' (expected markov:, teacher:, text:PATH, tokens:PATH or jsonl:PATH)");
}

void check_data_cursor(int64_t steps, int64_t global_batch) {
  ZT_CHECK(global_batch > 0, "check_data_cursor: train_batch_size must be > 0");
  if (steps > kMaxDataSamples / global_batch)
    throw InputError("train: --steps " + std::to_string(steps) + " x train_batch_size " + std::to_string(global_batch) +
                     " samples is beyond the data cursor's range (2^62 samples); expected --steps <= " +
                     std::to_string(kMaxDataSamples / global_batch));
}

int64_t sample_range(int rank, int world, int micro_step, int gas, int64_t mbs) {
  ZT_CHECK(world > 0 && rank >= 0 && rank < world, "sample_range: rank outside the world");
  ZT_CHECK(gas > 0 && micro_step >= 0 && micro_step < gas, "sample_range: micro_step outside 0..gas-1");
  return (static_cast<int64_t>(rank) * gas + micro_step) * mbs;
}

}  // namespace zt
