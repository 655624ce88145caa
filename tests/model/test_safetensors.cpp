// safetensors reader/writer and model weight files: round trips, HF names, malformed files.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/io/safetensors.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/init_rng.h"
#include "zerotrain/model/weights_io.h"

namespace zt {
namespace {

std::string tmp(const std::string& name) { return ::testing::TempDir() + "zt_st_" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A file from a header JSON text and a data block.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

// Expects an InputError mentioning the path and `part`.
void expect_bad(const std::string& path, const std::string& part) {
  try {
    SafetensorsReader r(path);
    FAIL() << "no error for " << path;
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
  }
}

TEST(Safetensors, RoundTripAllDtypes) {
  std::vector<float> a(24), b(7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.37f * i - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0f / (i + 1);
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    std::vector<unsigned char> ca(a.size() * dtype_size(t)), cb(b.size() * dtype_size(t));
    convert(a.data(), DType::F32, ca.data(), t, a.size());
    convert(b.data(), DType::F32, cb.data(), t, b.size());
    std::string path = tmp(std::string("rt_") + safetensors_dtype_name(t));
    write_safetensors(path, {{"layer.a", t, {2, 3, 4}, ca.data()}, {"b", t, {7}, cb.data()}}, {{"k", "v"}});
    SafetensorsReader r(path);
    ASSERT_EQ(r.entries().size(), 2u);
    EXPECT_EQ(r.metadata().at("k"), "v");
    const SafetensorsEntry* ea = r.find("layer.a");
    ASSERT_NE(ea, nullptr);
    EXPECT_EQ(ea->shape, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(ea->dtype, t);
    EXPECT_EQ(ea->dtype_name, safetensors_dtype_name(t));
    std::vector<float> back(a.size()), expect(a.size());
    convert(ca.data(), t, expect.data(), DType::F32, a.size());  // exactly what was stored
    r.read_f32(*ea, 0, 24, back.data());
    EXPECT_EQ(back, expect);
    std::vector<float> part(5);
    r.read_f32(*ea, 11, 5, part.data());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(part[i], expect[11 + i]);
    // data block is 8-byte aligned and the header is plain JSON
    std::string bytes = slurp(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u);
    auto j = nlohmann::json::parse(bytes.substr(8, n));
    EXPECT_EQ(j["b"]["dtype"], safetensors_dtype_name(t));
    EXPECT_EQ(j["b"]["data_offsets"][1].get<uint64_t>() - j["b"]["data_offsets"][0].get<uint64_t>(), 7 * dtype_size(t));
    EXPECT_EQ(bytes.size(), 8 + n + (24 + 7) * dtype_size(t));
  }
  EXPECT_EQ(SafetensorsReader(tmp("rt_F32")).find("missing"), nullptr);
}

TEST(Safetensors, MalformedFiles) {
  const std::string good_header = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string data(16, '\x01');
  spit(tmp("ok"), make_file(good_header, data));
  EXPECT_NO_THROW(SafetensorsReader r(tmp("ok")));

  spit(tmp("short"), std::string("\x05\x00\x00", 3));
  expect_bad(tmp("short"), "truncated");
  spit(tmp("hdrlen"), make_file(good_header, data).substr(0, 8 + 10));
  expect_bad(tmp("hdrlen"), "exceeds the file");
  std::string huge(8, '\xff');
  spit(tmp("huge"), huge + "{}");
  expect_bad(tmp("huge"), "header length");
  spit(tmp("json"), make_file(R"({"w":{"dtype":"F32",)", data));
  expect_bad(tmp("json"), "not valid JSON");
  spit(tmp("notobj"), make_file(R"([1,2,3])", ""));
  expect_bad(tmp("notobj"), "object");
  spit(tmp("trunc_data"), make_file(good_header, data.substr(0, 12)));
  expect_bad(tmp("trunc_data"), "past the end");
  spit(tmp("offsets"), make_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,40]}})", data));
  expect_bad(tmp("offsets"), "past the end");
  spit(tmp("order"), make_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}})", data));
  expect_bad(tmp("order"), "begin > end");
  spit(tmp("size"), make_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", data));
  expect_bad(tmp("size"), "needs 24");
  spit(tmp("dtype"), make_file(R"({"w":{"dtype":"Q7","shape":[2,2],"data_offsets":[0,16]}})", data));
  expect_bad(tmp("dtype"), "unknown dtype");
  spit(tmp("shape"), make_file(R"({"w":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}})", data));
  expect_bad(tmp("shape"), "shape");
  spit(tmp("fields"), make_file(R"({"w":{"dtype":"F32","data_offsets":[0,16]}})", data));
  expect_bad(tmp("fields"), "shape");
  spit(tmp("meta"), make_file(R"({"__metadata__":{"a":1}})", ""));
  expect_bad(tmp("meta"), "__metadata__");
  spit(tmp("overflow"), make_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}})", data));
  expect_bad(tmp("overflow"), "too large");
  expect_bad(tmp("does_not_exist"), "cannot open");
  // a readable file whose tensor has a non-float dtype: listed, but read_f32 refuses it
  spit(tmp("i64"), make_file(R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", data));
  SafetensorsReader r(tmp("i64"));
  std::vector<float> out(2);
  EXPECT_THROW(r.read_f32(*r.find("w"), 0, 2, out.data()), InputError);
}

// The tensors' byte ranges tile the data block exactly: each way of breaking it is an InputError
// naming the tensor (or the trailing bytes), and the tiling does not depend on the header's order.
TEST(Safetensors, OffsetsTileTheData) {
  const std::string data(24, '\x01');
  spit(tmp("tile_ok"), make_file(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                                 R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                                 R"("e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]}})", data));
  EXPECT_NO_THROW(SafetensorsReader r(tmp("tile_ok")));
  spit(tmp("overlap"), make_file(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data.substr(0, 16)));
  expect_bad(tmp("overlap"), "tensor \"b\": data_offsets [8, 16] overlap");
  spit(tmp("hole"), make_file(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})", data));
  expect_bad(tmp("hole"), "tensor \"b\": data_offsets [20, 24] leave a hole: bytes 16..20");
  spit(tmp("first_hole"), make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data.substr(0, 16)));
  expect_bad(tmp("first_hole"), "tensor \"a\"");
  spit(tmp("trailing"), make_file(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", data));
  expect_bad(tmp("trailing"), "8 trailing bytes after the last tensor");
  spit(tmp("same"), make_file(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                              R"("b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", data.substr(0, 16)));
  expect_bad(tmp("same"), "overlap");
  spit(tmp("dup"), make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data.substr(0, 16)));
  expect_bad(tmp("dup"), "tensor \"a\" is named twice");
  // A nested object's keys repeat freely (only tensor names must be unique).
  spit(tmp("nested"), make_file(R"({"__metadata__":{"a":"x"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                data.substr(0, 8)));
  EXPECT_NO_THROW(SafetensorsReader r(tmp("nested")));
}

class GptWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    dev = make_cpu_device();
    stream = dev->create_stream("compute");
    cfg.vocab_size = 13;
    cfg.n_ctx = 6;
    cfg.n_layer = 2;
    cfg.n_head = 2;
    cfg.n_embd = 8;
    ModelOptions opt;
    opt.device = dev.get();
    opt.stream = stream.get();
    model = make_gpt(cfg, opt);
  }
  std::vector<float> init_of(int i) const {
    const ParamSpec& p = model->params()[i];
    std::vector<float> v(p.numel);
    init_param_slice(99, p, 0, p.numel, v.data());
    return v;
  }
  // An HF-style file: optional prefix, the attn.bias / masked_bias buffers, lm_head.weight.
  std::string write_hf(const std::string& name, const std::string& prefix, DType t) {
    std::vector<std::vector<unsigned char>> store;
    std::vector<SafetensorsTensor> ts;
    for (size_t i = 0; i < model->params().size(); ++i) {
      const ParamSpec& p = model->params()[i];
      auto v = init_of(static_cast<int>(i));
      store.emplace_back(v.size() * dtype_size(t));
      convert(v.data(), DType::F32, store.back().data(), t, v.size());
      ts.push_back({prefix + p.name, t, p.shape, store.back().data()});
    }
    std::vector<float> mask(cfg.n_ctx * cfg.n_ctx, 1.0f), lm(cfg.vocab_size * cfg.n_embd, 5.0f);
    for (int l = 0; l < cfg.n_layer; ++l) {
      ts.push_back({prefix + "h." + std::to_string(l) + ".attn.bias", DType::F32, {1, 1, cfg.n_ctx, cfg.n_ctx}, mask.data()});
      ts.push_back({prefix + "h." + std::to_string(l) + ".attn.masked_bias", DType::F32, {1}, mask.data()});
    }
    ts.push_back({"lm_head.weight", DType::F32, {cfg.vocab_size, cfg.n_embd}, lm.data()});
    std::string path = tmp(name);
    write_safetensors(path, ts);
    return path;
  }

  std::unique_ptr<Device> dev;
  std::unique_ptr<Stream> stream;
  GptConfig cfg;
  std::unique_ptr<Model> model;
};

TEST_F(GptWeights, HfNamesWithPrefixAndIgnoredBuffers) {
  for (const std::string prefix : {"", "transformer."}) {
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      std::string path = write_hf("hf_" + std::to_string(int(t)) + prefix, prefix, t);
      ModelWeightsReader r(path, model->params());
      for (size_t i = 0; i < model->params().size(); ++i) {
        auto v = init_of(static_cast<int>(i));
        std::vector<float> expect(v.size()), got(v.size());
        std::vector<unsigned char> tmpb(v.size() * dtype_size(t));
        convert(v.data(), DType::F32, tmpb.data(), t, v.size());
        convert(tmpb.data(), t, expect.data(), DType::F32, v.size());
        r.read_param_slice(static_cast<int>(i), 0, static_cast<int64_t>(v.size()), got.data());
        ASSERT_EQ(got, expect) << model->params()[i].name << " prefix '" << prefix << "'";
      }
    }
  }
  // HF's names, as in gpt2/model.safetensors
  EXPECT_EQ(model->params()[0].name, "wte.weight");
  EXPECT_EQ(model->params()[1].name, "wpe.weight");
  EXPECT_EQ(model->params()[4].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(model->params()[4].shape, (std::vector<int64_t>{8, 24}));  // Conv1D [in, out]
  EXPECT_EQ(model->params()[12].name, "h.0.mlp.c_proj.weight");
  EXPECT_EQ(model->params()[12].shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(model->params().back().name, "ln_f.bias");
}

TEST_F(GptWeights, SaveLoadRoundTrip) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    std::string path = tmp("save_" + std::to_string(int(t)));
    save_model_weights(path, model->params(), t, [&](int i, float* out) {
      auto v = init_of(i);
      std::copy(v.begin(), v.end(), out);
    }, {{"model", "gpt-test"}});
    ModelWeightsReader r(path, model->params());
    EXPECT_EQ(r.file().metadata().at("model"), "gpt-test");
    EXPECT_EQ(r.file().metadata().at("format"), "pt");
    for (size_t i = 0; i < model->params().size(); ++i) {
      auto v = init_of(static_cast<int>(i));
      std::vector<float> got(v.size());
      r.read_param_slice(static_cast<int>(i), 0, static_cast<int64_t>(v.size()), got.data());
      const float tol = t == DType::F32 ? 0.0f : (t == DType::BF16 ? 1.0f / 128 : 1.0f / 1024);
      for (size_t k = 0; k < v.size(); ++k) ASSERT_NEAR(got[k], v[k], tol * std::fabs(v[k]) + 1e-7f);
    }
  }
}

TEST_F(GptWeights, WrongModelFileIsInputError) {
  auto expect_model_bad = [&](const std::vector<SafetensorsTensor>& ts, const std::string& part) {
    std::string path = tmp("wrong");
    write_safetensors(path, ts);
    try {
      ModelWeightsReader r(path, model->params());
      FAIL() << "no error, expected " << part;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  std::vector<float> big(10000, 0.5f);
  std::vector<SafetensorsTensor> all;
  for (const ParamSpec& p : model->params()) all.push_back({p.name, DType::F32, p.shape, big.data()});
  {  // wrong shape: c_attn stored [out, in] (Linear) instead of Conv1D [in, out]
    auto ts = all;
    ts[4].shape = {24, 8};
    expect_model_bad(ts, "shape");
  }
  {  // missing parameter
    auto ts = all;
    ts.pop_back();
    expect_model_bad(ts, "missing parameter \"ln_f.bias\"");
  }
  {  // unknown tensor
    auto ts = all;
    ts.push_back({"h.7.attn.c_attn.weight", DType::F32, {8, 24}, big.data()});
    expect_model_bad(ts, "unexpected tensor");
  }
  {  // non-float dtype for a model parameter: write an I64-typed wpe by hand
    std::string header = R"({"wpe.weight":{"dtype":"I32","shape":[6,8],"data_offsets":[0,192]}})";
    std::string path = tmp("i32model");
    spit(path, make_file(header, std::string(192, '\0')));
    try {
      ModelWeightsReader r(path, {model->params()[1]});
      FAIL();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("I32"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace zt
