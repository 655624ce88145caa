// gpt.h — GPT-2 (pre-norm transformer, tied head) with explicit forward and backward.
//
// Units: 0 = embeddings (wte, wpe); 1..L = block l-1; L+1 = ln_f + head + loss.
// Tied weight: the head (unit L+1) computes logits = x·wteᵀ, so unit_params(L+1) = {wte, ln_f.*}:
// the engine must bind wte (param 0) before forward_unit(L+1) and backward_unit(L+1) (stage 3:
// gather it for the head too), and bind wte's gradient for backward_unit(L+1), which
// accumulates the head's contribution; backward_unit(0) then adds the embedding's. wte's
// gradient is final after backward_unit(0) (its owner unit, spec.unit == 0).
//
// Parameter names and layouts are Hugging Face GPT-2's (Conv1D weights stored [in, out]).
#pragma once
#include <memory>

#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/model/vocab_pad.h"

namespace zt {

std::unique_ptr<Model> make_gpt(const GptConfig& cfg, const ModelOptions& opt);
// Every buffer make_gpt allocates for opt (micro_batch, compute_dtype, recompute); pure.
std::vector<BufferSpec> gpt_buffer_plan(const GptConfig& cfg, const ModelOptions& opt);
// The LM head's logits layout under opt (V = cfg.vocab_size, Vp per opt.vocab_pad).
VocabLayout gpt_vocab_layout(const GptConfig& cfg, const ModelOptions& opt);

// Forward+backward FLOPs of one sequence of T tokens (PaLM convention):
// T · (6·N + 12·L·C·T), N = all parameters (wte counted once: it is the tied head's matmul).
// GPT-2 124M at T=1024: 860 M FLOPs/token. flops_per_sample() is this at T = n_ctx.
double gpt_flops_per_sequence(const GptConfig& cfg, int64_t T);
int64_t gpt_num_params(const GptConfig& cfg);

}  // namespace zt
