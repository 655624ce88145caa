#include "zerotrain/app/train_setup.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cli_flags.h"
#include "zerotrain/app/client_optimizer.h"
#include "observe.h"
#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/host_thread_pool.h"

namespace zt {

const char* train_usage() {
  return "usage: zerotrain train --config DS.json --model MODEL.json --data SPEC --steps N (0: load/init and save only)\n"
         "                       [--seed S] [--device auto|cpu|cuda] [--init-from F.safetensors|DIR/]\n"
         "                       [--save-weights F.safetensors|DIR/] [--metrics F.jsonl] [--memory-report F.json]\n"
         "                       [--log-every N] [--strict] [--recompute none|block|selective]\n"
         "                       [--save-checkpoint DIR [--save-every N] [--keep-last K]] [--resume DIR [--tag T]]\n"
         "                       [--trace DIR [--trace-steps FIRST:LAST]] [--comm-log F.jsonl]\n"
         "                       [--max-skipped-steps N] [--allow-non-finite] [--cuda-graph [--cuda-graph-warmup N]]\n"
         "                       [--eval-data SPEC --eval-every N [--eval-batches K] [--keep-best] [--early-stop P]]\n"
         "                       [--sample-every N --sample-prompt TEXT [--sample-tokens K] [--sample-temperature t]\n"
         "                        [--sample-tokenizer T.json]]\n"
         "  --init-from DIR/       a Hugging Face folder: model.safetensors, or model.safetensors.index.json and its\n"
         "                         shards; its config.json (GPT-2) must match --model, or is the model without it\n"
         "  --eval-data SPEC       validation data (any --data spec; text:/tokens: with split=F give the last 1-F\n"
         "                         of the file when --data names the same spec)\n"
         "  --eval-every N         every N steps and at the end: the mean loss of K fixed global batches of the\n"
         "                         validation data (--eval-batches K, default 8), printed as 'val loss'\n"
         "  --keep-best            with --save-checkpoint DIR: save DIR/best whenever the validation loss improves\n"
         "  --early-stop P         stop (exit 0, final checkpoint saved) after P evaluations without improvement\n"
         "  --sample-every N       every N steps and at the end (GPT): rank 0 prints the prompt and K generated tokens\n"
         "                         (--sample-tokens K, default 64) on lines starting 'sample @ step S:'; the prompt\n"
         "                         (--sample-prompt) is byte-level unless --sample-tokenizer T.json (a BPE\n"
         "                         tokenizer.json) encodes it; greedy unless --sample-temperature t > 0 (then seeded\n"
         "                         by --seed); stops early at n_ctx. Every rank joins the weights' gather;\n"
         "                         the training itself is unchanged\n"
         "  --max-skipped-steps N  stop with exit 4 after N steps in a row were all skipped for a non-finite\n"
         "                         gradient norm (NaN/Inf; every dtype); 0 never stops (default 100). A run whose\n"
         "                         final loss is NaN/Inf also ends with exit 4\n"
         "  --allow-non-finite     load NaN/Inf weights or optimizer states (--init-from, --resume) for forensics\n"
         "  --cuda-graph           capture each micro-step's forward + backward + grad-sync launches in a CUDA\n"
         "                         graph and replay it (CUDA, ZeRO stages 0-2, no offload, no timing or comm\n"
         "                         logging; refused with exit 2 otherwise)\n"
         "  --cuda-graph-warmup N  eager steps before the first capture (default 2, >= 1)\n"
         "  SIGTERM/SIGUSR1 to any rank: every rank finishes the step, saves a checkpoint with --save-checkpoint,\n"
         "                         and exits 75; --resume DIR continues bitwise (a second signal stops at once)\n"
         "exit codes: 0 ok, 1 internal error, 2 bad input, 3 communication failure, 4 training went non-finite,\n"
         "            75 stopped by SIGTERM/SIGUSR1\n";
}

namespace {
// DeepSpeed accepts 0 for bucket and sub-group sizes (elements); a bucket or a group holds at
// least one element. The config keeps the value as written (it is shown by --explain); it is
// clamped here, once, on its way into EngineOptions.
int64_t at_least_one_element(int64_t elements) { return std::max<int64_t>(1, elements); }

void check_eval_args(const TrainArgs& a, bool batches_given) {
  if (a.eval_data.empty() != (a.eval_every == 0))
    throw InputError("train: --eval-data SPEC and --eval-every N go together (validation every N steps on SPEC)");
  if (a.eval_every == 0 && (a.keep_best || a.early_stop || batches_given))
    throw InputError("train: --eval-batches, --keep-best and --early-stop need --eval-data SPEC --eval-every N");
  if (a.keep_best && a.save_checkpoint.empty())
    throw InputError("train: --keep-best saves DIR/best; --save-checkpoint DIR is missing");
}

void check_sample_args(const TrainArgs& a, bool extras_given) {
  if ((a.sample_every == 0) != a.sample_prompt.empty())
    throw InputError("train: --sample-every N and --sample-prompt TEXT go together (a sample every N steps)");
  if (a.sample_every == 0 && extras_given)
    throw InputError("train: --sample-tokens, --sample-temperature and --sample-tokenizer need --sample-every N "
                     "--sample-prompt TEXT");
  if (!std::isfinite(a.sample_temperature) || a.sample_temperature < 0)
    throw InputError("train: --sample-temperature: expected a finite number >= 0 (0 = greedy)");
}

void check_checkpoint_args(const TrainArgs& a) {
  if ((a.save_every || a.keep_last) && a.save_checkpoint.empty())
    throw InputError("train: --save-every and --keep-last need --save-checkpoint DIR");
  if (!a.tag.empty() && a.resume.empty()) throw InputError("train: --tag names the checkpoint to --resume from; --resume DIR is missing");
  if (!a.resume.empty() && !a.init_from.empty())
    throw InputError("train: --resume and --init-from both set the weights; give one (--resume restores the whole training state)");
}

// A decimal integer in [lo, hi] (the range of the type it is stored in, or narrower): digits
// with an optional leading '-'; no spaces, '+', hex or overflow.
int64_t parse_int(const std::string& flag, const char* v, int64_t lo, int64_t hi = INT64_MAX) {
  const char* d = v[0] == '-' ? v + 1 : v;
  bool digits = *d != 0;
  for (const char* c = d; *c; ++c) digits = digits && *c >= '0' && *c <= '9';
  errno = 0;
  const long long x = digits ? std::strtoll(v, nullptr, 10) : 0;
  if (!digits || errno == ERANGE || x < lo || x > hi)
    throw InputError("train: " + flag + " '" + v + "': expected an integer >= " + std::to_string(lo) + " and <= " +
                     std::to_string(hi));
  return x;
}
double parse_double(const std::string& flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v, &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(x))
    throw InputError("train: " + flag + " '" + v + "': expected a finite number");
  return x;
}

// --sample-every, --sample-prompt, --sample-tokens, --sample-temperature, --sample-tokenizer; returns
// whether the flag is one that needs --sample-every (tokens, temperature, tokenizer).
bool take_sample_flag(TrainArgs& a, const std::string& f, const char* v) {
  if (f == "--sample-every") a.sample_every = parse_int(f, v, 1);
  else if (f == "--sample-prompt") a.sample_prompt = v;
  else if (f == "--sample-tokens") a.sample_tokens = parse_int(f, v, 1, INT32_MAX);
  else if (f == "--sample-temperature") a.sample_temperature = parse_double(f, v);
  else if (f == "--sample-tokenizer") a.sample_tokenizer = v;
  else throw InputError("train: unknown flag '" + f + "'\n" + train_usage());
  return f == "--sample-tokens" || f == "--sample-temperature" || f == "--sample-tokenizer";
}
}  // namespace

