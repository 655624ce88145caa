// cmd_sample.cpp — `zerotrain sample`: text from a trained GPT or Llama, one forward per new token
// over a key/value cache (model/decoder.h), greedy or seeded temperature / top-k / top-p sampling
// (model/sampler.h). One process, no MPI.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "cli_flags.h"
#include "commands.h"
#include "sample_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/decoder.h"

namespace zt {
namespace {

const char* usage() {
  return "usage: zerotrain sample (--weights F.safetensors|DIR | --resume CKPT [--tag T]) --model MODEL.json\n"
         "                        --prompt TEXT --tokens N [--temperature t] [--top-k k] [--top-p p] [--seed s]\n"
         "                        [--tokenizer T.json] [--device auto|cpu|cuda]\n"
         "  --weights F|DIR   a weights file (fp32, bf16 or fp16; train --save-weights, consolidate, Hugging Face\n"
         "                    GPT-2 or Llama) or a folder holding model.safetensors\n"
         "  --resume CKPT     a checkpoint directory (its 'latest', or --tag T): its fp32 master weights\n"
         "  --model MODEL.json  the GPT or Llama the weights belong to (names and shapes must match)\n"
         "  --prompt TEXT     encoded by --tokenizer; without one byte-level: each byte of TEXT is one id (0..255)\n"
         "  --tokenizer T.json  a byte-level BPE tokenizer.json (zerotrain tokenize train, or Hugging Face's):\n"
         "                    encodes the prompt and decodes the sample\n"
         "  --tokens N        new tokens to generate (>= 1). Generation stops early when the sequence reaches\n"
         "                    n_ctx + 1 tokens: every forward is at a position < n_ctx (no sliding window)\n"
         "  --temperature t   >= 0 (default 1); 0 = greedy (argmax; top-k, top-p and seed unused)\n"
         "  --top-k k         sample among the k most likely tokens (default 0 = all)\n"
         "  --top-p p         then keep the smallest set of most likely tokens with mass >= p, in (0, 1] (default 1)\n"
         "  --seed s          draw i uses a uniform that depends only on (s, i): the same tokens on every run\n"
         "                    and backend for the same logits (default 0)\n"
         "  --device D        where the forwards run (default auto: a CUDA GPU when one is visible)\n"
         "  Output: the prompt followed by the generated text on stdout; timing on stderr.\n"
         "  Ids the codec has no text for (>= 256 without a tokenizer) print as <|id|>.\n"
         "exit codes: 0 ok, 1 internal error, 2 bad input (the message names it)\n";
}

struct SampleArgs {
  std::string weights, resume, tag, model, prompt, tokenizer, device = "auto";
  bool prompt_given = false;
  int64_t tokens = 0;
  SamplingOptions sampling;
};

double parse_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw InputError("sample: " + flag + " '" + text + "': expected a finite number");
  return v;
}

int64_t parse_count(const std::string& flag, const std::string& text, int64_t lo) {
  bool digits = !text.empty();
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  errno = 0;
  const long long v = digits ? std::strtoll(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || v < lo)
    throw InputError("sample: " + flag + " '" + text + "': expected an integer >= " + std::to_string(lo));
  return v;
}

bool is_sampling_flag(const std::string& f) {
  return f == "--temperature" || f == "--top-k" || f == "--top-p" || f == "--seed";
}

void set_sampling_flag(SamplingOptions& o, const std::string& f, const std::string& v) {
  if (f == "--temperature") o.temperature = parse_number(f, v);
  else if (f == "--top-k") o.top_k = parse_count(f, v, 0);
  else if (f == "--top-p") o.top_p = parse_number(f, v);
  else o.seed = static_cast<uint64_t>(parse_count(f, v, 0));
}

void check_sample_args(const SampleArgs& a) {
  if (a.weights.empty() == a.resume.empty())
    throw InputError(std::string("sample: give one of --weights F|DIR and --resume CKPT\n") + usage());
  if (!a.tag.empty() && a.resume.empty()) throw InputError("sample: --tag names the checkpoint of --resume CKPT, which is missing");
  if (a.model.empty() || !a.prompt_given || a.tokens == 0)
    throw InputError(std::string("sample: --model, --prompt and --tokens are required\n") + usage());
  if (a.device != "auto" && a.device != "cpu" && a.device != "cuda")
    throw InputError("sample: --device '" + a.device + "': expected auto, cpu or cuda");
  validate_sampling_options(a.sampling, "sample");
}

SampleArgs parse_sample_args(int argc, char** argv) {
  SampleArgs a;
  const std::map<std::string, std::string*> text_flags = {
      {"--weights", &a.weights}, {"--resume", &a.resume}, {"--tag", &a.tag}, {"--model", &a.model}, {"--device", &a.device},
      {"--tokenizer", &a.tokenizer}};
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    // An empty --prompt gets its own message, once encoded ("empty prompt", sample_setup.cpp).
    const auto value = [&] { return std::string(flag_value("sample", argc, argv, i, usage(), f == "--prompt")); };
    const auto text = text_flags.find(f);
    if (text != text_flags.end()) *text->second = value();
    else if (f == "--prompt") { a.prompt = value(); a.prompt_given = true; }
    else if (f == "--tokens") a.tokens = parse_count(f, value(), 1);
    else if (is_sampling_flag(f)) set_sampling_flag(a.sampling, f, value());
    else throw InputError("sample: unknown flag '" + f + "'\n" + usage());
  }
  check_sample_args(a);
  return a;
}

