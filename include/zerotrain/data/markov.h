// markov.h — `markov:` data: sequences from a random order-K Markov chain over V tokens, with
// the exact best achievable mean cross-entropy (docs/data.md §markov).
//
// Chain: for every context c (the last K tokens, c = x_{n-K} V^{K-1} + … + x_{n-1}) the next-token
// distribution is softmax(z / temperature), z_j ~ N(0, 1) keyed (seed, c, j).
// Sequence g (global index g = k·B + s) has T+1 tokens x_0..x_T: x_0..x_{K-1} uniform on 0..V-1,
// then x_n ~ P(· | x_{n-K}..x_{n-1}); token n is drawn with a uniform keyed (seed, g, n), so every
// sequence is generated alone. Inputs x_0..x_{T-1}, targets x_1..x_T.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/data/dataset.h"

namespace zt {

class MarkovDataset final : public Dataset {
 public:
  // Limits: 2 <= vocab, 0 <= order, vocab^(order+1) <= kMaxTableEntries (InputError otherwise).
  static constexpr int64_t kMaxTableEntries = int64_t(1) << 22;
  MarkovDataset(int64_t vocab, int order, uint64_t seed, double temperature, int64_t n_ctx, int64_t global_batch);

  std::string describe() const override;
  int64_t vocab_size() const override { return vocab_; }
  double best_loss() const override { return best_loss_; }
  void fill(int64_t global_batch_index, int64_t first_sample, int64_t count, Batch& out) const override;

  int order() const { return order_; }
  int64_t num_contexts() const { return contexts_; }
  // The sampler's exact probability of `next` after context `context`.
  double prob(int64_t context, int32_t next) const;
  // Context index of the K tokens ending just before position `n` of `tokens` (n >= K).
  int64_t context_at(const int32_t* tokens, int64_t n) const;
  // Expected cross-entropy (nats) of the best predictor at each of the T target positions:
  // position p predicts x_{p+1} from x_0..x_p. best_loss() is their mean.
  const std::vector<double>& position_entropy() const { return position_entropy_; }
  // Generates the T+1 tokens of global sequence g.
  void sequence(int64_t g, int32_t* tokens) const;

 private:
  void build_table();
  void compute_best_loss();

  int64_t vocab_;
  int order_;
  uint64_t seed_;
  double temperature_;
  int64_t T_, B_;
  int64_t contexts_ = 1;          // V^K
  std::vector<double> cdf_;       // [V^K, V]: cumulative next-token probabilities, last = 1 exactly
  std::vector<double> position_entropy_;
  double best_loss_ = 0;
};

}  // namespace zt
