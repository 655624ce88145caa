// safetensors.h — read and write the safetensors format (Hugging Face).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header, then the data block.
// Header: {"__metadata__": {str: str}, name: {"dtype": "F32"|"BF16"|"F16"|..., "shape": [...],
// "data_offsets": [begin, end]}} with offsets relative to the data block.
// Every malformed file (truncated, bad JSON, lengths or offsets beyond the file, size not matching
// shape·dtype) is an InputError naming the file and the problem — never a crash.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/core/dtype.h"
#include "zerotrain/core/file_io.h"

namespace zt {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;          // as in the file, e.g. "BF16"
  bool convertible = false;        // dtype is F32, BF16 or F16 (readable as fp32)
  DType dtype = DType::F32;        // valid when convertible
  std::vector<int64_t> shape;
  int64_t numel = 0;
  uint64_t begin = 0, end = 0;     // byte range inside the data block
};

// An open, validated safetensors file. Owns the file descriptor.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);  // InputError on any problem
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // sorted by name
  const SafetensorsEntry* find(const std::string& name) const;               // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Elements [begin, begin+count) of `e`, converted to fp32. InputError on a short read or a
  // dtype that is not F32/BF16/F16.
  void read_f32(const SafetensorsEntry& e, int64_t begin, int64_t count, float* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;        // file offset of the data block (8 + N)
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;      // host, numel·dtype_size bytes, in `dtype`
};

// Streaming writer: the header is written from the declared tensors up front, then each
// tensor's bytes are appended in declaration order, so only one tensor need be in host memory.
// Writes to a unique temporary (PATH.tmp.XXXXXX) and renames onto path in finish(); an unfinished writer removes the
// temporary file. InputError when the file cannot be written.
class SafetensorsWriter {
 public:
  struct Decl {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::string& path, const std::vector<Decl>& tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // Appends the next declared tensor's data (numel·dtype_size bytes, host).
  void write_next(const void* data);
  void finish();  // all tensors written: fsync, rename over the target (core/file_io.h AtomicFile)

 private:
  std::string path_;
  std::vector<Decl> decls_;
  size_t next_ = 0;
  std::unique_ptr<AtomicFile> file_;  // unique temporary in the target's directory until finish()
};

// Writes tensors (data in file order = vector order) in one call (SafetensorsWriter).
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

const char* safetensors_dtype_name(DType t);  // "F32", "BF16", "F16"

}  // namespace zt
