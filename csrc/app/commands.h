// commands.h — the CLI's subcommands. Each returns the process exit code
// (0 ok, 2 bad input). argv[0] is the subcommand name.
#pragma once

namespace zt {
int cmd_check_config(int argc, char** argv);  // csrc/app/cmd_check_config.cpp
int cmd_train(int argc, char** argv);         // csrc/app/cmd_train.cpp
int cmd_consolidate(int argc, char** argv);   // csrc/app/cmd_consolidate.cpp
int cmd_explain(int argc, char** argv);       // csrc/app/cmd_explain.cpp
int cmd_estimate(int argc, char** argv);      // csrc/app/cmd_estimate.cpp
int cmd_simulate(int argc, char** argv);      // csrc/app/cmd_simulate.cpp
int cmd_tune(int argc, char** argv);          // csrc/app/cmd_tune.cpp
int cmd_tokenize(int argc, char** argv);      // csrc/app/cmd_tokenize.cpp
int cmd_sample(int argc, char** argv);        // csrc/app/cmd_sample.cpp

// Re-executes the process once with OPENBLAS_CORETYPE set when OpenBLAS fell back to SSE3
// kernels on a CPU with AVX2/AVX-512 (csrc/app/blas_tuning.cpp). Call first thing in main.
void tune_openblas_or_reexec(char** argv);
}  // namespace zt
