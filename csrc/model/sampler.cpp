// sampler.cpp — temperature, top-k, top-p and the seeded draw (sampler.h).
#include "zerotrain/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "zerotrain/core/check.h"
#include "zerotrain/model/init_rng.h"

namespace zt {
namespace {
constexpr uint64_t kSampleStream = 0x53414d504c494e47ull;  // "SAMPLING": separates these draws from init's
}  // namespace

void validate_sampling_options(const SamplingOptions& o, const char* command) {
  const std::string c = command;
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    throw InputError(c + ": --temperature " + std::to_string(o.temperature) + ": expected a finite number >= 0 (0 = greedy)");
  if (o.top_k < 0) throw InputError(c + ": --top-k " + std::to_string(o.top_k) + ": expected an integer >= 0 (0 = no limit)");
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw InputError(c + ": --top-p " + std::to_string(o.top_p) + ": expected a probability in (0, 1]");
}

int32_t argmax_token(const std::vector<float>& logits) {
  ZT_CHECK(!logits.empty(), "argmax_token: no logits");
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<std::pair<int32_t, double>> sampling_distribution(const std::vector<float>& logits,
                                                              const SamplingOptions& o) {
  ZT_CHECK(!logits.empty() && o.temperature > 0, "sampling_distribution: needs logits and a temperature > 0");
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const size_t k = o.top_k > 0 ? std::min(logits.size(), static_cast<size_t>(o.top_k)) : logits.size();
  const double top = logits[order[0]];
  std::vector<std::pair<int32_t, double>> out;
  double sum = 0;
  for (size_t i = 0; i < k; ++i) {
    const double w = std::exp((static_cast<double>(logits[order[i]]) - top) / o.temperature);
    out.emplace_back(order[i], w);
    sum += w;
  }
  for (auto& e : out) e.second /= sum;
  if (o.top_p < 1) {  // the smallest prefix whose mass reaches top_p
    double mass = 0;
    size_t keep = 0;
    while (keep < out.size() && mass < o.top_p) mass += out[keep++].second;
    out.resize(std::max<size_t>(keep, 1));
    double kept = 0;
    for (const auto& e : out) kept += e.second;
    for (auto& e : out) e.second /= kept;
  }
  return out;
}

double sampling_uniform(uint64_t seed, uint64_t index) {
  const uint64_t h = splitmix64(splitmix64(seed ^ kSampleStream) + index);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

int32_t sample_token(const std::vector<float>& logits, const SamplingOptions& o, uint64_t index) {
  if (o.temperature == 0) return argmax_token(logits);
  const std::vector<std::pair<int32_t, double>> d = sampling_distribution(logits, o);
  const double u = sampling_uniform(o.seed, index);
  double cum = 0;
  for (const auto& e : d) {
    cum += e.second;
    if (u < cum) return e.first;
  }
  return d.back().first;  // u within rounding of 1
}

}  // namespace zt