TrainArgs parse_train_args(int argc, char** argv) {
  TrainArgs a;
  bool steps_given = false, warmup_given = false, batches_given = false, sample_extras = false;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    const int at = i;
    // An empty value (an unset shell variable) is an error, never "not given".
    auto value = [&] { return flag_value("train", argc, argv, i, train_usage()); };
    if (f == "--config") a.config = value();
    else if (f == "--model") a.model = value();
    else if (f == "--data") a.data = value();
    else if (f == "--steps") { a.steps = parse_int(f, value(), 0); steps_given = true; }
    else if (f == "--seed") { a.seed = static_cast<uint64_t>(parse_int(f, value(), 0)); a.seed_given = true; }
    else if (f == "--device") {
      a.device = value();
      if (a.device != "auto" && a.device != "cpu" && a.device != "cuda")
        throw InputError("train: --device '" + a.device + "': expected auto, cpu or cuda");
    } else if (f == "--init-from") a.init_from = value();
    else if (f == "--save-weights") a.save_weights = value();
    else if (f == "--metrics") a.metrics = value();
    else if (f == "--memory-report") a.memory_report = value();
    else if (f == "--log-every") a.log_every = parse_int(f, value(), 1);
    else if (f == "--strict") a.strict = true;
    else if (f == "--save-checkpoint") a.save_checkpoint = value();
    else if (f == "--save-every") a.save_every = parse_int(f, value(), 1);
    else if (f == "--keep-last") a.keep_last = parse_int(f, value(), 1, INT32_MAX);  // an int in the save
    else if (f == "--resume") a.resume = value();
    else if (f == "--tag") a.tag = value();
    else if (f == "--trace") a.trace_dir = value();
    else if (f == "--trace-steps") a.trace_steps = value();
    else if (f == "--comm-log") a.comm_log = value();
    else if (f == "--recompute") {
      a.recompute = value();
      recompute_from(a.recompute, "train: --recompute");  // validates
    }
    else if (f == "--max-skipped-steps") a.max_skipped_steps = parse_int(f, value(), 0);
    else if (f == "--allow-non-finite") a.allow_non_finite = true;
    else if (f == "--cuda-graph") a.cuda_graph = true;
    else if (f == "--cuda-graph-warmup") {
      a.cuda_graph_warmup = parse_int(f, value(), 1, INT32_MAX);  // an int in the engine
      warmup_given = true;
    }
    else if (f == "--eval-data") a.eval_data = value();
    else if (f == "--eval-every") a.eval_every = parse_int(f, value(), 1);
    else if (f == "--eval-batches") {
      a.eval_batches = parse_int(f, value(), 1, INT32_MAX);
      batches_given = true;
    }
    else if (f == "--keep-best") a.keep_best = true;
    else if (f.rfind("--sample-", 0) == 0) sample_extras |= take_sample_flag(a, f, value());
    else if (f == "--early-stop") a.early_stop = parse_int(f, value(), 1);
    else if (take_client_optimizer_flag(a.client_optimizer, "train", argc, argv, i)) continue;
    else throw InputError("train: unknown flag '" + f + "'\n" + train_usage());
    a.given.emplace_back(f, i > at ? argv[i] : "");
  }
  parse_step_range("train: --trace-steps", a.trace_steps);  // bad ranges fail before any set-up
  if (a.config.empty() || (a.model.empty() && a.init_from.empty()) || a.data.empty() || !steps_given)
    throw InputError(std::string("train: --config, --model (or --init-from DIR/ with a config.json), --data and --steps "
                                 "are required\n") + train_usage());
  check_checkpoint_args(a);
  check_eval_args(a, batches_given);
  check_sample_args(a, sample_extras);
  if (warmup_given && !a.cuda_graph) throw InputError("train: --cuda-graph-warmup needs --cuda-graph");
  return a;
}

