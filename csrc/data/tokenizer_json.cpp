// tokenizer_json.cpp — Tokenizer::load and Tokenizer::save: Hugging Face tokenizer.json of
// byte-level BPE. Whatever would make Hugging Face encode differently from this encoder is
// refused, naming the file and the field.
#include <nlohmann/json.hpp>

#include "tokenizer_internal.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/data/tokenizer.h"

namespace zt {

namespace {

using nlohmann::json;
constexpr int64_t kMaxTokenizerFileBytes = int64_t(512) << 20;
constexpr int64_t kMaxVocab = int64_t(1) << 31;

struct Reader {
  std::string what;  // "tokenizer 'path'"

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw InputError(what + ": field '" + field + "': " + msg);
  }
  // obj[key] when present and not null, else nullptr.
  static const json* get(const json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  bool flag(const json& obj, const char* key, const std::string& field, bool dflt) const {
    const json* v = get(obj, key);
    if (!v) return dflt;
    if (!v->is_boolean()) fail(field + "." + key, "expected true or false, got " + v->dump());
    return v->get<bool>();
  }
  void require_null_or_empty(const json& obj, const char* key, const std::string& field) const {
    const json* v = get(obj, key);
    if (v && !(v->is_string() && v->get<std::string>().empty()))
      fail(field + "." + key, v->dump() + " is not supported (expected null)");
  }
  // A ByteLevel section (or none) of `root[key]`; returns its add_prefix_space.
  bool byte_level(const json& root, const char* key, bool required) const {
    const json* v = get(root, key);
    if (!v) {
      if (required) fail(key, "missing; expected {\"type\": \"ByteLevel\"}");
      return false;
    }
    const json* type = v->is_object() ? get(*v, "type") : nullptr;
    if (!type || *type != "ByteLevel")
      fail(std::string(key) + ".type", (type ? type->dump() : std::string("missing")) +
                                           " is not supported (expected \"ByteLevel\": byte-level BPE)");
    if (!flag(*v, "use_regex", key, true)) fail(std::string(key) + ".use_regex", "false is not supported (expected true)");
    return flag(*v, "add_prefix_space", key, false);
  }
  uint32_t id_of(const json& v, const std::string& field) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxVocab)
      fail(field, v.dump() + " is not a token id (expected an integer in [0, 2^31))");
    return static_cast<uint32_t>(v.get<int64_t>());
  }
};

void check_sections(const Reader& r, const json& root, bpe::Model& m) {
  if (Reader::get(root, "normalizer")) r.fail("normalizer", "normalizers are not supported (expected null)");
  for (const char* k : {"truncation", "padding"})
    if (Reader::get(root, k)) r.fail(k, "not supported (expected null)");
  m.add_prefix_space = r.byte_level(root, "pre_tokenizer", true);
  r.byte_level(root, "decoder", false);
  if (const json* pp = Reader::get(root, "post_processor")) {
    const json* type = pp->is_object() ? Reader::get(*pp, "type") : nullptr;
    if (!type || *type != "ByteLevel")
      r.fail("post_processor.type", (type ? type->dump() : std::string("missing")) +
                                        " is not supported (expected null or \"ByteLevel\")");
  }
}

// One entry of added_tokens (its id is checked and within m.tokens).
void read_added(const Reader& r, const json& a, bpe::Model& m) {
  const uint32_t id = a["id"].get<uint32_t>();
  const json* content = Reader::get(a, "content");
  if (!content || !content->is_string() || content->get<std::string>().empty())
    r.fail("added_tokens.content", "expected a non-empty string for id " + std::to_string(id));
  for (const char* k : {"single_word", "lstrip", "rstrip"})
    if (r.flag(a, k, "added_tokens", false)) r.fail(std::string("added_tokens.") + k, "true is not supported");
  m.tokens[id] = content->get<std::string>();
  m.present[id] = true;
  m.added.push_back(bpe::AddedToken{m.tokens[id], id, r.flag(a, "special", "added_tokens", false)});
}

// model.vocab and the added tokens into m.tokens / m.ids.
void read_vocab(const Reader& r, const json& model, const json* added, bpe::Model& m) {
  const json* vocab = Reader::get(model, "vocab");
  if (!vocab || !vocab->is_object()) r.fail("model.vocab", "missing; expected an object {token: id}");
  uint32_t size = 0;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) size = std::max(size, r.id_of(it.value(), "model.vocab") + 1);
  if (added) {
    if (!added->is_array()) r.fail("added_tokens", "expected an array");
    for (const json& a : *added) {
      if (!a.is_object() || !a.contains("id")) r.fail("added_tokens", "expected objects with \"id\" and \"content\"");
      size = std::max(size, r.id_of(a["id"], "added_tokens.id") + 1);
    }
  }
  m.tokens.assign(size, std::string());
  m.present.assign(size, false);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const uint32_t id = it.value().get<uint32_t>();
    if (m.present[id]) r.fail("model.vocab", "id " + std::to_string(id) + " is used twice");
    if (!bpe::json_token_to_bytes(it.key(), &m.tokens[id])) m.tokens[id] = it.key();  // only an added token can match it
    else m.ids.emplace(m.tokens[id], id);
    m.present[id] = true;
  }
  for (const json& a : added ? *added : json::array()) read_added(r, a, m);
}

