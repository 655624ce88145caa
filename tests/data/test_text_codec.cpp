// The byte-level text codec (data/text_codec.h): bytes are ids, ids >= 256 print as markers.
#include <gtest/gtest.h>

#include "zerotrain/data/text_codec.h"

namespace zt {
namespace {

TEST(ByteCodec, BytesAreIdsAndLargerIdsPrintAsMarkers) {
  const ByteCodec c;
  const std::string text = std::string("ab\n") + static_cast<char>(0xC3) + static_cast<char>(0xA9);
  const std::vector<uint32_t> ids = c.encode(text);
  EXPECT_EQ(ids, (std::vector<uint32_t>{97, 98, 10, 0xC3, 0xA9}));
  EXPECT_EQ(c.decode(ids), text);
  EXPECT_EQ(c.decode({104, 256, 105, 50256}), "h<|256|>i<|50256|>");
}

}  // namespace
}  // namespace zt
