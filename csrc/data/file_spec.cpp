// file_spec.cpp — text:/tokens:/jsonl: specs: options, the PATHS list, one stream of sources.
#include "file_spec.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/data/jsonl.h"
#include "zerotrain/data/token_file.h"
#include "zerotrain/data/token_stream.h"

namespace zt {

namespace {

class TokenFileSource final : public TokenSource {
 public:
  explicit TokenFileSource(std::unique_ptr<TokenFileDataset> file) : file_(std::move(file)) {}
  int64_t windows() const override { return file_->sequences_per_pass(); }
  int64_t tokens() const override { return file_->num_tokens(); }
  void window(int64_t i, int32_t* seq) const override { file_->read_sequence(i, seq); }
  std::string describe() const override { return file_->describe(); }
  const std::string& path() const override { return file_->path(); }

 private:
  std::unique_ptr<TokenFileDataset> file_;
};

struct FileSpec {
  std::string paths;
  TokenFileDataset::Format format = TokenFileDataset::Format::Auto;
  TokenFilePart part;
  bool shuffle = false;
  JsonlOptions jsonl;
};

double split_value(const std::string& spec, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !(x > 0 && x < 1))
    throw InputError("--data '" + spec + "': split must be a number between 0 and 1 (exclusive; the training "
                     "part's fraction of the tokens), found '" + v + "'");
  return x;
}

int64_t integer_value(const std::string& spec, const std::string& key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < 0)
    throw InputError("--data '" + spec + "': " + key + " must be a non-negative integer (a token id), found '" + v + "'");
  return x;
}

// Sets one option; false when `key` is not one of `kind`'s keys.
bool set_option(const std::string& spec, const std::string& kind, const std::string& key, const std::string& v,
                FileSpec& out) {
  if (key == "format" && kind == "tokens") {
    if (v == "llmc") out.format = TokenFileDataset::Format::Llmc;
    else if (v == "raw") out.format = TokenFileDataset::Format::Raw;
    else if (v != "auto") throw InputError("--data '" + spec + "': format must be auto, llmc or raw, found '" + v + "'");
  } else if (key == "split") {
    out.part.split = split_value(spec, v);
  } else if (key == "shuffle") {
    if (v != "0" && v != "1") throw InputError("--data '" + spec + "': shuffle must be 0 or 1, found '" + v + "'");
    out.shuffle = v == "1";
  } else if (key == "field" && kind == "jsonl") {
    if (v.empty()) throw InputError("--data '" + spec + "': field must name a JSON field");
    out.jsonl.field = v;
  } else if (key == "sep" && kind == "jsonl") {
    out.jsonl.sep = integer_value(spec, key, v);
  } else {
    return false;
  }
  return true;
}

// The trailing ",key=value" options (in any order, each once) are taken off the end; what remains
// is the PATHS list. A trailing item that is not a known key=value belongs to the last path.
FileSpec parse_file_spec(const std::string& spec, const std::string& kind, std::string body) {
  FileSpec out;
  std::set<std::string> seen;
  for (size_t comma; (comma = body.rfind(',')) != std::string::npos;) {
    const std::string item = body.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) break;
    const std::string key = item.substr(0, eq);
    if (seen.count(key)) break;
    if (!set_option(spec, kind, key, item.substr(eq + 1), out)) break;
    seen.insert(key);
    body.resize(comma);
  }
  if (body.empty()) throw InputError("--data '" + spec + "': expected " + kind + ":PATH");
  out.paths = body;
  return out;
}

}  // namespace

std::unique_ptr<Dataset> make_file_dataset(const std::string& spec, const std::string& kind, const std::string& body,
                                           const DatasetShape& shape) {
  FileSpec fs = parse_file_spec(spec, kind, body);
  fs.part.holdout = shape.holdout;
  if (kind == "text") fs.format = TokenFileDataset::Format::Bytes;
  int64_t vocab = kind == "tokens" ? shape.vocab_size : std::min<int64_t>(shape.vocab_size, 256);
  if (kind == "jsonl") vocab = std::max(vocab, fs.jsonl.sep + 1);
  const std::vector<std::string> paths = expand_data_paths(spec, fs.paths);
  if (kind != "jsonl" && paths.size() == 1 && !fs.shuffle)  // one file read in order: the file itself
    return std::make_unique<TokenFileDataset>(paths[0], fs.format, shape.vocab_size, shape.n_ctx, shape.global_batch,
                                              shape.validate_shard, shape.validate_shards, fs.part);
  std::vector<std::unique_ptr<TokenSource>> sources;
  for (const std::string& path : paths) {
    if (kind == "jsonl") {
      sources.push_back(std::make_unique<JsonlSource>(path, fs.jsonl, shape.vocab_size, shape.n_ctx, fs.part));
    } else {
      sources.push_back(std::make_unique<TokenFileSource>(
          std::make_unique<TokenFileDataset>(path, fs.format, shape.vocab_size, shape.n_ctx, /*global_batch=*/1,
                                             shape.validate_shard, shape.validate_shards, fs.part)));
    }
  }
  return std::make_unique<TokenStreamDataset>(kind, std::move(sources), vocab, shape.n_ctx, shape.global_batch,
                                              fs.shuffle, shape.seed);
}

}  // namespace zt
