// checkpoint_save.cpp — the crash-safe save: shards into DIR/.tmp-<tag>/, meta.json, atomic
// install as DIR/<tag>, atomic `latest`, pruning (checkpoint.h has the protocol).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "ckpt_internal.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/ckpt/xxhash64.h"
#include "zerotrain/core/check.h"
#include "zerotrain/io/safetensors.h"

namespace zt {

namespace {

using ckpt::json;

// A safetensors file written front to back, hashed as it goes, fsynced at the end.
class ShardWriter {
 public:
  struct Decl {
    std::string name;
    DType dtype;
    int64_t numel;
  };
  ShardWriter(const std::string& path, const std::vector<Decl>& decls, const std::map<std::string, std::string>& meta)
      : path_(path) {
    json header = json::object();
    json m = json::object();
    for (const auto& kv : meta) m[kv.first] = kv.second;
    header["__metadata__"] = m;
    uint64_t offset = 0;
    for (const Decl& d : decls) {
      const uint64_t bytes = static_cast<uint64_t>(d.numel) * dtype_size(d.dtype);
      header[d.name] = {{"dtype", safetensors_dtype_name(d.dtype)},
                        {"shape", {d.numel}},
                        {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    }
    data_bytes_ = offset;
    std::string text = header.dump();
    while (text.size() % 8 != 0) text.push_back(' ');
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) fail();
    std::setvbuf(f_, nullptr, _IOFBF, size_t(1) << 20);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
    write(len, 8);
    write(text.data(), text.size());
    header_bytes_ = 8 + text.size();
  }
  ~ShardWriter() {
    if (f_) std::fclose(f_);
  }
  void write(const void* data, size_t bytes) {
    if (bytes == 0) return;
    hash_.update(data, bytes);
    if (std::fwrite(data, 1, bytes, f_) != bytes) fail();
    written_ += bytes;
  }
  // Flush, fsync, close; returns the size.
  int64_t finish() {
    ZT_CHECK(written_ == header_bytes_ + data_bytes_, "shard " + path_ + ": wrote " + std::to_string(written_) +
                                                          " of " + std::to_string(header_bytes_ + data_bytes_) + " bytes");
    if (std::fflush(f_) != 0 || ::fsync(fileno(f_)) != 0) fail();
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) fail();
    return static_cast<int64_t>(written_);
  }
  std::string hash() const { return hex64(hash_.digest()); }

 private:
  [[noreturn]] void fail() const {
    throw InputError("checkpoint: cannot write shard " + path_ + ": " + std::strerror(errno));
  }
  std::string path_;
  FILE* f_ = nullptr;
  Xxh64 hash_;
  uint64_t header_bytes_ = 0, data_bytes_ = 0, written_ = 0;
};

// This rank's shard: every state's pieces, state by state, streamed from the engine.
ckpt::Meta::Shard write_shard(ZeroEngine& engine, const std::vector<ParamSpec>& params, const std::string& dir,
                              const std::string& tag, int rank, int world) {
  const std::vector<ZeroEngine::CheckpointState> states = engine.checkpoint_states();
  const std::vector<ZeroEngine::ParamPiece> pieces = engine.checkpoint_pieces(rank);
  std::vector<ShardWriter::Decl> decls;
  for (const auto& s : states)
    for (const auto& pc : pieces) decls.push_back({s.name + "/" + params[static_cast<size_t>(pc.param)].name, s.dtype, pc.count});
  ckpt::Meta::Shard out;
  out.rank = rank;
  out.file = ckpt::shard_file_name(rank, world);
  ShardWriter w(ckptfs::join(dir, out.file), decls,
                {{"format", "zerotrain-checkpoint-shard"}, {"tag", tag}, {"rank", std::to_string(rank)},
                 {"world_size", std::to_string(world)}});
  for (int s = 0; s < static_cast<int>(states.size()); ++s) {
    const size_t esize = dtype_size(states[static_cast<size_t>(s)].dtype);
    engine.read_checkpoint_state(s, ckpt::kChunkElems, [&](size_t, int64_t, int64_t count, const void* bytes) {
      w.write(bytes, static_cast<size_t>(count) * esize);
    });
  }
  out.bytes = w.finish();
  out.xxh64 = w.hash();
  return out;
}

// keep_last: the newest `keep` global_step<N> checkpoints stay, and always `current`.
void prune(const std::string& dir, const std::string& current, int keep) {
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const std::string& n : ckptfs::list_dir(dir)) {
    if (n.rfind("global_step", 0) != 0 || n.size() == 11) continue;
    const std::string digits = n.substr(11);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 18) continue;
    if (!ckptfs::is_dir(ckptfs::join(dir, n))) continue;
    steps.emplace_back(std::stoll(digits), n);
  }
  std::sort(steps.begin(), steps.end());
  const int64_t drop = static_cast<int64_t>(steps.size()) - keep;
  for (int64_t i = 0; i < drop; ++i)
    if (steps[static_cast<size_t>(i)].second != current) ckptfs::remove_tree(ckptfs::join(dir, steps[static_cast<size_t>(i)].second));
}

}  // namespace

