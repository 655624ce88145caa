// vocab_pad.h — vocabulary padding of the GPT's LM head (llm.c's choice: GPT-2's 50257 → 50304).
// The tied wte parameter stays [V, C] (parameter counts, checkpoints, weights files unchanged);
// only the logits buffer is padded: N rows of Vp = round_up(V, multiple) elements, so every row
// starts 16-byte aligned (bf16: Vp a multiple of 8; we use 128, a GEMM tile width). The head's
// GEMMs run over the V real columns with ldc / lda = Vp (ops::gemm_ld), the loss reads the V real
// columns (ops::softmax_cross_entropy_ld): padded columns are never written, read, or reach the
// loss. Padding the weight instead (a [Vp, C] copy) would cost a copy per step or change the
// parameter's shape; the strided logits cost only (Vp - V)·N elements of activation memory,
// counted in gpt_buffer_plan (so predicted = measured holds).
#pragma once
#include <cstdint>

#include "zerotrain/core/device.h"

namespace zt {

struct VocabLayout {
  int64_t V = 0;   // real vocabulary (columns 0..V-1 of each logits row)
  int64_t Vp = 0;  // stored row length, >= V
  bool padded() const { return Vp != V; }
  bool is_real(int64_t col) const { return col >= 0 && col < V; }
};

// The multiple each backend pads to by default: CUDA 128 (aligned bf16 rows, whole GEMM tiles);
// CPU 1 (no padding: OpenBLAS gains nothing from it, and the loss pass would touch more memory).
int64_t default_vocab_pad(DeviceKind kind);

// V → Vp = the smallest multiple of `multiple` >= V. multiple >= 1 (1: no padding); V >= 0.
// InputError for multiple < 1 or V < 0.
VocabLayout vocab_layout(int64_t V, int64_t multiple);

}  // namespace zt