Recompute recompute_from(const std::string& name, const std::string& what) {
  if (name == "none") return Recompute::None;
  if (name == "block") return Recompute::Block;
  if (name == "selective") return Recompute::Selective;
  throw InputError(what + " '" + name + "': expected none, block or selective");
}

Recompute recompute_of(const DsConfig& cfg, const std::string& flag) {
  return flag.empty() ? recompute_from(cfg.activation_recompute, "config activation_checkpointing.zerotrain_recompute")
                      : recompute_from(flag, "train: --recompute");
}

int64_t model_hidden_size(const ModelConfig& m) { return m.hidden_size(); }

DType compute_dtype_of(const DsConfig& cfg) {
  if (cfg.bf16.enabled) return DType::BF16;
  if (cfg.fp16.enabled) return DType::F16;
  return DType::F32;
}

// ZeRO-Offload as the trainer runs it. DeepSpeed's config accepts optimizer offload at stage 0
// and fails when the engine is built; zerotrain says so up front, in check-config as in train.
OffloadOptions offload_options_from(const DsConfig& cfg) {
  const ZeroConfig& z = cfg.zero;
  const std::string where = "config " + cfg.source + ": zero_optimization.";
  OffloadOptions o;
  if (z.optimizer_offloaded()) {
    if (z.stage == 0)
      throw InputError(where + "offload_optimizer.device: found \"" + z.offload_optimizer->device +
                       "\" at stage 0; expected ZeRO stage 1, 2 or 3 (optimizer offload updates each rank's "
                       "optimizer shard on the host), or device \"none\"");
    if (z.offload_optimizer->buffer_count < 2)
      throw InputError(where + "offload_optimizer.buffer_count: found " +
                       std::to_string(z.offload_optimizer->buffer_count) +
                       "; expected >= 2 (host staging slots: one chunk is copied while another is updated)");
    o.optimizer = true;
    o.pin_memory = z.offload_optimizer->pin_memory;
    o.buffer_count = static_cast<int>(z.offload_optimizer->buffer_count);
    // cpuadam_cores_perc: DeepSpeed's share of the cores for the CPU optimizer.
    const int cores = cpu::default_host_threads();
    o.host_threads = std::max(1, static_cast<int>(cores * z.offload_optimizer->cpuadam_cores_perc + 0.5));
  }
  if (z.params_offloaded() && z.stage == 3) {
    if (!o.optimizer)
      throw InputError(where + "offload_param.device: found \"cpu\" without optimizer offload; zerotrain offloads "
                       "the stage-3 parameter shard together with offload_optimizer.device \"cpu\" (the CPU "
                       "optimizer writes it in place); set both, or neither");
    o.params = true;
    o.param_pin_memory = z.offload_param->pin_memory;
  }
  return o;
}

