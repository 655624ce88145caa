// Model file parsing and validation: every bad file is an InputError naming the file and key.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/model/model_config.h"

namespace zt {
namespace {

using json = nlohmann::json;

// Expects parse to throw InputError whose message contains every string in `parts`.
void expect_error(const std::string& text, std::initializer_list<std::string> parts) {
  try {
    parse_model_config(json::parse(text), "models/bad.json");
    FAIL() << "no error for " << text;
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("models/bad.json"), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
  }
}

const char* kGpt = R"({"type":"gpt","vocab_size":64,"n_ctx":32,"n_layer":2,"n_head":2,"n_embd":32})";

TEST(ModelConfig, ParsesGpt) {
  ModelConfig c = parse_model_config(json::parse(kGpt), "x.json");
  ASSERT_EQ(c.type, ModelConfig::Type::GPT);
  EXPECT_EQ(c.gpt.vocab_size, 64);
  EXPECT_EQ(c.gpt.n_ctx, 32);
  EXPECT_EQ(c.gpt.n_layer, 2);
  EXPECT_EQ(c.gpt.n_head, 2);
  EXPECT_EQ(c.gpt.n_embd, 32);
  EXPECT_FLOAT_EQ(c.gpt.init_std, 0.02f);
  json j = json::parse(kGpt);
  j["init_std"] = 0.1;
  EXPECT_FLOAT_EQ(parse_model_config(j, "x.json").gpt.init_std, 0.1f);
}

TEST(ModelConfig, ParsesMlp) {
  ModelConfig c = parse_model_config(
      json::parse(R"({"type":"mlp","dims":[3,8,2],"activation":"relu","task":"classification","name":"m"})"), "x");
  ASSERT_EQ(c.type, ModelConfig::Type::MLP);
  EXPECT_EQ(c.mlp.dims, (std::vector<int64_t>{3, 8, 2}));
  EXPECT_EQ(c.mlp.activation, Activation::ReLU);
  EXPECT_EQ(c.mlp.task, MlpTask::Classification);
  EXPECT_EQ(c.mlp.init_std, 0.0f);  // fan-in default
  EXPECT_EQ(c.name, "m");
}

TEST(ModelConfig, BundledFilesParse) {
  for (const char* f : {"gpt-tiny.json", "gpt2-124m.json", "mlp-tiny.json"}) {
    std::string path = std::string(ZT_SOURCE_DIR) + "/configs/models/" + f;
    EXPECT_NO_THROW(parse_model_config_file(path)) << path;
  }
  ModelConfig c = parse_model_config_file(std::string(ZT_SOURCE_DIR) + "/configs/models/gpt2-124m.json");
  EXPECT_EQ(c.gpt.vocab_size, 50257);
  EXPECT_EQ(c.gpt.n_embd, 768);
}

TEST(ModelConfig, MissingKey) {
  expect_error(R"({"type":"gpt","vocab_size":64,"n_ctx":32,"n_layer":2,"n_embd":32})", {"n_head", "missing"});
  expect_error(R"({"vocab_size":64})", {"type", "missing"});
  expect_error(R"({"type":"mlp","activation":"relu","task":"regression"})", {"dims", "missing"});
  expect_error(R"({"type":"mlp","dims":[2,2],"task":"regression"})", {"activation", "missing"});
}

TEST(ModelConfig, WrongType) {
  expect_error(R"({"type":"gpt","vocab_size":"64","n_ctx":32,"n_layer":2,"n_head":2,"n_embd":32})", {"vocab_size", "integer"});
  expect_error(R"({"type":"gpt","vocab_size":64.5,"n_ctx":32,"n_layer":2,"n_head":2,"n_embd":32})", {"vocab_size"});
  expect_error(R"({"type":"gpt","vocab_size":64,"n_ctx":-1,"n_layer":2,"n_head":2,"n_embd":32})", {"n_ctx", "positive"});
  expect_error(R"({"type":"gpt","vocab_size":64,"n_ctx":32,"n_layer":0,"n_head":2,"n_embd":32})", {"n_layer"});
  expect_error(R"({"type":"mlp","dims":"3,4","activation":"relu","task":"regression"})", {"dims", "array"});
  expect_error(R"({"type":"mlp","dims":[3],"activation":"relu","task":"regression"})", {"dims"});
  expect_error(R"({"type":"mlp","dims":[3,0,2],"activation":"relu","task":"regression"})", {"dims", "entry 1"});
  expect_error(R"({"type":"mlp","dims":[3,2],"activation":1,"task":"regression"})", {"activation", "string"});
  expect_error(R"({"type":"transformer"})", {"type", "transformer"});
  expect_error(R"([1,2])", {"object"});
  json j = json::parse(kGpt);
  j["init_std"] = -0.1;
  expect_error(j.dump(), {"init_std"});
  j["init_std"] = "big";
  expect_error(j.dump(), {"init_std"});
}

TEST(ModelConfig, HeadsMustDivideEmbedding) {
  expect_error(R"({"type":"gpt","vocab_size":64,"n_ctx":32,"n_layer":2,"n_head":3,"n_embd":32})", {"n_embd", "n_head"});
}

TEST(ModelConfig, BadEnumValues) {
  expect_error(R"({"type":"mlp","dims":[3,2],"activation":"tanh","task":"regression"})", {"activation", "tanh", "gelu"});
  expect_error(R"({"type":"mlp","dims":[3,2],"activation":"gelu","task":"ranking"})", {"task", "ranking"});
  expect_error(R"({"type":"mlp","dims":[3,1],"activation":"gelu","task":"classification"})", {"dims", "2 outputs"});
}

TEST(ModelConfig, UnknownKeyIsAnError) {
  expect_error(R"({"type":"gpt","vocab_size":64,"n_ctx":32,"n_layer":2,"n_head":2,"n_embd":32,"n_embed":32})", {"n_embed", "unknown"});
  // free-form keys are fine
  EXPECT_NO_THROW(parse_model_config(
      json::parse(R"({"type":"mlp","dims":[2,2],"activation":"gelu","task":"regression","_note":1,"description":"d"})"), "x"));
}

TEST(ModelConfig, FileErrors) {
  EXPECT_THROW(parse_model_config_file("/nonexistent/model.json"), InputError);
  std::string path = ::testing::TempDir() + "zt_bad_model.json";
  { std::ofstream(path) << "{\"type\": \"gpt\", "; }
  try {
    parse_model_config_file(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("JSON"), std::string::npos);
  }
}

}  // namespace
}  // namespace zt
