// jsonl.h — `jsonl:` data: JSON-lines files, one document per line (docs/data.md, "jsonl:").
//
// Each non-blank line is a JSON object; its `field` (default "text") is a string, the document.
// A document's tokens are its UTF-8 bytes (ids 0..255), followed by the separator token `sep`
// (default 0, the NUL byte, which text does not hold), so the file's stream is
// doc_1 sep doc_2 sep ... doc_n sep. The whole file is decoded at open (every rank holds its tokens
// in memory, 4 bytes a token); a line that is not JSON, not an object, lacks the field or whose
// field is not a string, a byte >= the model's vocab_size, or fewer than n_ctx + 1 tokens is an
// InputError naming the file and the line. A tokenizer would replace the byte step alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/data/token_file.h"
#include "zerotrain/data/token_stream.h"

namespace zt {

struct JsonlOptions {
  std::string field = "text";
  int64_t sep = 0;  // the token after every document
};

// The token stream of one JSON-lines text (`source` names it in errors). InputError on a bad line.
std::vector<int32_t> jsonl_tokens(const std::string& text, const std::string& source, const JsonlOptions& opt,
                                  int64_t vocab);

class JsonlSource final : public TokenSource {
 public:
  JsonlSource(const std::string& path, const JsonlOptions& opt, int64_t vocab, int64_t n_ctx, TokenFilePart part);
  int64_t windows() const override { return windows_; }
  int64_t tokens() const override { return static_cast<int64_t>(tokens_.size()); }
  void window(int64_t i, int32_t* seq) const override;
  std::string describe() const override;
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::vector<int32_t> tokens_;  // the part read
  int64_t T_, windows_ = 0;
  std::string part_;
};

}  // namespace zt
