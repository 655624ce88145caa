// markov.cpp — random Markov-chain token data and its exact best loss.
#include "zerotrain/data/markov.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "zerotrain/core/check.h"
#include "counter_rng.h"

namespace zt {

MarkovDataset::MarkovDataset(int64_t vocab, int order, uint64_t seed, double temperature, int64_t n_ctx,
                             int64_t global_batch)
    : vocab_(vocab), order_(order), seed_(seed), temperature_(temperature), T_(n_ctx), B_(global_batch) {
  if (vocab_ < 2) throw InputError("markov data: vocab must be >= 2, found " + std::to_string(vocab_));
  if (order_ < 0) throw InputError("markov data: order must be >= 0, found " + std::to_string(order_));
  if (!(temperature_ > 0) || !std::isfinite(temperature_))
    throw InputError("markov data: temperature must be a positive number");
  if (T_ < 1) throw InputError("markov data: the model's n_ctx must be >= 1");
  int64_t entries = vocab_;
  for (int i = 0; i < order_; ++i) {
    if (entries > kMaxTableEntries / vocab_)
      throw InputError("markov data: vocab^(order+1) = " + std::to_string(vocab_) + "^" + std::to_string(order_ + 1) +
                       " exceeds the table limit " + std::to_string(kMaxTableEntries) + "; lower vocab or order");
    entries *= vocab_;
    contexts_ *= vocab_;
  }
  build_table();
  compute_best_loss();
}

void MarkovDataset::build_table() {
  cdf_.resize(static_cast<size_t>(contexts_ * vocab_));
  std::vector<double> logits(static_cast<size_t>(vocab_));
  for (int64_t c = 0; c < contexts_; ++c) {
    double zmax = -INFINITY;
    for (int64_t j = 0; j < vocab_; ++j) {
      logits[j] = data_rng::normal(seed_, data_rng::kMarkovTable, static_cast<uint64_t>(c), static_cast<uint64_t>(j)) /
                  temperature_;
      zmax = std::max(zmax, logits[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < vocab_; ++j) sum += (logits[j] = std::exp(logits[j] - zmax));
    double* row = &cdf_[static_cast<size_t>(c * vocab_)];
    double acc = 0;
    for (int64_t j = 0; j < vocab_; ++j) row[j] = (acc += logits[j] / sum);
    row[vocab_ - 1] = 1.0;  // u < 1 always lands in the row
  }
}

double MarkovDataset::prob(int64_t context, int32_t next) const {
  const double* row = &cdf_[static_cast<size_t>(context * vocab_)];
  return next == 0 ? row[0] : row[next] - row[next - 1];
}

int64_t MarkovDataset::context_at(const int32_t* tokens, int64_t n) const {
  int64_t c = 0;
  for (int64_t i = n - order_; i < n; ++i) c = c * vocab_ + tokens[i];
  return c;
}

// Exact expected cross-entropy per target position. Let μ_m be the distribution of the context
// window (x_m..x_{m+K-1}); μ_0 is uniform (the first K tokens are iid uniform) and
//   μ_{m+1}(c') = Σ_{c, x : c' = (c mod V^{K-1})·V + x} μ_m(c) P(x | c).
// Position p predicts x_{p+1} from x_0..x_p:
//   p+1 < K:  x_{p+1} is uniform and independent of the past, H_p = ln V;
//   p+1 >= K: H_p = Σ_c μ_{p+1-K}(c) h(c),  h(c) = -Σ_x P(x|c) ln P(x|c).
// The recursion stops once μ is stationary (L1 step < 1e-12 and shrinking geometrically, or below
// the rounding floor 1e-14); later positions reuse the last value (error < 1e-11 nats).
void MarkovDataset::compute_best_loss() {
  std::vector<double> h(static_cast<size_t>(contexts_));
  for (int64_t c = 0; c < contexts_; ++c) {
    double e = 0;
    for (int64_t x = 0; x < vocab_; ++x) {
      double p = prob(c, static_cast<int32_t>(x));
      if (p > 0) e -= p * std::log(p);
    }
    h[c] = e;
  }
  position_entropy_.assign(static_cast<size_t>(T_), std::log(static_cast<double>(vocab_)));
  std::vector<double> mu(static_cast<size_t>(contexts_), 1.0 / static_cast<double>(contexts_)), next(mu.size());
  const int64_t suffix = contexts_ / vocab_ > 0 ? contexts_ / vocab_ : 1;  // V^{K-1}
  double prev_diff = INFINITY;
  bool stationary = false;
  double stationary_h = 0;
  for (int64_t p = std::max<int64_t>(0, order_ - 1); p < T_; ++p) {
    if (stationary) {
      position_entropy_[p] = stationary_h;
      continue;
    }
    double e = 0;
    for (int64_t c = 0; c < contexts_; ++c) e += mu[c] * h[c];
    position_entropy_[p] = e;
    if (order_ == 0) {
      stationary = true;
      stationary_h = e;
      continue;
    }
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t c = 0; c < contexts_; ++c) {
      const double* row = &cdf_[static_cast<size_t>(c * vocab_)];
      int64_t base = (c % suffix) * vocab_;
      double prev_cdf = 0;
      for (int64_t x = 0; x < vocab_; ++x) {
        next[base + x] += mu[c] * (row[x] - prev_cdf);
        prev_cdf = row[x];
      }
    }
    double diff = 0;
    for (int64_t c = 0; c < contexts_; ++c) diff += std::fabs(next[c] - mu[c]);
    mu.swap(next);
    // Converged: geometric decay below 1e-12 (the remaining tail sums to < 1e-12), or the
    // rounding-noise floor of a sum over V^K contexts.
    if ((diff < 1e-12 && diff <= 0.5 * prev_diff) || diff < 1e-14) {
      stationary = true;
      for (int64_t c = 0; c < contexts_; ++c) stationary_h += mu[c] * h[c];
    }
    prev_diff = diff;
  }
  double sum = 0;
  for (double e : position_entropy_) sum += e;
  best_loss_ = sum / static_cast<double>(T_);
}

void MarkovDataset::sequence(int64_t g, int32_t* tokens) const {
  const uint64_t gs = static_cast<uint64_t>(g);
  for (int64_t n = 0; n <= T_; ++n) {
    double u = data_rng::uniform(seed_, data_rng::kMarkovTokens, gs, static_cast<uint64_t>(n));
    if (n < order_) {
      tokens[n] = static_cast<int32_t>(std::min<int64_t>(vocab_ - 1, static_cast<int64_t>(u * vocab_)));
      continue;
    }
    const double* row = &cdf_[static_cast<size_t>(context_at(tokens, n) * vocab_)];
    tokens[n] = static_cast<int32_t>(std::upper_bound(row, row + vocab_, u) - row);  // first cdf > u
  }
}

void MarkovDataset::fill(int64_t k, int64_t first_sample, int64_t count, Batch& out) const {
  ZT_CHECK(first_sample >= 0 && count >= 0 && first_sample + count <= B_, "markov fill: samples outside the batch");
  fill_token_batch(count, T_, [&](int64_t i, int32_t* seq) { sequence(k * B_ + first_sample + i, seq); }, out);
}

std::string MarkovDataset::describe() const {
  std::ostringstream os;
  os << "markov: vocab " << vocab_ << ", order " << order_ << ", temperature " << temperature_ << ", seed " << seed_
     << ", " << T_ << " positions; best achievable loss " << best_loss_ << " nats (uniform: "
     << std::log(static_cast<double>(vocab_)) << ")";
  return os.str();
}

}  // namespace zt
