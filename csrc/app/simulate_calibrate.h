// simulate_calibrate.h — `zerotrain simulate --calibrate` (simulate_calibrate.cpp).
#pragma once
#include <string>

namespace zt {

struct CalibrateArgs {
  std::string config, model, out, name = "local";
};

// Initialises MPI (the job's ranks measure together), measures, and rank 0 writes the profile.
int run_calibrate(const CalibrateArgs& a, int* argc, char*** argv);

}  // namespace zt
