// ckpt_internal.h — shared by the checkpoint files: meta.json in parsed form, shard names,
// checksum verification, and the small collectives the protocol agrees with.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/ckpt/checkpoint.h"

namespace zt::ckpt {

using json = nlohmann::json;

constexpr const char* kFormat = "zerotrain-checkpoint";
constexpr int kVersion = 2;                             // 2: meta.json carries its own checksum
constexpr int kVersionWithoutChecksum = 1;              // still read, with a warning
constexpr const char* kMetaChecksumKey = "meta_xxh64";
constexpr int64_t kChunkElems = int64_t(1) << 20;       // staging per state chunk (4 MiB of fp32)
constexpr size_t kHashReadBytes = size_t(4) << 20;      // read buffer when verifying a shard

std::string shard_file_name(int rank, int world);       // shard-RRRRR-of-NNNNN.safetensors

// meta.json, parsed and checked for internal consistency.
struct Meta {
  std::string dir;                 // DIR/<tag>
  std::string file;                // DIR/<tag>/meta.json (for messages)
  json doc;
  std::string tag;
  int world = 1, stage = 0;
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    int64_t numel = 0;
  };
  std::vector<Param> params;
  struct Shard {
    int rank = 0;
    std::string file;              // name inside dir
    int64_t bytes = 0;
    std::string xxh64;
  };
  std::vector<Shard> shards;
  struct State {
    std::string name;
    DType dtype = DType::F32;
  };
  std::vector<State> states;
  struct Piece {
    int rank = 0;
    int64_t begin = 0, count = 0;
  };
  std::vector<std::vector<std::vector<Piece>>> pieces;  // [state][param], sorted, tiling the param
  ZeroEngine::Counters counters;
  std::string loss_scaler_flavor;
  uint64_t seed = 0;
  std::string data_spec;
  ValidationState validation;      // "validation", when present
  int64_t train_batch_size = 0;
  std::string lr_schedule;
  std::string master_dtype, moments_dtype, compute_dtype;
  std::string optimizer_type;
  ModelConfig model;               // model.config, validated as a model file is
  std::vector<std::string> warnings;  // e.g. an older format without a checksum

  std::string shard_path(int rank) const;
  int param_index(const std::string& name) const;  // -1 if absent
};

// Reads and validates DIR/<tag>/meta.json (InputError naming the file and the key): its checksum,
// every value's type and range, and the consistency of its counters, shards and tensors.
Meta parse_meta(const std::string& tag_dir);
// The same checks on a document already read (`file` names it in messages).
Meta parse_meta_doc(const std::string& tag_dir, const std::string& file, const std::string& text);

// XXH64 (16 hex digits) of the document's compact serialization (keys sorted, no whitespace)
// without its kMetaChecksumKey member: what meta.json records under that key.
std::string meta_checksum(const json& doc);

// Builds meta.json for a save: the engine's plan and state, `info`, the shards' reports.
json build_meta(const ZeroEngine& engine, const std::string& tag, const CheckpointRunInfo& info,
                const std::vector<Meta::Shard>& shards);

// The canonical JSON of a model file (meta.json "model.config").
json model_config_json(const ModelConfig& m);
// Hugging Face GPT2LMHeadModel config.json for a GPT model config (from model_config_json).
json hf_gpt2_config(const json& model_config, DType dtype);
// Hugging Face LlamaForCausalLM config.json for a Llama model config (from model_config_json).
json hf_llama_config(const json& model_config, DType dtype);
// The Hugging Face config.json of a token model (GPT-2 or Llama); null for the MLP.
json hf_model_config(const ModelConfig& m, DType dtype);

// Size check, then XXH64 of the whole file against meta; "" when fine, else the message.
std::string verify_shard(const Meta& m, int rank);
std::string size_problem(const Meta& m, int rank);  // missing / truncated / longer; "" when fine

// Rank `root`'s string on every rank. Collective.
std::string broadcast_string(Communicator& comm, Device& dev, const std::string& s, int root);

// checkpoint.tag_validation across ranks (DeepSpeed's _checkpoint_tag_validation): every rank
// gets rank 0's tag; a mismatch is a warning (WARN, appended to `warnings` on rank 0), ignored
// (IGNORE) or an error on every rank (FAIL). Collective.
std::string agree_on_tag(Communicator& comm, Device& dev, const std::string& tag, const std::string& mode,
                         std::vector<std::string>* warnings);

std::string loss_scaler_flavor_name(LossScalerFlavor f);

}  // namespace zt::ckpt
