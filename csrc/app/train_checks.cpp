// train_checks.cpp — see train_checks.h.
#include "train_checks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "estimate.h"
#include "zerotrain/ckpt/weights_export.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/model/hf_folder.h"

namespace zt {

namespace {

std::string bytes_text(double b) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f B (%.3g GiB)", b, b / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string count_text(double n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", n);
  return buf;
}

// Ranks sharing this node, from the launcher's environment (no collective); 1 when unknown.
int ranks_on_this_node() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    const char* s = std::getenv(v);
    if (s && std::atoi(s) > 0) return std::atoi(s);
  }
  return 1;
}

}  // namespace

void check_model_fits(const DsConfig& cfg, const ModelConfig& m, int world, Recompute recompute,
                      const ClientOptimizer& client, bool cpu_device) {
  if (!cpu_device) return;  // a CUDA device's memory is known only once it is selected
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const MemoryEstimate e = estimate_memory(cfg, m, world, recompute, CommBackend::MPI, client);
  const double need = static_cast<double>(e.max_device_total() + e.max_host_total());
  const int local = ranks_on_this_node();
  const double have = static_cast<double>(pages) * static_cast<double>(page) / local;
  if (need > have)
    throw InputError("model file " + m.source + ": " + count_text(model_param_count(m)) + " parameters need " +
                     bytes_text(need) + " per rank as `zerotrain estimate` predicts it (ZeRO stage " +
                     std::to_string(e.stage) + ", world " + std::to_string(world) + "), but this node has " +
                     bytes_text(have) + " per rank (" + std::to_string(local) +
                     " ranks); expected a smaller model, a higher ZeRO stage or more ranks");
}

// --save-weights FILE, or a Hugging Face folder: "DIR/" (created) or an existing directory.
void check_weights_target(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    if (::access(path.c_str(), W_OK | X_OK) != 0)
      throw InputError("--save-weights " + path + ": cannot create files in this directory");
    return;
  }
  std::string target = path;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  check_output_path(target, "--save-weights");  // the file, or the folder to create: its parent must be writable
}

namespace {

struct Named {
  std::string flag, path, resolved;
};

// Every file and directory the run writes (per-rank names included), and the input files it
// reads, as flag + path.
std::vector<Named> run_paths(const TrainArgs& a, int world) {
  std::vector<Named> out;
  auto add = [&](const std::string& flag, const std::string& path) { out.push_back({flag, path, resolved_path(path)}); };
  auto per_rank = [&](const std::string& flag, const std::string& path) {
    if (path.empty()) return;
    for (int r = 0; r < (is_device_output(path) ? 1 : world); ++r) add(flag, per_rank_output(path, r));
  };
  per_rank("--metrics", a.metrics);
  per_rank("--comm-log", a.comm_log);
  if (!a.memory_report.empty()) add("--memory-report", a.memory_report);
  if (!a.trace_dir.empty()) {
    add("--trace", a.trace_dir);
    add("--trace", a.trace_dir + "/trace.json");
    for (int r = 0; r < world; ++r) add("--trace", a.trace_dir + "/trace.rank" + std::to_string(r) + ".json");
  }
  if (!a.save_weights.empty()) {
    add("--save-weights", weights_file_of(a.save_weights));
    if (is_folder_target(a.save_weights)) {
      add("--save-weights", a.save_weights);
      add("--save-weights", a.save_weights + "/config.json");
    }
  }
  if (!a.save_checkpoint.empty()) {
    add("--save-checkpoint", a.save_checkpoint);
    add("--save-checkpoint", a.save_checkpoint + "/latest");
  }
  for (auto [flag, path] : {std::pair<const char*, const std::string*>{"--config", &a.config},
                            {"--model", &a.model}, {"--init-from", &a.init_from}})
    if (!path->empty()) add(flag, *path);
  return out;
}

// One name for two outputs (or an output and an input) would have two writers interleave, or a
// writer destroy an input: refused. Devices (/dev/null, /dev/stdout) may be named more than once.
void check_distinct_names(const TrainArgs& args, int world) {
  const std::vector<Named> all = run_paths(args, world);
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i].resolved.empty() || all[i].resolved != all[j].resolved || is_device_output(all[i].path)) continue;
      if (all[i].flag == all[j].flag && all[i].path == all[j].path) continue;
      throw InputError("train: " + all[i].flag + " " + all[i].path + " and " + all[j].flag + " " + all[j].path +
                       " name the same file (" + all[i].resolved + "); expected a distinct name for every output");
    }
}

void note_removed(const std::vector<std::string>& removed) {
  for (const std::string& f : removed)
    std::fprintf(stderr, "notice: removed %s, a temporary file left by a killed run on this host\n", f.c_str());
}

}  // namespace

void check_output_paths(const TrainArgs& args, int world) {
  check_distinct_names(args, world);
  if (!args.metrics.empty()) check_output_path(args.metrics, "--metrics", true);
  if (!args.memory_report.empty()) {
    check_output_path(args.memory_report, "--memory-report", true);
    note_removed(remove_stale_temporaries(args.memory_report));
  }
  if (!args.comm_log.empty()) check_output_path(args.comm_log, "--comm-log", true);
  if (!args.trace_dir.empty()) {
    struct stat st {};
    if (::stat(args.trace_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw InputError("--trace " + args.trace_dir + ": the path exists and is not a directory");
  }
  if (!args.save_weights.empty()) {
    check_weights_target(args.save_weights);
    note_removed(remove_stale_temporaries(weights_file_of(args.save_weights)));
  }
}

ModelConfig train_model_config(const TrainArgs& args) {
  const bool folder = is_weights_folder(args.init_from);
  const std::string hf_config = folder ? hf_config_path(args.init_from) : "";
  if (!args.model.empty()) {
    ModelConfig m = parse_model_config_file(args.model);
    if (!hf_config.empty()) check_model_matches_hf(m, args.model, hf_config);
    return m;
  }
  if (hf_config.empty())
    throw InputError("train: --model is required unless --init-from names a folder with a config.json (" +
                     (folder ? args.init_from + " has none" : std::string("--init-from is not a folder")) + ")");
  return model_config_from_hf(hf_config);
}

DatasetShape dataset_shape(const ModelConfig& m, const DsConfig& cfg, uint64_t seed, int rank, int world) {
  DatasetShape shape;
  if (m.is_token_model()) {
    shape.vocab_size = m.vocab_size();
    shape.n_ctx = m.context_length();
  } else {
    shape.mlp_dims = m.mlp.dims;
    shape.mlp_relu = m.mlp.activation == Activation::ReLU;
    shape.mlp_classification = m.mlp.task == MlpTask::Classification;
  }
  shape.global_batch = cfg.train_batch_size;
  shape.seed = seed;
  shape.validate_shard = rank;  // each rank validates its part of a token file (agreed in phase A)
  shape.validate_shards = world;
  return shape;
}

DsConfig load_config(const TrainArgs& args, const ModelConfig& model_cfg, int world) {
  ConfigOptions copt;
  copt.world_size = world;
  copt.world_size_origin = "MPI";
  copt.strict = args.strict;
  copt.hidden_size = model_hidden_size(model_cfg);
  copt.recompute_flag = args.recompute;
  return load_ds_config(args.config, copt);
}

}  // namespace zt
