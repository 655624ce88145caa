// safetensors.cpp — validated reader and streaming writer (see safetensors.h).
#include "zerotrain/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"

namespace zt {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;  // the format's own limit is 100 MB

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw InputError("safetensors file " + path + ": " + what);
}

// Element size of a safetensors dtype string, 0 when unknown.
size_t element_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

uint64_t get_u64(const json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    bad(path, what + " must be a non-negative integer, got " + v.dump());
  return v.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_bytes) {
  const std::string where = "tensor \"" + name + "\"";
  if (!v.is_object()) bad(path, where + ": expected an object with dtype, shape, data_offsets");
  SafetensorsEntry e;
  e.name = name;
  auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) bad(path, where + ": missing or non-string \"dtype\"");
  if (sh == v.end() || !sh->is_array()) bad(path, where + ": missing or non-array \"shape\"");
  if (off == v.end() || !off->is_array() || off->size() != 2) bad(path, where + ": \"data_offsets\" must be [begin, end]");
  e.dtype_name = dt->get<std::string>();
  size_t esize = element_size(e.dtype_name);
  if (esize == 0) bad(path, where + ": unknown dtype \"" + e.dtype_name + "\"");
  if (e.dtype_name == "F32") { e.convertible = true; e.dtype = DType::F32; }
  if (e.dtype_name == "BF16") { e.convertible = true; e.dtype = DType::BF16; }
  if (e.dtype_name == "F16") { e.convertible = true; e.dtype = DType::F16; }
  uint64_t numel = 1;
  for (const json& d : *sh) {
    uint64_t x = get_u64(d, path, where + " shape entry");
    if (x != 0 && numel > (uint64_t(1) << 62) / x) bad(path, where + ": shape " + sh->dump() + " is too large");
    numel *= x;
    e.shape.push_back(static_cast<int64_t>(x));
  }
  e.numel = static_cast<int64_t>(numel);
  e.begin = get_u64((*off)[0], path, where + " data_offsets[0]");
  e.end = get_u64((*off)[1], path, where + " data_offsets[1]");
  if (e.begin > e.end) bad(path, where + ": data_offsets " + off->dump() + " has begin > end");
  if (e.end > data_bytes)
    bad(path, where + ": data_offsets " + off->dump() + " run past the end of the data block (" +
                  std::to_string(data_bytes) + " bytes; file truncated?)");
  if (e.end - e.begin != numel * esize)
    bad(path, where + ": data_offsets " + off->dump() + " span " + std::to_string(e.end - e.begin) +
                  " bytes but shape " + sh->dump() + " of " + e.dtype_name + " needs " + std::to_string(numel * esize));
  return e;
}

// The tensors' byte ranges, in offset order, tile the data block exactly: no overlap, no hole,
// nothing after the last tensor (the format's own rule; a file of another writer that breaks it
// is damaged or crafted).
void check_tiling(const std::string& path, std::vector<SafetensorsEntry> entries, uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin < at)
      bad(path, "tensor \"" + e.name + "\": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] overlap the previous tensor's bytes (which end at " + std::to_string(at) + ")");
    if (e.begin > at)
      bad(path, "tensor \"" + e.name + "\": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] leave a hole: bytes " + std::to_string(at) + ".." + std::to_string(e.begin) + " belong to no tensor");
    at = e.end;
  }
  if (at != data_bytes)
    bad(path, std::to_string(data_bytes - at) + " trailing bytes after the last tensor (the data block is " +
                  std::to_string(data_bytes) + " bytes, the tensors cover " + std::to_string(at) + ")");
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
  }
  return "?";
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd_ < 0) bad(path, std::string("cannot open for reading: ") + std::strerror(errno));
  try {
    struct stat st;
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) bad(path, "not a regular file");
    uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
    if (file_bytes < 8) bad(path, "truncated: " + std::to_string(file_bytes) + " bytes, shorter than the 8-byte header length");
    unsigned char len_bytes[8];
    if (::pread(fd_, len_bytes, 8, 0) != 8) bad(path, "cannot read the header length");
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | len_bytes[i];
    if (header_bytes > file_bytes - 8)
      bad(path, "header length " + std::to_string(header_bytes) + " exceeds the file (" + std::to_string(file_bytes) +
                    " bytes; truncated or not a safetensors file)");
    if (header_bytes > kMaxHeaderBytes) bad(path, "header length " + std::to_string(header_bytes) + " exceeds 100 MB");
    if (header_bytes < 2) bad(path, "header length " + std::to_string(header_bytes) + " is too small for a JSON object");
    std::string header(header_bytes, '\0');
    if (::pread(fd_, header.data(), header_bytes, 8) != static_cast<ssize_t>(header_bytes)) bad(path, "cannot read the header");
    data_start_ = 8 + header_bytes;
    uint64_t data_bytes = file_bytes - data_start_;

    json doc;
    std::set<std::string> names;
    std::string duplicate;
    // nlohmann keeps the last of two equal keys: the top-level names are collected while parsing.
    const json::parser_callback_t note_names = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second &&
          duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    try {
      doc = json::parse(header, note_names);
    } catch (const json::exception& e) {
      bad(path, std::string("header is not valid JSON (") + e.what() + ")");
    }
    if (!duplicate.empty()) bad(path, "tensor \"" + duplicate + "\" is named twice in the header");
    if (!doc.is_object()) bad(path, "header must be a JSON object");
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (!it->is_object()) bad(path, "\"__metadata__\" must be an object of strings");
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (!m->is_string()) bad(path, "\"__metadata__\" value for \"" + m.key() + "\" must be a string");
          metadata_[m.key()] = m->get<std::string>();
        }
        continue;
      }
      entries_.push_back(parse_entry(path, it.key(), *it, data_bytes));
    }
    check_tiling(path, entries_, data_bytes);
    std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
  return (it != entries_.end() && it->name == name) ? &*it : nullptr;
}

