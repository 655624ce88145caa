// Byte-level BPE: the pre-tokenizer pattern, merges applied by rank, training's first merges and
// tie-break, encode∘decode on random bytes, tokenizer.json round trips and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../csrc/data/tokenizer_internal.h"
#include "zerotrain/core/check.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/data/token_file.h"
#include "zerotrain/data/tokenizer.h"

namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "zt_tok_" + name; }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (auto p : zt::gpt2_pretokenize(text)) out.emplace_back(p);
  return out;
}

// A tokenizer.json with the 256 byte tokens (GPT-2 order) and `merges` ("a b", ASCII tokens).
nlohmann::json tiny_json(const std::vector<std::string>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  std::vector<std::pair<char32_t, int>> order;
  for (int b = 0; b < 256; ++b) order.emplace_back(zt::bpe::byte_char(static_cast<uint8_t>(b)), b);
  std::sort(order.begin(), order.end());
  uint32_t id = 0;
  for (auto [cp, b] : order) vocab[zt::bpe::bytes_to_json_token(std::string(1, static_cast<char>(b)))] = id++;
  for (const std::string& m : merges) {
    std::string joined = m;
    joined.erase(joined.find(' '), 1);
    if (!vocab.contains(joined)) vocab[joined] = id++;
  }
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

zt::Tokenizer load_json(const nlohmann::json& j, const std::string& name) {
  const std::string path = temp_path(name);
  write_file(path, j.dump());
  return zt::Tokenizer::load(path);
}

std::vector<std::string> token_strings(const zt::Tokenizer& t, const std::vector<uint32_t>& ids) {
  std::vector<std::string> out;
  for (uint32_t id : ids) out.push_back(t.token_bytes(id));
  return out;
}

using V = std::vector<std::string>;

// The header and uint16 tokens of an llm.c version 1 file.
std::vector<uint32_t> read_llmc_v1(const std::string& path, std::vector<int32_t>* header) {
  std::ifstream f(path, std::ios::binary);
  header->assign(256, 0);
  f.read(reinterpret_cast<char*>(header->data()), 1024);
  std::vector<uint16_t> got(static_cast<size_t>(std::max((*header)[2], 0)));
  f.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * 2));
  EXPECT_EQ(f.peek(), EOF);
  return std::vector<uint32_t>(got.begin(), got.end());
}

