// mpi_env_cuda.cpp — the CUDA half of GPU selection: a device's PCI bus id (see mpi_env.h).
#include <array>

#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/check_cuda.h"

namespace zt {

std::string cuda_pci_bus_id(int ordinal) {
  std::array<char, 64> buf{};
  ZT_CUDA_CHECK(cudaDeviceGetPCIBusId(buf.data(), static_cast<int>(buf.size()), ordinal));
  return std::string(buf.data());
}

}  // namespace zt