void SafetensorsReader::read_f32(const SafetensorsEntry& e, int64_t begin, int64_t count, float* out) const {
  if (!e.convertible)
    bad(path_, "tensor \"" + e.name + "\" has dtype " + e.dtype_name + "; only F32, BF16 and F16 can be loaded");
  ZT_CHECK(begin >= 0 && count >= 0 && begin + count <= e.numel, "read_f32 range outside tensor " + e.name);
  const size_t esize = dtype_size(e.dtype);
  constexpr int64_t kChunk = int64_t(1) << 20;  // elements per pread
  std::vector<unsigned char> staging;
  for (int64_t done = 0; done < count;) {
    int64_t n = std::min(kChunk, count - done);
    uint64_t off = data_start_ + e.begin + static_cast<uint64_t>(begin + done) * esize;
    size_t bytes = static_cast<size_t>(n) * esize;
    void* dst = out + done;
    if (e.dtype != DType::F32) {
      staging.resize(bytes);
      dst = staging.data();
    }
    size_t got = 0;
    while (got < bytes) {
      ssize_t r = ::pread(fd_, static_cast<char*>(dst) + got, bytes - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) bad(path_, "short read in tensor \"" + e.name + "\" (file changed or truncated?)");
      got += static_cast<size_t>(r);
    }
    if (e.dtype != DType::F32) convert(staging.data(), e.dtype, out + done, DType::F32, static_cast<size_t>(n));
    done += n;
  }
}

// ---- writer ------------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(const std::string& path, const std::vector<Decl>& tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), decls_(tensors) {
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& kv : metadata) meta[kv.first] = kv.second;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const Decl& d : decls_) {
    ZT_CHECK(d.name != "__metadata__" && !header.contains(d.name), "duplicate or reserved tensor name " + d.name);
    uint64_t numel = 1;
    for (int64_t s : d.shape) numel *= static_cast<uint64_t>(s);
    uint64_t bytes = numel * dtype_size(d.dtype);
    header[d.name] = {{"dtype", safetensors_dtype_name(d.dtype)}, {"shape", d.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keeps the data block 8-byte aligned
  file_ = std::make_unique<AtomicFile>(path_, "weights file");
  unsigned char len_bytes[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(n >> (8 * i));
  file_->write(len_bytes, 8);
  file_->write(text.data(), text.size());
}

SafetensorsWriter::~SafetensorsWriter() = default;  // an unfinished AtomicFile removes its temporary

void SafetensorsWriter::write_next(const void* data) {
  ZT_CHECK(file_ != nullptr && next_ < decls_.size(), "SafetensorsWriter: more tensors written than declared");
  const Decl& d = decls_[next_++];
  size_t numel = 1;
  for (int64_t s : d.shape) numel *= static_cast<size_t>(s);
  size_t bytes = numel * dtype_size(d.dtype);
  if (bytes) file_->write(data, bytes);
}

void SafetensorsWriter::finish() {
  ZT_CHECK(file_ != nullptr && next_ == decls_.size(),
           "SafetensorsWriter::finish after " + std::to_string(next_) + " of " + std::to_string(decls_.size()) + " tensors");
  file_->commit();
  file_.reset();
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Decl> decls;
  for (const auto& t : tensors) decls.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(path, decls, metadata);
  for (const auto& t : tensors) w.write_next(t.data);
  w.finish();
}

}  // namespace zt