TEST(Pretokenize, Gpt2Pattern) {
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("it's we'll they're"), (V{"it", "'s", " we", "'ll", " they", "'re"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces("Hello\n\nWorld"), (V{"Hello", "\n", "\n", "World"}));
  EXPECT_EQ(pieces("x   \n"), (V{"x", "   \n"}));  // a run followed by the end is whole
  EXPECT_EQ(pieces("abc 123 4.5!!"), (V{"abc", " 123", " 4", ".", "5", "!!"}));
  EXPECT_EQ(pieces(" !?x"), (V{" !?", "x"}));
  EXPECT_EQ(pieces("caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87"), (V{"caf\xC3\xA9", " \xE4\xB8\xAD\xE6\x96\x87"}));
  EXPECT_EQ(pieces("x\xC2\xA0y"), (V{"x", "\xC2\xA0", "y"}));  // NBSP is whitespace
  EXPECT_EQ(pieces("\xFF\xFEz"), (V{"\xFF\xFE", "z"}));          // invalid bytes: other characters
  EXPECT_EQ(pieces("\xC2\xB2\xC2\xBD"), (V{"\xC2\xB2\xC2\xBD"}));  // superscript two, one half: \p{N}
}

TEST(Pretokenize, SafeSplitPointsKeepThePretokens) {
  const std::string text = "alpha beta\ngamma  delta\n\nepsilon's zeta, eta\ntheta";
  for (size_t window = 1; window <= text.size(); ++window) {
    const size_t p = zt::safe_split_point(text, window);
    if (p == 0) continue;
    auto joined = pieces(text.substr(0, p));
    for (auto& s : pieces(text.substr(p))) joined.push_back(s);
    EXPECT_EQ(joined, pieces(text)) << "split at " << p;
  }
  EXPECT_EQ(zt::safe_split_point("abc\ndef", 100), 4u);
  // Never inside an added token: "<|end of|>" holds the point before "of".
  EXPECT_EQ(zt::safe_split_point("ab cd<|end of|>", 100), 10u);
  EXPECT_EQ(zt::safe_split_point("ab cd<|end of|>", 100, {"<|end of|>"}), 2u);
  EXPECT_EQ(zt::safe_split_point("x<|end of|>", 100, {"<|end of|>"}), 0u);
  EXPECT_EQ(zt::safe_split_point("x<|end of|>", 100), 6u);
  EXPECT_EQ(zt::safe_split_point("abc\n\ndef", 100), 0u);  // a lone '\n' only
  EXPECT_EQ(zt::safe_split_point("abcdef", 100), 0u);
}

TEST(Bpe, MergesApplyInRankOrder) {
  // "b c" outranks "a b": abcd -> a, bc, d -> a, bcd.
  const zt::Tokenizer t = load_json(tiny_json({"b c", "a b", "bc d", "ab cd", "c d"}), "rank1.json");
  EXPECT_EQ(token_strings(t, t.encode("abcd")), (V{"a", "bcd"}));
  // "c d" and "a b" before "bc": abcd -> ab, cd -> abcd.
  const zt::Tokenizer u = load_json(tiny_json({"c d", "a b", "ab cd", "b c"}), "rank2.json");
  EXPECT_EQ(token_strings(u, u.encode("abcd")), (V{"abcd"}));
  // Equal ranks: leftmost first, so "aaa" -> aa, a.
  const zt::Tokenizer w = load_json(tiny_json({"a a"}), "rank3.json");
  EXPECT_EQ(token_strings(w, w.encode("aaa")), (V{"aa", "a"}));
  EXPECT_EQ(token_strings(w, w.encode("aaaa")), (V{"aa", "aa"}));
  // Merges stay inside pre-tokens: " a" is one pre-token, "a" "a" across a space never merge.
  EXPECT_EQ(token_strings(w, w.encode("a a")), (V{"a", " ", "a"}));
  EXPECT_EQ(t.vocab_size(), 256u + 5u);
  EXPECT_EQ(t.num_merges(), 5u);
}

TEST(Bpe, TrainingMakesTheMostFrequentPairFirst) {
  zt::BpeTrainer tr(256 + 3, {});
  // Pre-tokens: "aab" x1, " aab" x2, "\n", "cd" -> pairs: (a,a) 3, (a,b) 3, ( ,a) 2, (c,d) 1.
  tr.add_text("aab aab aab\ncd");
  const zt::Tokenizer t = tr.train();
  ASSERT_EQ(t.num_merges(), 3u);
  // (a,a) and (a,b) tie at 3 with the same left token: the smaller right id wins ('a' < 'b').
  // Then (aa,b) has 3, then ( ,aab) 2.
  EXPECT_EQ(t.token_bytes(256), "aa");
  EXPECT_EQ(t.token_bytes(257), "aab");
  EXPECT_EQ(t.token_bytes(258), " aab");
  EXPECT_EQ(token_strings(t, t.encode("aab aab cd")), (V{"aab", " aab", " ", "c", "d"}));
}

TEST(Bpe, TrainingCountsWeighted) {
  zt::BpeTrainer tr(256 + 1 + 1, {"<|endoftext|>"});
  tr.add_text("xy xy xy zq<|endoftext|>zq");
  const zt::Tokenizer t = tr.train();
  EXPECT_EQ(t.token_bytes(256), "xy");  // (x,y) 3 beats ( ,x) 2 and (z,q) 2 (" zq" and "zq": the special is cut out)
  EXPECT_EQ(t.added_token_id("<|endoftext|>"), 257);
  EXPECT_EQ(t.encode("xy<|endoftext|>xy"), (std::vector<uint32_t>{256, 257, 256}));
  EXPECT_EQ(t.decode({256, 257}), "xy<|endoftext|>");
}

std::string corpus() {
  std::string s;
  const char* words[] = {"the", "model", "shards", "optimizer", "state", "across", "ranks", "gradient", "ZeRO",
                         "caf\xC3\xA9", "\xF0\x9F\x98\x80", "2024", "it's", "--", "\n", "  ", "\t", "(x)"};
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    s += words[rng() % (sizeof(words) / sizeof(words[0]))];
    s += rng() % 4 ? " " : "";
  }
  return s;
}