EngineOptions engine_options_from(const DsConfig& cfg, const ClientOptimizer& client) {
  const std::string where = "config " + cfg.source + ": ";
  if (!cfg.managed_gradient_accumulation)
    throw InputError(where + "managed_gradient_accumulation: false is not implemented by zerotrain; expected true "
                             "(the trainer steps every gradient_accumulation_steps micro-batches)");
  if (cfg.fp16.fp16_master_weights_and_grads)
    throw InputError(where + "fp16.fp16_master_weights_and_grads: needs CPU optimizer offload in DeepSpeed, which "
                             "zerotrain does not implement yet; expected false");
  EngineOptions o;
  const ZeroConfig& z = cfg.zero;
  o.stage = z.stage;
  o.overlap_comm = z.overlap_comm;
  o.contiguous_gradients = z.contiguous_gradients;
  o.reduce_bucket_size = at_least_one_element(z.reduce_bucket_size);
  o.allgather_bucket_size = at_least_one_element(z.allgather_bucket_size);
  o.sub_group_size = at_least_one_element(z.sub_group_size);
  o.prefetch_bucket_size = z.stage3_prefetch_bucket_size;
  o.max_live_parameters = z.stage3_max_live_parameters;
  o.max_reuse_distance = z.stage3_max_reuse_distance;
  o.param_persistence_threshold = z.stage3_param_persistence_threshold;
  o.quantized_weights_block = z.zero_quantized_weights ? kQuantizedWeightsBlock : 0;
  o.hpz_partition_size = static_cast<int>(std::min<int64_t>(z.zero_hpz_partition_size, 1 << 30));
  o.quantized_grads_block = z.zero_quantized_gradients ? kQuantizedGradientsBlock : 0;
  o.gradient_accumulation_steps = static_cast<int>(cfg.gradient_accumulation_steps);
  o.gradient_clipping = cfg.gradient_clipping;
  o.prescale_gradients = cfg.prescale_gradients;
  o.gradient_predivide_factor = cfg.gradient_predivide_factor;
  if (z.stage >= 2 && (cfg.prescale_gradients || cfg.gradient_predivide_factor != 1.0))
    throw InputError(where + "prescale_gradients / gradient_predivide_factor: not supported with ZeRO stage " +
                     std::to_string(z.stage) + " (reduce-scatter), as in DeepSpeed; expected false / 1.0");
  if (cfg.gradient_allreduce_op != "mean")
    throw InputError(where + "gradient_allreduce_op: \"" + cfg.gradient_allreduce_op +
                     "\" is not implemented by zerotrain; expected \"mean\"");
  o.compute_dtype = compute_dtype_of(cfg);
  // DeepSpeed: communication_data_type null => fp16 with fp16, bf16 with bf16, else fp32.
  o.wire_dtype = cfg.communication_data_type.value_or(o.compute_dtype);
  o.master_dtype = cfg.bf16.bf16_master_weights_and_grads ? DType::BF16 : DType::F32;
  o.moments_dtype = cfg.bf16.bf16_optimizer_states ? DType::BF16 : DType::F32;
  o.grad_accum_dtype = cfg.grad_accum_dtype.value_or(DType::F32);  // fp32 accumulation by default
  if (cfg.fp16.enabled) {
    o.check_overflow = true;
    if (cfg.fp16.dynamic()) {
      o.loss_scaler.flavor = z.stage == 0 ? LossScalerFlavor::NonZero : LossScalerFlavor::Zero;
      o.loss_scaler.initial_scale_power = static_cast<int>(cfg.fp16.initial_scale_power);
      o.loss_scaler.loss_scale_window = cfg.fp16.loss_scale_window;
      o.loss_scaler.hysteresis = cfg.fp16.hysteresis;
      o.loss_scaler.consecutive_hysteresis = cfg.fp16.consecutive_hysteresis;
      o.loss_scaler.min_loss_scale = static_cast<double>(cfg.fp16.min_loss_scale);
    } else {
      o.loss_scaler.flavor = LossScalerFlavor::Static;
      o.loss_scaler.static_scale = cfg.fp16.loss_scale;
    }
  } else {
    o.loss_scaler.flavor = LossScalerFlavor::Static;
    o.loss_scaler.static_scale = 1.0;
    // A step whose gradient norm is NaN/Inf is skipped in every dtype; bf16's check_grad_overflow
    // false opts out as in DeepSpeed (the step is applied).
    o.check_overflow = !cfg.bf16.enabled || cfg.bf16.check_grad_overflow;
  }
  o.optimizer = resolve_optimizer(cfg, client);
  o.offload = offload_options_from(cfg);
  return o;
}

std::unique_ptr<LrSchedule> schedule_from(const DsConfig& cfg, const OptimizerHparams& opt) {
  return make_lr_schedule(lr_schedule_of(cfg), opt.lr, opt.has_betas());
}

}  // namespace zt