void check_checkpoint_dir(Communicator& comm, Device& dev, const std::string& dir) {
  std::string err;
  if (comm.rank() == 0) {
    try {
      ckptfs::check_writable_dir(dir);
    } catch (const InputError& e) {
      err = "--save-checkpoint " + dir + ": " + e.what();
    }
  }
  agree_or_throw(comm, dev, err);
}

SavedCheckpoint save_checkpoint(ZeroEngine& engine, Communicator& comm, Device& dev, const std::string& dir,
                                const std::string& tag_in, const CheckpointRunInfo& info, int keep_last) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!valid_checkpoint_tag(tag_in)) throw InputError("checkpoint tag '" + tag_in + "' is not a valid name");
  std::vector<std::string> warnings;
  const std::string tag = ckpt::agree_on_tag(comm, dev, tag_in, info.tag_validation, &warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const std::string tmp = ckptfs::join(dir, ".tmp-" + tag), final_dir = ckptfs::join(dir, tag);
  const int rank = comm.rank(), world = comm.world_size();

  // 1. rank 0: a fresh temporary directory (a crashed save may have left one).
  std::string err;
  if (rank == 0) {
    try {
      ckptfs::make_dirs(dir);
      for (const std::string& n : ckptfs::list_dir(dir))
        if (n.rfind(".tmp-", 0) == 0) ckptfs::remove_tree(ckptfs::join(dir, n));
      ckptfs::make_dirs(tmp);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  agree_or_throw(comm, dev, err);

  // 2. every rank: its shard, fsynced, with its size and checksum.
  ckpt::Meta::Shard mine;
  try {
    mine = write_shard(engine, info.params, tmp, tag, rank, world);
  } catch (const InputError& e) {
    err = e.what();
  }
  const json report = {{"rank", rank}, {"file", mine.file}, {"bytes", mine.bytes}, {"xxh64", mine.xxh64}};
  const std::vector<std::string> reports = comm.gather_strings(report.dump(), 0, "checkpoint shard reports");
  agree_or_throw(comm, dev, err);

  // 3. rank 0: meta.json, install the directory, then `latest`, then prune.
  SavedCheckpoint saved;
  saved.path = final_dir;
  saved.bytes_this_rank = mine.bytes;
  if (rank == 0) {
    try {
      std::vector<ckpt::Meta::Shard> shards;
      for (const std::string& r : reports) {
        const json j = json::parse(r);
        shards.push_back({j["rank"].get<int>(), j["file"].get<std::string>(), j["bytes"].get<int64_t>(),
                          j["xxh64"].get<std::string>()});
        saved.bytes_total += shards.back().bytes;
      }
      const std::string meta = ckpt::build_meta(engine, tag, info, shards).dump(1) + "\n";
      saved.bytes_total += static_cast<int64_t>(meta.size());
      ckptfs::write_file_atomically(ckptfs::join(tmp, "meta.json"), meta);  // fsyncs tmp: every shard's entry too
      ckptfs::install_dir(tmp, final_dir);
      ckptfs::write_file_atomically(ckptfs::join(dir, "latest"), tag + "\n");
      if (keep_last > 0) prune(dir, tag, keep_last);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  agree_or_throw(comm, dev, err);
  saved.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return saved;
}

}  // namespace zt
