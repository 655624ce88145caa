// HJSON reader (docs/config.md §1.1, §17.1, §17.7) and file loading.
#include <fstream>

#include "cfg_test.h"
#include "zerotrain/config/hjson.h"

using zt::Json;
using zt::parse_hjson;
using namespace zt_test;

namespace {
std::string parse_error(const std::string& text) {
  try {
    parse_hjson(text, "f.json");
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Hjson, PlainJson) {
  Json j = parse_hjson(R"({"a": 1, "b": [true, false, null], "c": {"d": "x\"y\u00e9"}, "e": -2.5})", "f");
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"], Json::array({true, false, nullptr}));
  EXPECT_EQ(j["c"]["d"], "x\"y\xc3\xa9");
  EXPECT_DOUBLE_EQ(j["e"].get<double>(), -2.5);
}

TEST(Hjson, CommentsOfAllThreeKinds) {
  Json j = parse_hjson("// line\n{ # hash\n \"a\": 1, /* block\n over lines */ \"b\": 2 // tail\n}\n# end", "f");
  EXPECT_EQ(j, Json({{"a", 1}, {"b", 2}}));
}

TEST(Hjson, TrailingCommas) {
  Json j = parse_hjson(R"({"a": [1, 2, ], "b": {"c": 3,},})", "f");
  EXPECT_EQ(j["a"], Json::array({1, 2}));
  EXPECT_EQ(j["b"]["c"], 3);
}

TEST(Hjson, SingleQuotesUnquotedKeysAndQuotelessValues) {
  Json j = parse_hjson("{\n  key: 'it\\'s'\n  other: yes\n  'q': hello world  \n  n: 5\n  t: true\n}", "f");
  EXPECT_EQ(j["key"], "it's");
  EXPECT_EQ(j["other"], "yes");
  EXPECT_EQ(j["q"], "hello world");
  EXPECT_EQ(j["n"], 5);
  EXPECT_EQ(j["t"], true);
}

TEST(Hjson, QuotelessValueRunsToEndOfLine) {
  // §17.7: on one line the quoteless value swallows the closing brace -> syntax error.
  EXPECT_NE(parse_error(R"({"x": yes})"), "");
  // a keyword or number before a delimiter is still that value
  Json j = parse_hjson(R"({"x": 5, "y": true, "z": null})", "f");
  EXPECT_EQ(j["x"], 5);
  EXPECT_EQ(j["y"], true);
  EXPECT_TRUE(j["z"].is_null());
  Json k = parse_hjson("{\n\"x\": yes\n}", "f");
  EXPECT_EQ(k["x"], "yes");
}

TEST(Hjson, ByteOrderMark) {
  Json j = parse_hjson("\xEF\xBB\xBF{\"a\": 1}", "f");
  EXPECT_EQ(j["a"], 1);
}

TEST(Hjson, EmptyAndCommentOnlyAreEmptyObjects) {
  EXPECT_EQ(parse_hjson("", "f"), Json::object());
  EXPECT_EQ(parse_hjson("  // nothing\n /* here */ # at all\n", "f"), Json::object());
  // ...and then fail the batch-size rule (§17.7).
  EXPECT_NE(error_of("// only a comment\n").find("train_batch_size"), std::string::npos);
}

TEST(Hjson, BracelessRoot) {
  Json j = parse_hjson("train_batch_size: 8\nfp16: {enabled: true}\n", "f");
  EXPECT_EQ(j["train_batch_size"], 8);
  EXPECT_EQ(j["fp16"]["enabled"], true);
}

TEST(Hjson, TopLevelArrayOrNumberRejected) {
  EXPECT_NE(parse_error("[1, 2]").find("top level must be an object"), std::string::npos);
  EXPECT_NE(parse_error("5").find("top level must be an object"), std::string::npos);
  EXPECT_NE(parse_error("\"x\"").find("top level must be an object"), std::string::npos);
}

