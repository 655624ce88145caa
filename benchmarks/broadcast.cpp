// broadcast from rank 0, in place: S = count·elt; busbw = algbw.
#include "bench_common.h"

namespace zt::bench {
const Collective& broadcast_collective() {
  static const Collective c{
      "broadcast",
      [](int) { return 1.0; },
      [](size_t S, int, size_t elt) { return S / elt; },
      [](size_t count, int) { return count; },
      [](size_t count, int) { return count; },
      [](Communicator& comm, const void*, void* r, size_t count, DType dt) { comm.broadcast(r, count, dt, 0, "bench"); },
      [](DirectLib& d, const void*, void* r, size_t count, DType dt) { d.broadcast(r, count, dt, 0); },
      [](int, int, size_t, size_t i) { return input_value(0, i); },
  };
  return c;
}
}  // namespace zt::bench
