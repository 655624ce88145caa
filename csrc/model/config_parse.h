// config_parse.h — typed reads of model-file keys, shared by the model parsers (private to
// csrc/model). Every failure is an InputError "model file SOURCE: key "KEY": what".
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace zt::model_detail {

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what);
const nlohmann::json& require(const nlohmann::json& doc, const std::string& source, const char* key);
// A positive integer no larger than `max`.
int64_t get_positive_int(const nlohmann::json& doc, const std::string& source, const char* key, int64_t max);
// `key` (default "init_std") as a positive finite number <= 1e3, or `dflt` when absent.
float get_init_std(const nlohmann::json& doc, const std::string& source, float dflt, const char* key = "init_std");
std::string get_string(const nlohmann::json& doc, const std::string& source, const char* key);
// Every key is in `allowed`, or is "type", "name", "description" or starts with "_".
void check_keys(const nlohmann::json& doc, const std::string& source, const std::set<std::string>& allowed);

}  // namespace zt::model_detail