TEST(Hjson, DuplicateKeysAtAnyLevel) {
  std::string e = parse_error("{\"train_batch_size\": 8,\n \"train_batch_size\": 16}");
  EXPECT_NE(e.find("duplicate key `train_batch_size`"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  e = parse_error(R"({"zero_optimization": {"stage": 1, "stage": 2}})");
  EXPECT_NE(e.find("duplicate key `zero_optimization.stage`"), std::string::npos) << e;
  e = parse_error(R"({"a": [{"b": 1, b: 2}]})");
  EXPECT_NE(e.find("duplicate key `a[0].b`"), std::string::npos) << e;
}

TEST(Hjson, NumbersFollowTheFileIntegerRule) {
  Json j = parse_hjson(R"({"a": 5e8, "b": 32.0, "c": 1.0, "d": 1e12, "e": 0.5, "f": -3.0, "g": 9999999999.0,
                          "h": 10000000000.0, "i": 9223372036854775807})", "f");
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_EQ(j["a"], 500000000);
  EXPECT_TRUE(j["b"].is_number_integer());
  EXPECT_EQ(j["b"], 32);
  EXPECT_TRUE(j["c"].is_number_integer());
  EXPECT_TRUE(j["d"].is_number_float());
  EXPECT_DOUBLE_EQ(j["d"].get<double>(), 1e12);
  EXPECT_TRUE(j["e"].is_number_float());
  EXPECT_EQ(j["f"], -3);
  EXPECT_TRUE(j["g"].is_number_integer());
  EXPECT_TRUE(j["h"].is_number_float());
  EXPECT_EQ(j["i"].get<int64_t>(), INT64_MAX);
}

TEST(Hjson, NumberOverflowRejected) {
  EXPECT_NE(parse_error(R"({"a": 1e999})").find("out of range"), std::string::npos);
}

TEST(Hjson, SyntaxErrorsNameLineAndColumn) {
  std::string e = parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}");
  EXPECT_NE(e.find("config f.json: line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("expected ':'"), std::string::npos) << e;
  EXPECT_NE(parse_error("{\"a\": \"unterminated\n}").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\": 1").find("unterminated object"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\": 1} x").find("after the end"), std::string::npos);
  EXPECT_NE(parse_error("{/* open").find("unterminated /*"), std::string::npos);
}

TEST(Hjson, MultilineString) {
  Json j = parse_hjson("{\n  s:\n    '''\n    one\n      two\n    '''\n}", "f");
  EXPECT_EQ(j["s"], "one\n  two");
}

TEST(Hjson, KeyOrderIsKept) {
  Json j = parse_hjson(R"({"z": 1, "a": 2, "m": 3})", "f");
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
}

TEST(Hjson, MissingFileIsInputError) {
  try {
    zt::parse_hjson_file("/nonexistent/dir/ds.json");
    FAIL() << "no error";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(Hjson, FileWithDuplicateKeyRejectedByLoader) {  // §13.1 #7
  std::string path = ::testing::TempDir() + "/dup.json";
  std::ofstream(path) << "{\"train_batch_size\": 2, \"train_batch_size\": 2}";
  try {
    zt::load_ds_config(path, world(1));
    FAIL() << "no error";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key"), std::string::npos);
  }
}

TEST(Hjson, ExampleConfigsLoad) {  // configs/ds/*.json, including the HJSON-commented one
  for (const char* f : {"stage0.json", "stage1.json", "stage2.json", "stage3.json", "bf16.json", "fp16.json",
                        "hjson_commented.json", "stage3_offload.json", "lamb_stage2.json"}) {
    std::string path = std::string(ZT_REPO_ROOT) + "/configs/ds/" + f;
    EXPECT_NO_THROW(zt::load_ds_config(path, world(2))) << path;
  }
}

TEST(Hjson, SameConfigAsJsonAndHjsonResolvesIdentically) {  // §13.1 #12
  const char* json = R"({"train_batch_size": 16, "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e7},
                         "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}})";
  const char* hjson = "# same config, HJSON style\n{\n  train_batch_size: 16\n  zero_optimization: {\n    stage: 2\n"
                      "    reduce_bucket_size: 5e7, // elements\n  }\n  optimizer: {type: 'AdamW', params: {lr: 0.001,},},\n}\n";
  EXPECT_EQ(resolve(json, world(2)).resolved, resolve(hjson, world(2)).resolved);
}
