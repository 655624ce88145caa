// llama.h — Llama (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no biases)
// with explicit forward and backward.
//
// Units: 0 = model.embed_tokens; 1..L = block l-1; L+1 = model.norm + lm_head + loss.
// Parameters carry Hugging Face names and nn.Linear layouts ([out, in]). With tie_word_embeddings
// there is no lm_head.weight: the head reads model.embed_tokens.weight, which unit L+1 lists in
// unit_params as GPT's tied wte (its gradient is final after backward_unit(0)).
#pragma once
#include <memory>

#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"

namespace zt {

std::unique_ptr<Model> make_llama(const LlamaConfig& cfg, const ModelOptions& opt);
// Every buffer make_llama allocates for opt (micro_batch, compute_dtype, recompute, cpu_checkpointing); pure.
std::vector<BufferSpec> llama_buffer_plan(const LlamaConfig& cfg, const ModelOptions& opt);

// Forward+backward FLOPs of one sequence of T tokens: T · (6·N + 12·L·H·hs·T), N = the parameters
// the matmuls read (all of them, less an untied model's input embedding, a lookup); the attention
// term counts the H query heads (grouped-query attention shares keys and values, not scores).
double llama_flops_per_sequence(const LlamaConfig& cfg, int64_t T);

}  // namespace zt