TEST(Bpe, EncodeDecodeIsIdentityOnRandomBytes) {
  zt::BpeTrainer tr(600, {"<|endoftext|>"});
  tr.add_text(corpus());
  const zt::Tokenizer t = tr.train();
  EXPECT_EQ(t.vocab_size(), 600u);
  const std::vector<std::string> frags = {"a", "Z", " ", "  ", "\n", "\t\t", "'s", "'", "\xF0\x9F\x98\x80",
                                          "\xC3\xA9", "\xE2\x80\xA8", "\xFF", "\xC3", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                          "<|endoftext|>", "<|endo", "123", "\xE4\xB8\xAD", "\x00", "shards"};
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 4000; ++trial) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      if (trial % 2) s += static_cast<char>(rng() & 0xFF);
      else s += frags[rng() % frags.size()];
    }
    const auto ids = t.encode(s);
    ASSERT_EQ(t.decode(ids), s) << "trial " << trial;
    for (uint32_t id : ids) ASSERT_LT(id, t.vocab_size());
  }
  const std::string c = corpus();
  EXPECT_EQ(t.decode(t.encode(c)), c);
  EXPECT_LT(t.encode(c).size(), c.size() / 2);  // the merges compress the text they were trained on
}

TEST(Bpe, SaveLoadKeepsTheIds) {
  zt::BpeTrainer tr(700, {"<|endoftext|>", "<|pad|>"});
  tr.add_text(corpus());
  const zt::Tokenizer t = tr.train();
  const std::string path = temp_path("saved.json");
  t.save(path);
  const zt::Tokenizer u = zt::Tokenizer::load(path);
  EXPECT_EQ(u.vocab_size(), t.vocab_size());
  EXPECT_EQ(u.num_merges(), t.num_merges());
  EXPECT_EQ(u.added_token_id("<|pad|>"), 699);
  const std::string c = corpus() + "<|pad|>\xFF\xFE tail";
  EXPECT_EQ(u.encode(c), t.encode(c));
  // Merges written as [a, b] pairs load alike.
  std::ifstream f(path);
  nlohmann::json j = nlohmann::json::parse(f);
  for (auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    m = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  EXPECT_EQ(load_json(j, "pairs.json").encode(c), t.encode(c));
}

void expect_load_error(const nlohmann::json& j, const std::string& name, const std::string& needle) {
  try {
    load_json(j, name);
    ADD_FAILURE() << "no error for " << name;
  } catch (const zt::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(Bpe, LoadRefusesWhatItCannotEncodeAlike) {
  auto j = tiny_json({"a b"});
  j["model"]["type"] = "WordPiece";
  expect_load_error(j, "wordpiece.json", "model.type");
  j = tiny_json({"a b"});
  j["normalizer"] = {{"type", "NFC"}};
  expect_load_error(j, "nfc.json", "normalizer");
  j = tiny_json({"a b"});
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_load_error(j, "ws.json", "pre_tokenizer.type");
  j = tiny_json({"a b"});
  j["model"]["merges"] = {"a q"};
  expect_load_error(j, "merge.json", "model.merges");
  j = tiny_json({"a b"});
  j["model"]["dropout"] = 0.1;
  expect_load_error(j, "dropout.json", "model.dropout");
  j = tiny_json({"a b"});
  j["model"]["vocab"].erase("a");
  expect_load_error(j, "nobyte.json", "no token for byte 97");
  write_file(temp_path("bad.json"), "{\"model\": [");
  EXPECT_THROW(zt::Tokenizer::load(temp_path("bad.json")), zt::InputError);
  EXPECT_THROW(zt::Tokenizer::load(temp_path("missing.json")), zt::InputError);
  EXPECT_THROW(zt::BpeTrainer(300, {"a", "a"}), zt::InputError);
  EXPECT_THROW(zt::BpeTrainer(256, {"<|endoftext|>"}), zt::InputError);
  const zt::Tokenizer t = load_json(tiny_json({"a b"}), "ok.json");
  EXPECT_THROW(t.decode({257}), zt::InputError);
}

void collect_nodes(nlohmann::json& j, std::vector<nlohmann::json*>& out) {
  out.push_back(&j);
  if (j.is_structured())
    for (auto& child : j) collect_nodes(child, out);
}

// Hostile tokenizer.json: any node replaced by a value of another kind loads or is an InputError
// naming the file, never another exception or a crash.
TEST(Bpe, MutatedTokenizerJsonLoadsOrIsInputError) {
  zt::BpeTrainer tr(300, {"<|endoftext|>"});
  tr.add_text(corpus());
  const std::string path = temp_path("fuzz_base.json");
  tr.train().save(path);
  std::ifstream f(path);
  const nlohmann::json base = nlohmann::json::parse(f);
  const std::vector<nlohmann::json> values = {nullptr, -1, 0, 4294967296.0, 1e300, 0.5, "x", "", "a b", true,
                                              nlohmann::json::array(), nlohmann::json::object(),
                                              nlohmann::json::array({"a", "b", "c"}), {{"type", "BPE"}}};
  std::mt19937 rng(99);
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    nlohmann::json j = base;
    std::vector<nlohmann::json*> nodes;
    collect_nodes(j, nodes);
    // Bias towards the small structural nodes: the vocab and merges are most of the tree.
    nlohmann::json* node = nodes[trial % 3 ? rng() % std::min<size_t>(nodes.size(), 60) : rng() % nodes.size()];
    *node = values[rng() % values.size()];
    try {
      const zt::Tokenizer t = load_json(j, "fuzz.json");
      EXPECT_EQ(t.decode(t.encode("fuzz text 123")), "fuzz text 123");
      ++loaded;
    } catch (const zt::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("fuzz.json"), std::string::npos) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": not an InputError: " << e.what() << "\n" << j.dump().substr(0, 400);
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

TEST(Bpe, EncodeFilesWritesLlmcInOrder) {
  zt::BpeTrainer tr(500, {"<|endoftext|>"});
  tr.add_text(corpus());
  const zt::Tokenizer t = tr.train();
  const std::string a = temp_path("a.txt"), b = temp_path("b.txt"), out = temp_path("out.bin");
  const std::string ta = corpus(), tb = "second file\nwith lines\n";
  write_file(a, ta);
  write_file(b, tb);
  zt::EncodeFilesOptions o;
  o.threads = 3;
  o.eot = true;
  o.chunk_bytes = 4096;  // many chunks, so order and split points matter
  const auto r = zt::encode_files(t, {a, b}, out, o);
  std::vector<uint32_t> want{499};
  for (uint32_t id : t.encode(ta)) want.push_back(id);
  want.push_back(499);
  for (uint32_t id : t.encode(tb)) want.push_back(id);
  ASSERT_EQ(r.tokens, static_cast<int64_t>(want.size()));
  EXPECT_EQ(r.version, 1);
  std::vector<int32_t> header;
  EXPECT_EQ(read_llmc_v1(out, &header), want);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], r.tokens);
}

// add_prefix_space: one space before the text and after each added token, not before each chunk.
TEST(Bpe, PrefixSpaceOncePerFileNotPerChunk) {
  auto j = tiny_json({"Ġ a", "a b"});
  j["pre_tokenizer"]["add_prefix_space"] = true;
  j["added_tokens"] = {{{"id", 300}, {"content", "<|endoftext|>"}, {"special", true}}};
  const zt::Tokenizer t = load_json(j, "prefix.json");
  EXPECT_EQ(token_strings(t, t.encode("ab<|endoftext|>a")), (V{" a", "b", "<|endoftext|>", " a"}));
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "ab a\nba b\n";
  const std::string in = temp_path("prefix.txt"), out = temp_path("prefix.bin");
  write_file(in, text);
  zt::EncodeFilesOptions o;
  o.threads = 2;
  o.chunk_bytes = 1000;
  zt::encode_files(t, {in}, out, o);
  std::vector<int32_t> header;
  EXPECT_EQ(read_llmc_v1(out, &header), t.encode(text));
}

// An added token with a space in it is never cut by a chunk seam.
TEST(Bpe, ChunkSeamsKeepAddedTokensWhole) {
  auto j = tiny_json({"a b"});
  j["added_tokens"] = {{{"id", 257}, {"content", "<|end of|>"}, {"special", true}}};
  const zt::Tokenizer t = load_json(j, "spaced.json");
  std::string text;
  for (int i = 0; i < 400; ++i) text += i % 3 ? "ab ba<|end of|>ab " : "x\ny<|end of|>";
  const std::string in = temp_path("spaced.txt"), out = temp_path("spaced.bin");
  write_file(in, text);
  zt::EncodeFilesOptions o;
  o.chunk_bytes = 37;
  zt::encode_files(t, {in}, out, o);
  std::vector<int32_t> header;
  const auto got = read_llmc_v1(out, &header);
  EXPECT_EQ(got, t.encode(text));
  EXPECT_EQ(std::count(got.begin(), got.end(), 257u), 400);
}

// A vocabulary over 65536 tokens: encode writes llm.c version 2 (uint32 tokens), and the
// tokens: data reader takes it (ids above 65535 included).
TEST(Bpe, WideVocabularyWritesUint32TokensTheReaderTakes) {
  auto j = tiny_json({"a b"});
  j["added_tokens"] = {{{"id", 70000}, {"content", "<|endoftext|>"}, {"special", true}}};
  const zt::Tokenizer t = load_json(j, "wide.json");
  EXPECT_EQ(t.vocab_size(), 70001u);
  const std::string in = temp_path("wide.txt"), out = temp_path("wide.bin");
  std::string text;
  for (int i = 0; i < 20; ++i) text += "ab ba<|endoftext|>\n";
  write_file(in, text);
  zt::EncodeFilesOptions o;
  o.eot = true;
  const auto r = zt::encode_files(t, {in}, out, o);
  EXPECT_EQ(r.version, 2);
  std::vector<uint32_t> want{70000};
  for (uint32_t id : t.encode(text)) want.push_back(id);
  ASSERT_EQ(r.tokens, static_cast<int64_t>(want.size()));
  zt::DatasetShape shape;
  shape.vocab_size = 70001;
  shape.n_ctx = 8;
  shape.global_batch = 1;
  auto d = zt::make_dataset("tokens:" + out, shape);
  auto& tf = dynamic_cast<zt::TokenFileDataset&>(*d);
  EXPECT_EQ(tf.format(), zt::TokenFileDataset::Format::Llmc);
  ASSERT_EQ(tf.num_tokens(), r.tokens);
  EXPECT_NE(d->describe().find("uint32"), std::string::npos) << d->describe();
  zt::Batch b;
  for (int64_t k = 0; k < tf.sequences_per_pass(); ++k) {
    d->fill(k, 0, 1, b);
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_EQ(b.inputs[i], static_cast<int32_t>(want[static_cast<size_t>(k * 8 + i)]));
      EXPECT_EQ(b.targets[i], static_cast<int32_t>(want[static_cast<size_t>(k * 8 + i + 1)]));
    }
  }
  // Its ids are validated against the model: 70000 >= 100.
  shape.vocab_size = 100;
  EXPECT_THROW(zt::make_dataset("tokens:" + out, shape), zt::InputError);
}

}  // namespace
