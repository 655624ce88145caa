// model.h — the contract between a workload (MLP, GPT) and the ZeRO engine.
//
// A model is an ordered list of parameters (forward order) grouped into units (embeddings,
// each block, final norm + head). It never owns parameter or gradient storage: the engine
// binds a pointer per parameter before a unit runs (full storage at stages 0–2, a gathered
// buffer at stage 3) and a gradient pointer per parameter before the unit's backward.
// The model owns its activations (allocated once for the micro-batch shape, category
// Activations) and its workspace.
//
// Call sequence per micro-step (all work is enqueued on `stream`, nothing blocks):
//   set_batch(batch)
//   for u in 0..U-1:  [engine: gather/bind params of u]  forward_unit(u)
//   loss is available on the device after the last unit (mean over the micro-batch)
//   for u in U-1..0:  [engine: bind params and grads of u]  backward_unit(u, dloss)
//                     [engine: hand u's grads to the reduce buckets]
// backward_unit ACCUMULATES (+=) into the bound gradient storage; the engine zeroes it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/core/tensor.h"

namespace zt {

enum class InitKind : uint8_t { Normal, Zeros, Ones };

struct ParamSpec {
  std::string name;              // Hugging Face / safetensors name, e.g. "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;    // storage layout (GPT Conv1D weights are [in, out])
  int64_t numel = 0;
  int unit = 0;                  // index of the unit that uses it
  InitKind init = InitKind::Normal;
  float init_std = 0.02f;        // for Normal
};

// One micro-batch on the host. Token models use inputs/targets as int32 [B,T]; the MLP uses
// features [B,in] (fp32) and either targets_f [B,out] (regression) or targets [B] (classes).
struct Batch {
  int64_t B = 0, T = 1;
  std::vector<int32_t> inputs, targets;
  std::vector<float> features, targets_f;
};

// Activation recompute (activation checkpointing) granularity, GPT only (the MLP keeps all):
//   None      every block's activations are kept from forward to backward;
//   Block     only each block's input (the residual stream) is kept; the block's forward is
//             recomputed in its backward into one shared set of block buffers;
//   Selective the attention internals (output + softmax statistics / probabilities) and the
//             MLP's GELU output are recomputed; the rest of each block is kept.
// Recomputing runs the same ops on the same inputs in the same order: results are bitwise equal.
enum class Recompute : uint8_t { None, Block, Selective };
const char* recompute_name(Recompute r);  // "none" | "block" | "selective"

// One buffer a model allocates for a micro-batch shape: what the memory prediction sums.
struct BufferSpec {
  std::string name;
  int64_t bytes = 0;
  MemCategory category = MemCategory::Activations;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string describe() const = 0;                 // one line: type, sizes, params
  virtual const std::vector<ParamSpec>& params() const = 0; // forward order
  virtual int num_units() const = 0;
  virtual int64_t hidden_size() const = 0;                  // for "auto" bucket sizes
  virtual double flops_per_sample() const = 0;              // forward+backward FLOPs (6N + attention)

  // Storage binding (pointers on the model's device; parameters in the compute dtype, gradients
  // in grad_dtype()).
  virtual void bind_param(int index, void* data) = 0;
  virtual void bind_grad(int index, void* data) = 0;
  // The dtype backward accumulates parameter gradients in: the compute dtype (the default), or
  // fp32 with a 16-bit compute dtype (the weight-gradient GEMMs and column sums add straight into
  // fp32, with no 16-bit gradient copy). Set before backward runs; bound gradient pointers
  // must hold that dtype.
  virtual void set_grad_dtype(DType dtype) = 0;
  virtual DType grad_dtype() const = 0;

