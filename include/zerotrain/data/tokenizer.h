// tokenizer.h — byte-level BPE (GPT-2's scheme) in the Hugging Face tokenizer.json format.
//
// Text is split into pre-tokens by GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (implemented by hand; \p{L}, \p{N} from the Unicode tables in csrc/data/tokenizer_unicode.cpp,
// \s the Unicode White_Space set). Bytes that are not valid UTF-8 are one character each, of
// neither class. Each pre-token's bytes start as one token per byte and are merged in merge-rank
// order (lowest rank first; equal ranks leftmost first), as Hugging Face `tokenizers` does.
// Added tokens (e.g. <|endoftext|>) found in the text are cut out first (leftmost, then longest)
// and encoded as their id. decode() concatenates the tokens' bytes: encode then decode gives the
// input back byte for byte, invalid UTF-8 included.
//
// Token ids are stable: the 256 byte tokens are ids 0..255 in GPT-2's order (by the code point
// of the byte's printable stand-in), merges follow in rank order, added tokens last.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

namespace bpe {
struct Model;  // csrc/data/tokenizer_internal.h
}

class Tokenizer {
 public:
  // Reads a tokenizer.json of byte-level BPE (model.type "BPE", ByteLevel pre-tokenizer and
  // decoder). InputError naming the file and the field for malformed JSON or anything that
  // would not encode as Hugging Face does (another model type, a normalizer, dropout, ...).
  static Tokenizer load(const std::string& tokenizer_json_path);

  std::vector<uint32_t> encode(std::string_view text) const;
  // Appends to `out` (no allocation per call once `out` has grown). text_start = false: `text`
  // continues an earlier one (a later chunk of a file), so it gets no add_prefix_space space.
  void encode_into(std::string_view text, std::vector<uint32_t>& out, bool text_start = true) const;
  // The bytes of the tokens, concatenated; InputError for an id that names no token.
  std::string decode(const std::vector<uint32_t>& ids) const;
  // One more than the largest id (added tokens included).
  uint32_t vocab_size() const;
  // Writes tokenizer.json (atomically); InputError naming `path` when it cannot be written.
  void save(const std::string& path) const;

  // The id of added token `content` (e.g. "<|endoftext|>"), or -1.
  int64_t added_token_id(std::string_view content) const;
  std::vector<std::string> added_tokens() const;  // their contents
  // The bytes token `id` stands for (an added token: its content).
  const std::string& token_bytes(uint32_t id) const;
  size_t num_merges() const;

  explicit Tokenizer(std::shared_ptr<const bpe::Model> model);

 private:
  std::shared_ptr<const bpe::Model> model_;  // immutable: copies share it
};

// Byte-level BPE training. Feed text with add_text() (pre-tokens are counted; the text is not
// kept), then train(). Each merge joins the adjacent pair with the highest count over all
// pre-tokens (weighted by their counts); ties go to the pair whose left token id is smallest,
// then whose right token id is smallest (ids: bytes 0..255 as above, then merges in the order
// made). A merge whose bytes equal an existing token reuses that id. Training stops when the
// vocabulary (specials included) has vocab_size tokens or no pair is left.
class BpeTrainer {
 public:
  // InputError unless vocab_size >= 256 + specials.size() (and < 2^31) and the specials are
  // distinct and non-empty.
  BpeTrainer(uint32_t vocab_size, std::vector<std::string> specials);
  ~BpeTrainer();
  BpeTrainer(const BpeTrainer&) = delete;
  BpeTrainer& operator=(const BpeTrainer&) = delete;

  // Counts the pre-tokens of `text` (special tokens in it are cut out, not counted). A document
  // may be fed in parts split with safe_split_point().
  void add_text(std::string_view text);
  Tokenizer train();

 private:
  struct Counts;
  std::unique_ptr<Counts> counts_;
  uint32_t vocab_size_;
  std::vector<std::string> specials_;
};

// GPT-2's pre-tokens of `text`, in order (they concatenate to `text`).
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// The largest p <= text.size() such that pre-tokenising text[0, p) and text[p, ...) separately
// gives the pre-tokens of the whole text, searching only the last `window` bytes before
// text.size(); 0 when there is none there. A split point is a single '\n' between printable ASCII
// characters, else a single ' ' between printable ASCII and an ASCII letter, and never inside an
// occurrence of one of `keep_whole` (added tokens that contain such a point); points closer to the
// end than the longest of `keep_whole` are not tried (the text after could complete one).
size_t safe_split_point(std::string_view text, size_t window, const std::vector<std::string>& keep_whole = {});

// Writes llm.c token files: a header of 256 int32 (magic 20240520, version 1 with uint16 tokens
// or version 2 with uint32 tokens, token count), then the tokens, little-endian.
struct EncodeFilesOptions {
  int threads = 1;
  bool eot = false;             // the <|endoftext|> token before each file (llm.c's convention)
  size_t chunk_bytes = 1 << 20; // text encoded per task; memory ~ 2·threads·chunk_bytes
};
struct EncodeFilesResult {
  int64_t tokens = 0;
  int64_t bytes_in = 0;
  int version = 1;
};
// InputError naming the file for an unreadable input or an unwritable output; more than
// 2^31 − 1 tokens (the header's int32 count) is an InputError too.
EncodeFilesResult encode_files(const Tokenizer& tok, const std::vector<std::string>& inputs,
                               const std::string& out_path, const EncodeFilesOptions& options);

// Calls `chunk` with consecutive parts of the file's text, each cut at a safe_split_point
// (keeping `keep_whole` whole, or the end of the file), about chunk_bytes long. InputError naming
// the file when it cannot be read.
void read_text_chunks(const std::string& path, size_t chunk_bytes, const std::function<void(std::string_view)>& chunk,
                      const std::vector<std::string>& keep_whole = {});

}  // namespace zt
