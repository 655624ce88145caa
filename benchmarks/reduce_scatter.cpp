// reduce_scatter: S = n·count·elt (the full send buffer); busbw = algbw · (n−1)/n.
#include "bench_common.h"

namespace zt::bench {
const Collective& reduce_scatter_collective() {
  static const Collective c{
      "reduce_scatter",
      [](int n) { return static_cast<double>(n - 1) / n; },
      [](size_t S, int n, size_t elt) { return S / (elt * static_cast<size_t>(n)); },
      [](size_t count, int n) { return count * static_cast<size_t>(n); },
      [](size_t count, int) { return count; },
      [](Communicator& comm, const void* s, void* r, size_t count, DType dt) {
        comm.reduce_scatter(s, r, count, dt, ReduceOp::Sum, "bench");
      },
      [](DirectLib& d, const void* s, void* r, size_t count, DType dt) { d.reduce_scatter(s, r, count, dt); },
      [](int rank, int n, size_t count, size_t i) { return sum_over_ranks(n, static_cast<size_t>(rank) * count + i); },
  };
  return c;
}
}  // namespace zt::bench
