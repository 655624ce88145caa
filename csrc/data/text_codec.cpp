// text_codec.cpp — the byte-level codec (text_codec.h).
#include "zerotrain/data/text_codec.h"

#include "zerotrain/data/tokenizer.h"

namespace zt {

std::vector<uint32_t> ByteCodec::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteCodec::decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) {
    if (id < 256) out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    else out += "<|" + std::to_string(id) + "|>";
  }
  return out;
}

std::string ByteCodec::describe() const { return "byte-level (ids 0..255 are bytes)"; }

TokenizerCodec::TokenizerCodec(const std::string& tokenizer_json)
    : path_(tokenizer_json), tok_(std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_json))) {}

TokenizerCodec::~TokenizerCodec() = default;

std::vector<uint32_t> TokenizerCodec::encode(std::string_view text) const { return tok_->encode(text); }

std::string TokenizerCodec::decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  std::vector<uint32_t> run;  // consecutive ids the tokenizer knows, decoded together
  for (uint32_t id : ids) {
    if (id < tok_->vocab_size()) {
      run.push_back(id);
      continue;
    }
    out += tok_->decode(run) + "<|" + std::to_string(id) + "|>";
    run.clear();
  }
  return out + tok_->decode(run);
}

std::string TokenizerCodec::describe() const {
  return "BPE tokenizer " + path_ + " (" + std::to_string(tok_->vocab_size()) + " ids)";
}

std::unique_ptr<TextCodec> make_text_codec(const std::string& tokenizer_json) {
  if (tokenizer_json.empty()) return std::make_unique<ByteCodec>();
  return std::make_unique<TokenizerCodec>(tokenizer_json);
}

}  // namespace zt
