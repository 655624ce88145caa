// text_codec.cpp — the byte-level codec (text_codec.h).
#include "zerotrain/data/text_codec.h"

namespace zt {

std::vector<uint32_t> ByteCodec::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteCodec::decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) {
    if (id < 256) out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    else out += "<|" + std::to_string(id) + "|>";
  }
  return out;
}

std::string ByteCodec::describe() const { return "byte-level (ids 0..255 are bytes)"; }

}  // namespace zt
