// all_gather: S = n·count·elt (the full receive buffer); busbw = algbw · (n−1)/n.
#include "bench_common.h"

namespace zt::bench {
const Collective& all_gather_collective() {
  static const Collective c{
      "all_gather",
      [](int n) { return static_cast<double>(n - 1) / n; },
      [](size_t S, int n, size_t elt) { return S / (elt * static_cast<size_t>(n)); },
      [](size_t count, int) { return count; },
      [](size_t count, int n) { return count * static_cast<size_t>(n); },
      [](Communicator& comm, const void* s, void* r, size_t count, DType dt) {
        comm.all_gather(s, r, count, dt, "bench");
      },
      [](DirectLib& d, const void* s, void* r, size_t count, DType dt) { d.all_gather(s, r, count, dt); },
      [](int, int, size_t count, size_t i) { return input_value(static_cast<int>(i / count), i % count); },
  };
  return c;
}
}  // namespace zt::bench
