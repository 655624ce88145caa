// device_graph.cpp — the Device interface's stream-capture defaults: backends without graphs
// (the CPU backend) refuse with a message naming what was asked for.
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"

namespace zt {

void Device::begin_capture(Stream& s) {
  throw InputError("stream capture (CUDA graphs) needs the CUDA backend; " + description() + " has none (stream '" +
                   s.name() + "')");
}

std::unique_ptr<StreamGraph> Device::end_capture(Stream& s) {
  throw InputError("end_capture on " + description() + " (stream '" + s.name() + "'): no capture can have begun");
}

}  // namespace zt
