// vocab_pad.cpp — the LM head's padding map (zerotrain/model/vocab_pad.h).
#include "zerotrain/model/vocab_pad.h"

#include <string>

#include "zerotrain/core/check.h"

namespace zt {

int64_t default_vocab_pad(DeviceKind kind) { return kind == DeviceKind::CUDA ? 128 : 1; }

VocabLayout vocab_layout(int64_t V, int64_t multiple) {
  if (multiple < 1) throw InputError("vocabulary padding multiple must be >= 1, got " + std::to_string(multiple));
  if (V < 0) throw InputError("vocabulary size must be >= 0, got " + std::to_string(V));
  VocabLayout l;
  l.V = V;
  l.Vp = (V + multiple - 1) / multiple * multiple;
  return l;
}

}  // namespace zt
