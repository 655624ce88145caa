// sampler.h — choosing the next token from a row of logits: greedy (temperature 0), or a seeded
// draw from softmax(logits / temperature) restricted by top-k and top-p (nucleus).
//
// Order: temperature, then top-k (the k largest logits; ties broken by the lower id), then top-p
// (of those, renormalised, the smallest prefix in descending probability whose mass is >= p),
// then one draw from the renormalised survivors. Probabilities are computed in double.
//
// Determinism: draw i under seed s uses the uniform sampling_uniform(s, i), a pure function of
// (s, i) (splitmix64 counters, init_rng.h), so the same seed, logits and index give the same
// token on any machine, backend and run.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace zt {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0 = greedy argmax (top_k, top_p and seed unused)
  int64_t top_k = 0;         // >= 0; 0 = every token
  double top_p = 1.0;        // in (0, 1]; 1 = no nucleus cut
  uint64_t seed = 0;
};

// InputError naming the flag (--temperature, --top-k, --top-p) when a value is out of range.
void validate_sampling_options(const SamplingOptions& o, const char* command);

// The index of the largest logit; the lowest index among equal maxima.
int32_t argmax_token(const std::vector<float>& logits);

// The tokens a draw can return and their probabilities (summing to 1), in descending
// probability (ties: lower id first), after temperature, top-k and top-p. temperature > 0.
std::vector<std::pair<int32_t, double>> sampling_distribution(const std::vector<float>& logits,
                                                              const SamplingOptions& o);

// Uniform in [0, 1) with 53 random bits for draw `index` under `seed`.
double sampling_uniform(uint64_t seed, uint64_t index);

// The token for draw `index` (0 for the first generated token, 1 for the next, ...).
int32_t sample_token(const std::vector<float>& logits, const SamplingOptions& o, uint64_t index);

}  // namespace zt
