// tfevents.cpp — see include/zerotrain/io/tfevents.h.
#include "zerotrain/io/tfevents.h"

#include <array>
#include <cstring>

namespace zt {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format: varints, tags (field number << 3 | wire type), fixed little-endian.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }
template <typename T> void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}
void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  put_tag(out, field, kFixed64);
  put_le(out, bits);
}
void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  put_tag(out, field, kFixed32);
  put_le(out, bits);
}

// Event fields 1 (wall_time) and 2 (step; int64 is a two's-complement varint, omitted when 0).
std::string event_head(double wall_time_s, int64_t step) {
  std::string e;
  put_double(e, 1, wall_time_s);
  if (step != 0) {
    put_tag(e, 2, kVarint);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < bytes; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  const uint32_t c = crc32c(data, bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string r;
  r.reserve(data.size() + 16);
  put_le<uint64_t>(r, data.size());
  put_le<uint32_t>(r, masked_crc32c(r.data(), 8));
  r += data;
  put_le<uint32_t>(r, masked_crc32c(data.data(), data.size()));
  return r;
}

std::string file_version_event(double wall_time_s) {
  std::string e = event_head(wall_time_s, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string scalar_event(double wall_time_s, int64_t step, const std::string& tag, float value) {
  std::string v;
  put_bytes(v, 1, tag);
  put_float(v, 2, value);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event_head(wall_time_s, step);
  put_bytes(e, 5, summary);
  return e;
}

}  // namespace zt