std::unique_ptr<Device> sample_device(const std::string& want) {
  const int gpus = cuda_device_count();
  if (want == "cuda" && gpus == 0) throw InputError("sample: --device cuda, but no CUDA GPU is visible");
  return want == "cuda" || (want == "auto" && gpus > 0) ? make_cuda_device(0) : make_cpu_device();
}

int run_sample(const SampleArgs& a) {
  const ModelConfig mc = parse_model_config_file(a.model);
  if (!mc.is_token_model())
    throw InputError("sample: --model " + a.model + " is an MLP; sampling needs a token model file (gpt or llama)");
  const std::unique_ptr<TextCodec> codec = make_text_codec(a.tokenizer);
  const std::vector<int32_t> prompt = encode_prompt(*codec, a.prompt, mc, "sample: --prompt");
  std::unique_ptr<Device> dev = sample_device(a.device);
  std::unique_ptr<Stream> stream = dev->create_stream("sample");
  const std::vector<ParamSpec> specs = decoder_param_specs(mc, *dev, *stream);
  const auto t0 = std::chrono::steady_clock::now();
  const std::unique_ptr<Decoder> decoder =
      make_decoder(mc,
                   a.resume.empty() ? read_weights_for_sampling(a.weights, specs)
                                    : read_checkpoint_for_sampling(a.resume, a.tag, specs),
                   *dev, *stream);
  const auto t1 = std::chrono::steady_clock::now();
  const Generation g = generate(*decoder, prompt, a.tokens, a.sampling);
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const std::string text = a.prompt + decode_tokens(*codec, g.tokens);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "sample: %zu token(s) after a %zu-token prompt on %s: weights loaded in %.2f s, generated in "
               "%.3f s (%.1f tokens/s, one forward per token over a key/value cache)\n", g.tokens.size(),
               prompt.size(), dev->description().c_str(),
               std::chrono::duration<double>(t1 - t0).count(), gen_s, static_cast<double>(g.tokens.size()) / std::max(gen_s, 1e-9));
  if (g.context_full)
    std::fprintf(stderr, "sample: stopped after %zu of %lld token(s): the sequence filled the model's context "
                 "(n_ctx=%lld positions)\n", g.tokens.size(), static_cast<long long>(a.tokens),
                 static_cast<long long>(mc.context_length()));
  return 0;
}

}  // namespace

int cmd_sample(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::printf("%s", usage());
      return 0;
    }
  }
  try {
    return run_sample(parse_sample_args(argc, argv));
  } catch (const InputError& e) {
    std::fprintf(stderr, "zerotrain sample: error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