void read_merges(const Reader& r, const json& model, bpe::Model& m) {
  const json& vocab = model["vocab"];
  const json* merges = Reader::get(model, "merges");
  if (!merges || !merges->is_array()) r.fail("model.merges", "missing; expected an array of \"a b\" or [\"a\", \"b\"]");
  m.merges.reserve(merges->size());
  const auto token = [&](const std::string& s, size_t rank) {
    const auto it = vocab.find(s);
    if (it == vocab.end()) r.fail("model.merges", "merge " + std::to_string(rank) + ": '" + s + "' is not in the vocabulary");
    return it->get<uint32_t>();
  };
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& e = (*merges)[i];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        r.fail("model.merges", "merge " + std::to_string(i) + " '" + s + "' is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      r.fail("model.merges", "merge " + std::to_string(i) + " " + e.dump() + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    m.merges.emplace_back(token(a, i), token(b, i));
  }
}

void read_model(const Reader& r, const json& root, bpe::Model& m) {
  const json* model = Reader::get(root, "model");
  if (!model || !model->is_object()) r.fail("model", "missing; expected a BPE model object");
  const json* type = Reader::get(*model, "type");
  if (type && *type != "BPE") r.fail("model.type", type->dump() + " is not supported (expected \"BPE\")");
  if (Reader::get(*model, "dropout")) r.fail("model.dropout", "not supported (expected null)");
  r.require_null_or_empty(*model, "continuing_subword_prefix", "model");
  r.require_null_or_empty(*model, "end_of_word_suffix", "model");
  if (r.flag(*model, "byte_fallback", "model", false)) r.fail("model.byte_fallback", "true is not supported");
  m.ignore_merges = r.flag(*model, "ignore_merges", "model", false);
  read_vocab(r, *model, Reader::get(root, "added_tokens"), m);
  for (int b = 0; b < 256; ++b) {
    const auto it = m.ids.find(std::string(1, static_cast<char>(b)));
    if (it == m.ids.end())
      r.fail("model.vocab", "no token for byte " + std::to_string(b) + " ('" +
                                bpe::bytes_to_json_token(std::string(1, static_cast<char>(b))) +
                                "'); byte-level BPE needs all 256");
    m.byte_id[b] = it->second;
  }
  read_merges(r, *model, m);
  m.index_merges(r.what + ": field 'model.merges'");
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  const Reader r{"tokenizer '" + path + "'"};
  const std::string text = read_regular_file(path, "tokenizer", kMaxTokenizerFileBytes);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(r.what + ": not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) throw InputError(r.what + ": expected a JSON object (a Hugging Face tokenizer.json)");
  auto m = std::make_shared<bpe::Model>();
  check_sections(r, root, *m);
  read_model(r, root, *m);
  m->assign_serial();
  return Tokenizer(std::move(m));
}

void Tokenizer::save(const std::string& path) const {
  using ojson = nlohmann::ordered_json;
  const bpe::Model& m = *model_;
  const auto json_name = [&](uint32_t id) {
    for (const auto& a : m.added)
      if (a.id == id) return a.content;
    return bpe::bytes_to_json_token(m.tokens[id]);
  };
  ojson vocab = ojson::object();
  for (uint32_t id = 0; id < m.tokens.size(); ++id)
    if (m.present[id]) vocab[json_name(id)] = id;
  ojson merges = ojson::array();
  for (const auto& [a, b] : m.merges) merges.push_back(json_name(a) + " " + json_name(b));
  ojson added = ojson::array();
  for (const auto& a : m.added)
    added.push_back({{"id", a.id}, {"content", a.content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", a.special}});
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", m.add_prefix_space},
                            {"trim_offsets", true}, {"use_regex", true}};
  ojson root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
                {"normalizer", nullptr}, {"pre_tokenizer", byte_level}, {"post_processor", nullptr},
                {"decoder", byte_level}};
  root["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                   {"byte_fallback", false}, {"ignore_merges", m.ignore_merges}, {"vocab", vocab}, {"merges", merges}};
  AtomicFile f(path, "tokenizer file");
  f.write(root.dump(1) + "\n");
  f.commit();
}

}  // namespace zt
