// train_sample.cpp — samples during training (train_sample.h).
#include "train_sample.h"

#include <cstdio>
#include <sstream>

#include "sample_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/decoder.h"

namespace zt {

void check_sample_flags(const TrainArgs& args, const ModelConfig& model) {
  if (args.sample_every == 0) return;
  if (!model.is_token_model())
    throw InputError("train: --sample-every needs a token model (gpt or llama); --model " + model.source +
                     " is an MLP");
  encode_prompt(*make_text_codec(args.sample_tokenizer), args.sample_prompt, model, "train: --sample-prompt");
}

TrainSampler::TrainSampler(const TrainArgs& args, const ModelConfig& model)
    : every_(args.sample_every), tokens_(args.sample_tokens), prompt_text_(args.sample_prompt),
      codec_(make_text_codec(args.sample_tokenizer)) {
  if (!enabled()) return;
  model_ = model;
  prompt_ = encode_prompt(*codec_, prompt_text_, model_, "train: --sample-prompt");
  options_.temperature = args.sample_temperature;
  options_.seed = args.seed;
}

bool TrainSampler::due(int64_t step, int64_t last_step) const {
  return enabled() && (step % every_ == 0 || step == last_step);
}

void TrainSampler::sample(ZeroEngine& engine, Communicator& comm, const std::vector<ParamSpec>& specs, int64_t step) {
  const bool root = comm.rank() == 0;
  std::vector<std::vector<float>> weights(root ? specs.size() : 0);
  engine.stream_parameters(0, [&](int p, const float* values) {  // every rank: the gather is collective
    if (root) weights[static_cast<size_t>(p)].assign(values, values + specs[static_cast<size_t>(p)].numel);
  });
  if (!root) return;
  std::unique_ptr<Device> host = make_cpu_device();  // its own tracker: training's stays as it is
  std::unique_ptr<Stream> stream = host->create_stream("sample");
  const std::unique_ptr<Decoder> decoder = make_decoder(model_, weights, *host, *stream);
  const Generation g = generate(*decoder, prompt_, tokens_, options_);
  std::istringstream lines(prompt_text_ + decode_tokens(*codec_, g.tokens));
  for (std::string line; std::getline(lines, line);)
    std::printf("sample @ step %lld: %s\n", static_cast<long long>(step), line.c_str());
  if (g.context_full)
    std::printf("sample @ step %lld: (stopped after %zu token(s): the sequence filled n_ctx=%lld positions)\n",
                static_cast<long long>(step), g.tokens.size(), static_cast<long long>(model_.context_length()));
  std::fflush(stdout);
}

}  // namespace zt
