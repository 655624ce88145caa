// model_dump — one forward and backward of a model on the CPU in fp32, written out for comparison
// against an independent implementation (tests/model/torch_reference.py).
//
//   model_dump --model M.json --weights W.safetensors --tokens F --B b --T t --out OUT.safetensors
//
// W holds every parameter under its Hugging Face name (what train --init-from reads). F is a
// token file as train --data tokens:F reads it (llm.c header or raw uint16); the batch is the
// trainer's first global batch of b sequences of t tokens: sequence i is tokens [i·t, i·t + t]
// (inputs the first t, targets the last t). OUT holds (fp32):
//   "loss"               []      mean cross-entropy over the batch (nats)
//   "logits"             [b·t, V]
//   "grad.<param name>"  the parameter's shape: d loss / d param (dloss = 1)
// Exit codes: 0 ok, 2 bad input (flags, model, weights, tokens), 1 internal error.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/data/token_file.h"
#include "zerotrain/io/safetensors.h"
#include "zerotrain/model/local_state.h"
#include "zerotrain/model/unit_runner.h"
#include "zerotrain/model/weights_io.h"

namespace zt {
namespace {

constexpr const char* kUsage =
    "usage: model_dump --model M.json --weights W.safetensors --tokens F --B b --T t --out OUT.safetensors";

struct Args {
  std::map<std::string, std::string> v;  // flag -> value
  int64_t B = 0, T = 0;
};

int64_t positive(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || x <= 0 || x > (1LL << 31))
    throw InputError("model_dump: " + flag + " '" + s + "': expected an integer in [1, 2^31]");
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  const char* flags[] = {"--model", "--weights", "--tokens", "--B", "--T", "--out"};
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    bool known = false;
    for (const char* k : flags) known = known || f == k;
    if (!known) throw InputError("model_dump: unknown flag '" + f + "'\n" + kUsage);
    if (i + 1 >= argc) throw InputError("model_dump: " + f + " needs a value\n" + kUsage);
    a.v[f] = argv[i + 1];
  }
  for (const char* k : flags)
    if (!a.v.count(k)) throw InputError(std::string("model_dump: ") + k + " is required\n" + kUsage);
  a.B = positive("--B", a.v["--B"]);
  a.T = positive("--T", a.v["--T"]);
  return a;
}

int run(const Args& a) {
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<Stream> stream = dev->create_stream("compute");
  ModelOptions opt;
  opt.compute_dtype = DType::F32;
  opt.micro_batch = a.B;
  opt.device = dev.get();
  opt.stream = stream.get();
  std::unique_ptr<Model> model = load_model(a.v.at("--model"), opt);
  LocalModelState state(*model, *dev, *stream, DType::F32);
  state.load(ModelWeightsReader(a.v.at("--weights"), model->params()));

  // The trainer's reader and its first global batch; token ids are checked against the model's
  // vocabulary by set_batch.
  const TokenFileDataset data(a.v.at("--tokens"), TokenFileDataset::Format::Auto, INT32_MAX, a.T, a.B);
  Batch batch;
  data.fill(0, 0, a.B, batch);

  model->set_batch(batch);
  run_forward(*model);
  float loss = 0.0f;
  dev->memcpy_async(&loss, model->loss_device(), sizeof(float), CopyKind::DeviceToHost, *stream);
  const std::vector<float> logits = model->forward_logits();  // waits for the stream
  run_backward(*model, 1.0f);
  const std::vector<float> grads = state.grads();             // waits for the stream

  const int64_t rows = a.B * a.T;
  ZT_CHECK(logits.size() % static_cast<size_t>(rows) == 0, "forward_logits: size is not a multiple of B*T");
  const int64_t V = static_cast<int64_t>(logits.size()) / rows;
  std::vector<SafetensorsTensor> out = {{"loss", DType::F32, {}, &loss}, {"logits", DType::F32, {rows, V}, logits.data()}};
  const auto& specs = model->params();
  for (size_t i = 0; i < specs.size(); ++i)
    out.push_back({"grad." + specs[i].name, DType::F32, specs[i].shape, grads.data() + state.offsets()[i]});
  write_safetensors(a.v.at("--out"), out);
  std::printf("model_dump: %s; B=%lld T=%lld loss %.6f nats; wrote %s\n", model->describe().c_str(),
              static_cast<long long>(a.B), static_cast<long long>(a.T), static_cast<double>(loss), a.v.at("--out").c_str());
  return 0;
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  try {
    return zt::run(zt::parse(argc, argv));
  } catch (const zt::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_dump: internal error: %s\n", e.what());
    return 1;
  }
}
