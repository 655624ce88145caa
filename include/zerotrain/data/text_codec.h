// text_codec.h — text to token ids and back, for prompts and samples (zerotrain sample, train
// --sample-every). One small interface so a tokenizer can stand in for the byte codec.
//
// TokenizerCodec is a byte-level BPE tokenizer.json (data/tokenizer.h): the prompt is encoded as
// Hugging Face would, generated ids decode to their bytes, and an id the tokenizer does not have
// (a model vocabulary padded past it) decodes as "<|id|>".
//
// ByteCodec is the codec of byte-level models (text: data, the default when no tokenizer is
// given): each byte of the text is one id (0..255); decode writes ids 0..255 back as those bytes
// and any id >= 256 as the text "<|id|>".
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<uint32_t>& ids) const = 0;
  virtual std::string describe() const = 0;  // one line for logs, e.g. "byte-level (ids 0..255 are bytes)"
};

class ByteCodec final : public TextCodec {
 public:
  std::vector<uint32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<uint32_t>& ids) const override;
  std::string describe() const override;
};

class Tokenizer;

class TokenizerCodec final : public TextCodec {
 public:
  explicit TokenizerCodec(const std::string& tokenizer_json);  // InputError naming the file
  ~TokenizerCodec() override;
  std::vector<uint32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<uint32_t>& ids) const override;
  std::string describe() const override;

 private:
  std::string path_;
  std::unique_ptr<Tokenizer> tok_;
};

// TokenizerCodec of `tokenizer_json`, or ByteCodec when it is empty.
std::unique_ptr<TextCodec> make_text_codec(const std::string& tokenizer_json);

}  // namespace zt
