// cmd_tokenize.cpp — `zerotrain tokenize train|encode|decode`: byte-level BPE tokenizers in the
// Hugging Face tokenizer.json format, and llm.c token files (docs/data.md, "Tokenizer").
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli_flags.h"
#include "commands.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/data/token_file.h"
#include "zerotrain/data/tokenizer.h"

namespace zt {

namespace {

const char* usage() {
  return "usage: zerotrain tokenize train --vocab-size V --out TOKENIZER.json [--special TOKEN]... FILE...\n"
         "       zerotrain tokenize encode --tokenizer TOKENIZER.json --out DATA.bin [--threads N] [--eot] FILE...\n"
         "       zerotrain tokenize decode --tokenizer TOKENIZER.json DATA.bin\n"
         "  train:  byte-level BPE (GPT-2's pre-tokenizer) trained on the FILEs; V counts the 256 byte tokens,\n"
         "          the merges and the --special tokens (e.g. --special '<|endoftext|>').\n"
         "  encode: an llm.c token file (uint16 tokens, or uint32 when the vocabulary exceeds 65536);\n"
         "          --eot puts <|endoftext|> before each FILE; --threads: encoding threads (default 1).\n"
         "  decode: the text of an llm.c token file on standard output.\n";
}

struct Args {
  std::string out, tokenizer;
  int64_t vocab_size = -1, threads = 1;
  bool eot = false;
  std::vector<std::string> specials, files;
};

int64_t parse_count(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    throw InputError("tokenize: " + flag + " '" + v + "': expected an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return x;
}

Args parse_args(int argc, char** argv, const std::string& sub) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    const std::string f = argv[i];
    const auto value = [&] { return std::string(flag_value("tokenize " + sub, argc, argv, i, usage())); };
    if (f == "--out") a.out = value();
    else if (f == "--tokenizer") a.tokenizer = value();
    else if (f == "--vocab-size" && sub == "train") a.vocab_size = parse_count(f, value(), 256, (int64_t(1) << 31) - 1);
    else if (f == "--special" && sub == "train") a.specials.push_back(value());
    else if (f == "--threads" && sub == "encode") a.threads = parse_count(f, value(), 1, 1024);
    else if (f == "--eot" && sub == "encode") a.eot = true;
    else if (!f.empty() && f[0] == '-') throw InputError("tokenize " + sub + ": unknown flag '" + f + "'\n" + usage());
    else if (f.empty()) throw InputError("tokenize " + sub + ": an empty FILE argument");
    else a.files.push_back(f);
  }
  if (a.files.empty()) throw InputError("tokenize " + sub + ": no input FILE\n" + usage());
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int run_train(const Args& a) {
  if (a.vocab_size < 0) throw InputError("tokenize train: --vocab-size V is required\n" + std::string(usage()));
  if (a.out.empty()) throw InputError("tokenize train: --out TOKENIZER.json is required");
  check_output_path(a.out, "--out");
  const auto t0 = std::chrono::steady_clock::now();
  BpeTrainer trainer(static_cast<uint32_t>(a.vocab_size), a.specials);
  int64_t bytes = 0;
  for (const std::string& f : a.files)
    read_text_chunks(
        f, size_t(1) << 20,
        [&](std::string_view text) {
          bytes += static_cast<int64_t>(text.size());
          trainer.add_text(text);
        },
        a.specials);
  const Tokenizer tok = trainer.train();
  tok.save(a.out);
  std::fprintf(stderr, "tokenize train: %lld bytes from %zu file(s); %u tokens (%zu merges, %zu special) in %.2f s -> %s\n",
               static_cast<long long>(bytes), a.files.size(), tok.vocab_size(), tok.num_merges(), a.specials.size(),
               seconds_since(t0), a.out.c_str());
  if (tok.vocab_size() < a.vocab_size)
    std::fprintf(stderr, "tokenize train: warning: the text ran out of pairs to merge before --vocab-size %lld\n",
                 static_cast<long long>(a.vocab_size));
  return 0;
}

int run_encode(const Args& a) {
  if (a.tokenizer.empty()) throw InputError("tokenize encode: --tokenizer TOKENIZER.json is required");
  if (a.out.empty()) throw InputError("tokenize encode: --out DATA.bin is required");
  const Tokenizer tok = Tokenizer::load(a.tokenizer);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  EncodeFilesOptions o;
  o.threads = static_cast<int>(a.threads);
  o.eot = a.eot;
  const EncodeFilesResult r = encode_files(tok, a.files, a.out, o);
  const double s = seconds_since(t0), cpu = process_cpu_seconds() - cpu0;
  const double mb = static_cast<double>(r.bytes_in) / 1e6;
  std::fprintf(stderr,
               "tokenize encode: %lld tokens (llm.c version %d, uint%d) from %.2f MB with %lld thread(s) in %.2f s = "
               "%.1f MB/s (%.2f s CPU = %.1f MB/s per thread) -> %s\n",
               static_cast<long long>(r.tokens), r.version, r.version == 2 ? 32 : 16, mb,
               static_cast<long long>(a.threads), s, s > 0 ? mb / s : 0.0, cpu, cpu > 0 ? mb / cpu : 0.0, a.out.c_str());
  return 0;
}

// Reads exactly n bytes at offset; InputError naming the file otherwise.
void pread_exact(int fd, void* buf, size_t n, int64_t offset, const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw InputError("token file " + path + ": short read at byte " + std::to_string(offset));
    p += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
}

int run_decode(const Args& a) {
  if (a.tokenizer.empty()) throw InputError("tokenize decode: --tokenizer TOKENIZER.json is required");
  if (a.files.size() != 1) throw InputError("tokenize decode: expected one token file");
  const Tokenizer tok = Tokenizer::load(a.tokenizer);
  const std::string& path = a.files[0];
  int64_t size = 0;
  UniqueFd fd = open_regular_file(path, "token file", &size);
  int32_t header[256] = {};
  if (size < TokenFileDataset::kLlmcHeaderBytes) throw InputError("token file " + path + ": shorter than an llm.c header (1024 bytes)");
  pread_exact(fd.get(), header, sizeof(header), 0, path);
  const int64_t width = header[1] == 2 ? 4 : 2;
  if (header[0] != TokenFileDataset::kLlmcMagic || (header[1] != 1 && header[1] != 2) || header[2] < 0 ||
      size != TokenFileDataset::kLlmcHeaderBytes + width * header[2])
    throw InputError("token file " + path + ": not an llm.c token file (expected magic 20240520, version 1 or 2 and " +
                     "1024 + count * token bytes)");
  const int64_t block = int64_t(1) << 20;
  std::vector<uint32_t> ids;
  std::vector<uint16_t> narrow;
  for (int64_t first = 0; first < header[2]; first += block) {
    const int64_t n = std::min<int64_t>(block, header[2] - first);
    const int64_t offset = TokenFileDataset::kLlmcHeaderBytes + first * width;
    ids.resize(static_cast<size_t>(n));
    if (width == 4) {
      pread_exact(fd.get(), ids.data(), static_cast<size_t>(n) * 4, offset, path);
    } else {
      narrow.resize(static_cast<size_t>(n));
      pread_exact(fd.get(), narrow.data(), static_cast<size_t>(n) * 2, offset, path);
      ids.assign(narrow.begin(), narrow.end());
    }
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= tok.vocab_size())
        throw InputError("token file " + path + ": token " + std::to_string(ids[i]) + " at position " +
                         std::to_string(first + static_cast<int64_t>(i)) + " is >= the tokenizer's vocabulary size " +
                         std::to_string(tok.vocab_size()));
    const std::string text = tok.decode(ids);
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size())
      throw InputError("tokenize decode: cannot write to standard output");
  }
  if (std::fflush(stdout) != 0) throw InputError("tokenize decode: cannot write to standard output");
  return 0;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  const std::string sub = argc > 1 ? argv[1] : "";
  if (sub == "-h" || sub == "--help") {
    std::printf("%s", usage());
    return 0;
  }
  for (int i = 2; i < argc; ++i)
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("%s", usage());
      return 0;
    }
  if (sub != "train" && sub != "encode" && sub != "decode")
    throw InputError("tokenize: expected a subcommand train, encode or decode" +
                     (sub.empty() ? std::string() : ", got '" + sub + "'") + "\n" + usage());
  const Args a = parse_args(argc, argv, sub);
  if (sub == "train") return run_train(a);
  if (sub == "encode") return run_encode(a);
  return run_decode(a);
}

}  // namespace zt
