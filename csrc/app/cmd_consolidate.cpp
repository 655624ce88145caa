// cmd_consolidate.cpp — `zerotrain consolidate DIR[/TAG] OUT [--tag T] [--dtype fp32|bf16|fp16]`:
// a sharded checkpoint's master weights as one Hugging Face-style safetensors file (DeepSpeed's
// zero_to_fp32.py without its memory blow-up: one tensor in memory at a time). One process, no MPI.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_flags.h"
#include "commands.h"
#include "zerotrain/ckpt/checkpoint.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/ckpt/weights_export.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {

namespace {
const char* usage() {
  return "usage: zerotrain consolidate DIR[/TAG] OUT.safetensors|OUT_DIR/ [--tag T] [--dtype fp32|bf16|fp16]\n"
         "                             [--allow-non-finite]\n"
         "  DIR: a --save-checkpoint directory (its 'latest' tag, or --tag T), or one checkpoint DIR/TAG.\n"
         "  OUT ending in '/' (or an existing directory): an HF folder, model.safetensors + config.json (GPT).\n"
         "  --allow-non-finite: export NaN/Inf weights (refused by default, exit 2), for forensics.\n";
}
}  // namespace

int cmd_consolidate(int argc, char** argv) {
  try {
    std::string src, out, tag;
    DType dtype = DType::F32;
    bool allow_non_finite = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&] { return std::string(flag_value("consolidate", argc, argv, i, usage())); };
      if (a == "--dtype") {
        const std::string d = value();
        if (d == "fp32") dtype = DType::F32;
        else if (d == "bf16") dtype = DType::BF16;
        else if (d == "fp16") dtype = DType::F16;
        else throw InputError("consolidate: --dtype '" + d + "': expected fp32, bf16 or fp16");
      } else if (a == "--allow-non-finite") {
        allow_non_finite = true;
      } else if (a == "--tag") {
        tag = value();
      } else if (a == "-h" || a == "--help") {
        std::printf("%s", usage());
        return 0;
      } else if (a.empty()) {
        throw InputError(std::string(src.empty() ? "consolidate: DIR" : "consolidate: OUT") +
                         " '': empty path; expected a checkpoint directory and an output file\n" + usage());
      } else if (a[0] == '-') {
        throw InputError("consolidate: unknown flag '" + a + "'\n" + usage());
      } else if (src.empty()) {
        src = a;
      } else if (out.empty()) {
        out = a;
      } else {
        throw InputError("consolidate: unexpected argument '" + a + "'\n" + usage());
      }
    }
    if (src.empty() || out.empty()) throw InputError(std::string("consolidate: DIR and OUT are required\n") + usage());
    const auto t0 = std::chrono::steady_clock::now();
    const std::string tag_dir = resolve_checkpoint_path(src, tag);
    // Writing into the checkpoint being read (or the directory whose `latest` names it) would
    // replace or destroy a part of it.
    const std::string out_real = resolved_path(out), parent = resolved_path(tag_dir + "/..");
    std::vector<std::string> sources = {src, tag_dir};
    if (ckptfs::exists(ckptfs::join(parent, "latest"))) sources.push_back(parent);
    for (const std::string& s : sources)
      if (path_within(out_real, resolved_path(s)))
        throw InputError("consolidate: OUT " + out + " is inside the checkpoint directory " + s +
                         "; expected an output outside it");
    std::vector<std::string> warnings;
    consolidate_checkpoint(tag_dir, out, dtype, allow_non_finite, &warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const std::string file = weights_file_of(out);
    std::printf("consolidated %s into %s (%s, %.1f MiB) in %.2f s, peak RSS %.1f MiB\n", tag_dir.c_str(), file.c_str(),
                dtype_name(dtype), static_cast<double>(ckptfs::file_size(file)) / 1048576.0, s,
                static_cast<double>(ru.ru_maxrss) / 1024.0);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "zerotrain consolidate: error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