  // Copy a host micro-batch to the device (on `stream`) for the next forward/backward.
  virtual void set_batch(const Batch& batch) = 0;
  virtual void forward_unit(int unit) = 0;
  // dloss: d(objective)/d(mean micro-batch loss), e.g. loss_scale / gradient_accumulation_steps.
  virtual void backward_unit(int unit, float dloss) = 0;
  // Mean loss of the last forward, as a device pointer to one float (valid after the last unit).
  virtual const float* loss_device() const = 0;
  // Host values set_batch derived from the batch that forward/backward bake into their launches
  // (kernel arguments, e.g. the loss divisor). A captured CUDA graph (zero/step_graph.h) replays
  // them unchanged, so they are part of its signature. Device-side inputs (tokens) are not here:
  // set_batch copies them into buffers whose addresses never change.
  virtual std::vector<double> launch_scalars() const { return {}; }

  // Every buffer the model allocates (activations, workspace), from the same pure function
  // that the offline estimate calls (model_buffer_plan): prediction and allocation agree.
  virtual std::vector<BufferSpec> buffer_plan() const = 0;
  // Whether forward/backward also issue work on a stream of the model's own (GPT cpu_checkpointing's
  // copy stream), ordered with `stream` by events: a capture of `stream` alone would not hold it.
  virtual bool uses_side_stream() const { return false; }

  // ---- added by the model layer ----
  // Every parameter index unit `unit` reads in forward and backward, ascending. Usually the
  // params with spec.unit == unit; a shared parameter (GPT's tied wte, owned by unit 0) is also
  // listed for each further unit that reads it, and that unit's backward accumulates into its
  // gradient too. Invariant: spec.unit is the LOWEST unit that reads the param, so its gradient
  // is final once backward_unit(spec.unit) has been enqueued (backward runs U-1..0).
  virtual std::vector<int> unit_params(int unit) const;
  // Params that appear in unit_params of a unit other than their owner (e.g. {0} for GPT).
  std::vector<int> shared_params() const;
  int64_t num_params() const;  // sum of numel over params()
  // Logits of the last forward as fp32 host rows [B·T, V] (the V real vocabulary columns), for
  // tests and tools; the training path never calls it. Token models recompute them from the saved
  // final-norm activations and the bound head weight, so it is valid after forward_unit of the last
  // unit and before the next set_batch; it waits for the stream. Models without logits throw.
  virtual std::vector<float> forward_logits();
};

struct ModelOptions {
  DType compute_dtype = DType::F32;
  int64_t micro_batch = 1;       // B the activations are sized for
  Recompute recompute = Recompute::None;
  // With recompute Block or Selective: the kept block inputs live in host memory (pinned where
  // the backend has it; category HostActivations) between a block's forward and its backward,
  // and the device holds two of them (the running block's and the one prefetched). No effect
  // with recompute None. GPT only.
  bool cpu_checkpointing = false;
  // Parameters and buffer_plan() only, nothing allocated (the offline estimate): forward /
  // backward must not be called.
  bool plan_only = false;
  Device* device = nullptr;
  Stream* stream = nullptr;      // compute stream
  // GPT LM head: logits rows padded to a multiple of this (zerotrain/model/vocab_pad.h). 0 = the
  // device's default, default_vocab_pad(device->kind()): 128 on CUDA, 1 (none) on the CPU, and
  // CPU when device is null. Parameters, checkpoints and losses do not depend on it.
  int64_t vocab_pad = 0;
};

struct ModelConfig;
// The buffers make_model would allocate for cfg under opt (device and stream unused): pure.
std::vector<BufferSpec> model_buffer_plan(const ModelConfig& cfg, const ModelOptions& opt);

// Parses a model JSON file (configs/models/*.json); InputError on a bad file (names path and key).
std::unique_ptr<Model> load_model(const std::string& path, const ModelOptions& opt);

// Counter-based initialisation: element i of parameter `spec` under `seed` depends only on
// (seed, spec.name, i), so any slice [begin, begin+count) can be initialised on its own.
// Writes fp32 values to host memory `out`.
void init_param_slice(uint64_t seed, const ParamSpec& spec, int64_t begin, int64_t count, float* out);

}  // namespace zt
