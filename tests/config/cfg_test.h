// cfg_test.h — helpers for the config tests: resolve a config text, or get its error message.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "zerotrain/config/ds_config.h"
#include "zerotrain/core/check.h"

namespace zt_test {

inline zt::ConfigOptions world(int w) {
  zt::ConfigOptions o;
  o.world_size = w;
  o.world_size_origin = "test";
  return o;
}

inline zt::DsConfig resolve(const std::string& text, const zt::ConfigOptions& opt = world(1)) {
  return zt::parse_ds_config(text, "test.json", opt);
}

// The InputError message, or "" when the config is accepted.
inline std::string error_of(const std::string& text, const zt::ConfigOptions& opt = world(1)) {
  try {
    zt::parse_ds_config(text, "test.json", opt);
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return "";
}

// Wraps section text with a valid batch size: tb("\"fp16\": {...}") -> {"train_batch_size": 8, ...}.
inline std::string tb(const std::string& body) { return "{\"train_batch_size\": 8, " + body + "}"; }

inline bool has_warning(const zt::DsConfig& c, const std::string& needle) {
  for (const auto& w : c.warnings)
    if (w.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace zt_test

// Asserts the config is rejected and the message contains every given fragment.
#define EXPECT_REJECTED(text, ...)                                                       \
  do {                                                                                   \
    std::string zt_err_ = zt_test::error_of(text);                                       \
    EXPECT_FALSE(zt_err_.empty()) << "accepted: " << (text);                             \
    for (const char* zt_frag_ : {__VA_ARGS__})                                           \
      EXPECT_NE(zt_err_.find(zt_frag_), std::string::npos) << "message: " << zt_err_;    \
  } while (0)

#define EXPECT_REJECTED_W(text, opt, ...)                                                \
  do {                                                                                   \
    std::string zt_err_ = zt_test::error_of(text, opt);                                  \
    EXPECT_FALSE(zt_err_.empty()) << "accepted: " << (text);                             \
    for (const char* zt_frag_ : {__VA_ARGS__})                                           \
      EXPECT_NE(zt_err_.find(zt_frag_), std::string::npos) << "message: " << zt_err_;    \
  } while (0)

#define EXPECT_ACCEPTED(text)                                                            \
  EXPECT_EQ(zt_test::error_of(text), "") << (text)
