// checkpoint_save.cpp — the crash-safe save: shards into DIR/.tmp-<tag>.<host>.<pid>/, meta.json, atomic
// install as DIR/<tag>, atomic `latest`, pruning (checkpoint.h has the protocol).
#include <fcntl.h>
#include <sys/stat.h>
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
#include "zerotrain/core/file_io.h"
#include "zerotrain/io/safetensors.h"

namespace zt {

namespace {

using ckpt::json;

constexpr int64_t kMaxMetaBytes = int64_t(256) << 20;  // a meta.json read to recognise a checkpoint

// A safetensors file written front to back, hashed as it goes, fsynced at the end. It is a new
// name in the save's own fresh directory: created with O_EXCL | O_NOFOLLOW, every write,
// flush, fsync and close checked.
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
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) fail();
    f_ = ::fdopen(fd, "wb");
    if (!f_) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail();
    }
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

// A name a save owns in DIR (docs/checkpoints.md "What a save creates and deletes"): a real
// directory (not a symlink) holding a regular meta.json whose "format" is kFormat.
bool is_zerotrain_checkpoint(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  try {
    const json doc = json::parse(read_regular_file(ckptfs::join(path, "meta.json"), "meta.json", kMaxMetaBytes));
    return doc.is_object() && doc.contains("format") && doc["format"] == ckpt::kFormat;
  } catch (const std::exception&) {
    return false;
  }
}

// DIR/<tag> is replaced only when it is a zerotrain checkpoint; anything else there is refused.
void check_replaceable(const std::string& final_dir) {
  struct stat st {};
  if (::lstat(final_dir.c_str(), &st) != 0 || is_zerotrain_checkpoint(final_dir)) return;
  throw InputError("checkpoint: " + final_dir + " exists and is not a zerotrain checkpoint (a directory holding a "
                   "meta.json with \"format\": \"" + std::string(ckpt::kFormat) + "\"); refusing to replace it: "
                   "move it away or save into another directory");
}

// The temporaries of killed saves: DIR/.tmp-<tag>.<host>.<pid> directories whose owner process
// is gone (same host, pid not alive). Anything else named .tmp-* is not this program's.
void remove_stale_save_temporaries(const std::string& dir) {
  for (const std::string& n : ckptfs::list_dir(dir)) {
    if (n.rfind(".tmp-", 0) != 0) continue;
    const size_t pid_dot = n.rfind('.');
    const size_t host_dot = pid_dot == std::string::npos || pid_dot == 0 ? std::string::npos : n.rfind('.', pid_dot - 1);
    if (host_dot == std::string::npos || host_dot < 5 || !temp_owner_gone(n.substr(host_dot + 1))) continue;
    const std::string path = ckptfs::join(dir, n);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    ckptfs::remove_tree(path);
    std::fprintf(stderr, "notice: removed %s, the temporary of a killed save on this host\n", path.c_str());
  }
}

// keep_last: the newest `keep` zerotrain checkpoints named global_step<N> stay, and always
// `current`; a global_step<N> that is not a zerotrain checkpoint is neither counted nor removed.
void prune(const std::string& dir, const std::string& current, int keep) {
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const std::string& n : ckptfs::list_dir(dir)) {
    if (n.rfind("global_step", 0) != 0 || n.size() == 11) continue;
    const std::string digits = n.substr(11);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 18) continue;
    if (!is_zerotrain_checkpoint(ckptfs::join(dir, n))) {
      std::fprintf(stderr, "warning: --keep-last: %s is not a zerotrain checkpoint; left in place\n",
                   ckptfs::join(dir, n).c_str());
      continue;
    }
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
      remove_stale_save_temporaries(dir);  // at start-up: a killed run's shards may be large
    } catch (const InputError& e) {
      err = "--save-checkpoint " + dir + ": " + e.what();
    }
  }
  agree_or_throw(comm, dev, err);
}

SavedCheckpoint save_checkpoint(ZeroEngine& engine, Communicator& comm, Device& dev, const std::string& dir,
                                const std::string& tag_in, const CheckpointRunInfo& info, int keep_last,
                                bool point_latest) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!valid_checkpoint_tag(tag_in)) throw InputError("checkpoint tag '" + tag_in + "' is not a valid name");
  std::vector<std::string> warnings;
  const std::string tag = ckpt::agree_on_tag(comm, dev, tag_in, info.tag_validation, &warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const int rank = comm.rank(), world = comm.world_size();
  // The temporary directory carries rank 0's host and pid: a later save knows whose it was.
  const std::string tmp = ckpt::broadcast_string(comm, dev, ckptfs::join(dir, ".tmp-" + tag + "." + temp_owner_tag()), 0);
  const std::string final_dir = ckptfs::join(dir, tag);

  // 1. rank 0: a fresh temporary directory (killed saves may have left theirs).
  std::string err;
  if (rank == 0) {
    try {
      ckptfs::make_dirs(dir);
      check_replaceable(final_dir);
      remove_stale_save_temporaries(dir);
      if (::mkdir(tmp.c_str(), 0755) != 0)
        throw InputError("checkpoint: cannot create directory " + tmp + ": " + std::strerror(errno));
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
      check_replaceable(final_dir);
      ckptfs::install_dir(tmp, final_dir);
      if (point_latest) ckptfs::write_file_atomically(ckptfs::join(dir, "latest"), tag + "\n");
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
