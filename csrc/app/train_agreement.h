// train_agreement.h — `zerotrain train`'s start-up agreement: every rank runs with the same flags
// and the same config and model file content, or every rank exits 2 with one message naming each
// argument that differs and the ranks that differ (never a hang, never silently different runs).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "rank_agreement.h"
#include "zerotrain/app/train_setup.h"

namespace zt {

using NamedValues = std::vector<std::pair<std::string, std::string>>;

// What must be equal on every rank: every flag as given (a repeated flag: its last value; a
// switch: "given") except --tag (checkpoint.tag_validation governs it, as in DeepSpeed: Fail is
// exit 2 naming the ranks, Warn/Ignore use rank 0's tag) and the --config and --model paths;
// then "--config content" and "--model content" as "xxh64 0x<16 hex>" of the file's bytes (the
// same file may sit at another path on another node; "" when it cannot be read here: the input
// check reports that, naming the file).
NamedValues rank_invariants(const TrainArgs& a);

// The verdict over every rank's invariants (all[r] from rank r): "" when they agree; else one
// message naming each argument that differs, rank 0's value and the other values with their ranks.
// Content digests that are "" on some rank are not compared.
std::string invariants_mismatch(const std::vector<NamedValues>& all);

// Collective over MPI_COMM_WORLD: exchanges rank_invariants(a); InputError (on every rank, the
// same message) when they differ.
void check_same_arguments_on_every_rank(const TrainArgs& a, WorldControl& world);

}  // namespace zt
