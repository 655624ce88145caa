// all_reduce: S = count·elt; busbw = algbw · 2(n−1)/n.
#include "bench_common.h"

namespace zt::bench {
const Collective& all_reduce_collective() {
  static const Collective c{
      "all_reduce",
      [](int n) { return 2.0 * (n - 1) / n; },
      [](size_t S, int, size_t elt) { return S / elt; },
      [](size_t count, int) { return count; },
      [](size_t count, int) { return count; },
      [](Communicator& comm, const void* s, void* r, size_t count, DType dt) {
        comm.all_reduce(s, r, count, dt, ReduceOp::Sum, "bench");
      },
      [](DirectLib& d, const void* s, void* r, size_t count, DType dt) { d.all_reduce(s, r, count, dt); },
      [](int, int n, size_t, size_t i) { return sum_over_ranks(n, i); },
  };
  return c;
}
}  // namespace zt::bench
