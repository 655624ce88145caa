// weights_export.h — model weights out of a live run (--save-weights) or a checkpoint
// (`zerotrain consolidate`), one tensor in host memory at a time, into a Hugging Face-style
// safetensors file: every parameter in forward order under its name, one dtype, metadata
// {"format": "pt", "producer": "zerotrain"} (the bytes save_model_weights writes).
//
// A target ending in '/' or naming an existing directory is an HF-ready folder:
// model.safetensors, plus config.json (GPT2LMHeadModel) when the model is a GPT.
#pragma once
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/zero/engine.h"

namespace zt {

class WeightsFileWriter {
 public:
  WeightsFileWriter(const std::string& path, const std::vector<ParamSpec>& specs, DType dtype);
  ~WeightsFileWriter();
  void write(int param, const float* values);  // parameters in order 0, 1, ...; fp32 in, converted
  void finish();                               // renames the finished file into place

 private:
  struct Impl;
  Impl* impl_;
};

bool is_folder_target(const std::string& out);
// Where the weights file of `out` goes: out/model.safetensors for a folder target, else out.
std::string weights_file_of(const std::string& out);
// Writes out/config.json when `out` is a folder target and the model is a GPT.
void write_hf_config_if_folder(const std::string& out, const ModelConfig& model, DType dtype);

// Collective: the master weights, all-gathered bucket by bucket to rank 0 (ZeroEngine::
// stream_parameters), written there in `dtype`. Errors are agreed across ranks (InputError on
// every rank). Returns the weights file's path.
std::string export_weights(ZeroEngine& engine, Communicator& comm, Device& dev, const std::vector<ParamSpec>& specs,
                           const ModelConfig& model, const std::string& out, DType dtype);

}  // namespace zt
