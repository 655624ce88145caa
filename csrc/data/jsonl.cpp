// jsonl.cpp — JSON-lines documents as a byte-level token stream (jsonl.h).
#include "zerotrain/data/jsonl.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {

namespace {

// A JSON-lines file is decoded into memory whole; larger corpora belong in tokens: files.
constexpr int64_t kMaxJsonlFileBytes = int64_t(8) << 30;

const char* json_type(const nlohmann::json& v) {
  return v.is_null() ? "null" : v.is_boolean() ? "a boolean" : v.is_number() ? "a number"
       : v.is_array() ? "an array" : v.is_object() ? "an object" : "a string";
}

}  // namespace

std::vector<int32_t> jsonl_tokens(const std::string& text, const std::string& source, const JsonlOptions& opt,
                                  int64_t vocab) {
  std::vector<int32_t> out;
  int64_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines hold no document
    const std::string where = "data file '" + source + "' line " + std::to_string(line_no);
    // Strict JSON (nlohmann, the project's JSON library): one value per line, nothing after it.
    const nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) throw InputError(where + ": not a JSON value (expected one JSON object per line)");
    if (!doc.is_object()) throw InputError(where + ": " + json_type(doc) + ", expected a JSON object");
    const auto it = doc.find(opt.field);
    if (it == doc.end()) throw InputError(where + ": the object has no field \"" + opt.field + "\"");
    if (!it->is_string())
      throw InputError(where + ": the field \"" + opt.field + "\" is " + json_type(*it) + ", expected a string");
    for (unsigned char c : it->get_ref<const std::string&>()) {
      if (c >= vocab)
        throw InputError(where + ": byte " + std::to_string(c) + " is >= the model's vocab_size " +
                         std::to_string(vocab));
      out.push_back(c);
    }
    out.push_back(static_cast<int32_t>(opt.sep));
  }
  return out;
}

JsonlSource::JsonlSource(const std::string& path, const JsonlOptions& opt, int64_t vocab, int64_t n_ctx,
                         TokenFilePart part)
    : path_(path), T_(n_ctx) {
  const std::string what = "data file '" + path + "'";
  if (opt.sep < 0 || opt.sep >= vocab)
    throw InputError(what + ": the document separator sep=" + std::to_string(opt.sep) +
                     " is not a token of the model (vocab_size " + std::to_string(vocab) + ")");
  const std::string text = read_regular_file(path, what, kMaxJsonlFileBytes);
  if (text.empty()) throw InputError(what + ": the file is empty");
  tokens_ = jsonl_tokens(text, path, opt, vocab);
  if (part.split < 1) {
    const int64_t n = static_cast<int64_t>(tokens_.size());
    const int64_t cut = static_cast<int64_t>(std::floor(part.split * static_cast<double>(n)));
    if (part.holdout) tokens_.erase(tokens_.begin(), tokens_.begin() + cut);
    else tokens_.resize(static_cast<size_t>(cut));
    char text_part[96];
    std::snprintf(text_part, sizeof(text_part), " in its %s %g%% (split=%g)", part.holdout ? "last" : "first",
                  100.0 * (part.holdout ? 1 - part.split : part.split), part.split);
    part_ = text_part;
  }
  const int64_t n = static_cast<int64_t>(tokens_.size());
  if (n < T_ + 1)
    throw InputError(what + ": holds " + std::to_string(n) + " tokens" + part_ + ", fewer than n_ctx + 1 = " +
                     std::to_string(T_ + 1));
  windows_ = (n - 1) / T_;
}

void JsonlSource::window(int64_t i, int32_t* seq) const {
  ZT_CHECK(i >= 0 && i < windows_, "jsonl window outside the file");
  std::copy(tokens_.begin() + i * T_, tokens_.begin() + i * T_ + T_ + 1, seq);
}

std::string JsonlSource::describe() const {
  std::ostringstream os;
  os << "jsonl: '" << path_ << "' (bytes), " << tokens_.size() << " tokens" << part_ << ", " << windows_
     << " sequences of " << T_ << "+1 per pass";
  return os.str();
}

}  // namespace zt
