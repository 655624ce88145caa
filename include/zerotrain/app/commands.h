// commands.h — the CLI's subcommands. Each returns the process exit code
// (0 ok, 2 bad input). argv[0] is the subcommand name.
#pragma once

namespace zt {
int cmd_check_config(int argc, char** argv);  // csrc/app/cmd_check_config.cpp
int cmd_train(int argc, char** argv);         // csrc/app/cmd_train.cpp
}  // namespace zt
