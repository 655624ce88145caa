// hardware.cpp — the hardware profile reader (zerotrain/sim/hardware.h).
#include "zerotrain/sim/hardware.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxProfileBytes = int64_t(1) << 20;

[[noreturn]] void fail(const std::string& path, const std::string& key, const std::string& why) {
  throw InputError("hardware profile " + path + ": key '" + key + "': " + why);
}

void check_keys(const json& doc, const std::string& path, const std::string& where, const std::set<std::string>& keys,
                const std::set<std::string>& optional = {}) {
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (!keys.count(it.key()) && !optional.count(it.key())) fail(path, where + it.key(), "unknown key");
  for (const std::string& k : keys)
    if (!doc.contains(k)) fail(path, where + k, "missing");
}

double positive(const json& doc, const std::string& path, const std::string& where, const char* key, double hi = INFINITY) {
  const json& v = doc.at(key);
  if (!v.is_number()) fail(path, where + key, "expected a number");
  const double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x)) fail(path, where + key, "expected a number > 0, got " + v.dump());
  if (x > hi) fail(path, where + key, "expected at most " + json(hi).dump() + ", got " + v.dump());
  return x;
}

std::string text(const json& doc, const std::string& path, const char* key) {
  const json& v = doc.at(key);
  if (!v.is_string() || v.get<std::string>().empty()) fail(path, key, "expected a non-empty string");
  return v.get<std::string>();
}

json parse(const std::string& path) {
  const std::string body = read_regular_file(path, "hardware profile " + path, kMaxProfileBytes);
  try {
    json doc = json::parse(body);
    if (!doc.is_object()) throw InputError("hardware profile " + path + ": expected a JSON object");
    return doc;
  } catch (const json::exception& e) {
    throw InputError("hardware profile " + path + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace

HardwareProfile load_hardware_profile(const std::string& path) {
  const json doc = parse(path);
  check_keys(doc, path, "",
             {"name", "sources", "peak_bf16_flops_per_s", "peak_fp32_flops_per_s", "device_memory_bytes", "hbm_bytes_per_s", "efficiency",
              "gpus_per_node", "collective_launch_latency_s", "intra_node_bytes_per_s", "intra_node_latency_s", "inter_node_bytes_per_s_per_gpu",
              "inter_node_latency_s", "host_link_bytes_per_s", "host_memory_bytes_per_s"},
             {"collective_beside_compute_s"});
  HardwareProfile h;
  h.name = text(doc, path, "name");
  h.sources = text(doc, path, "sources");
  h.peak_bf16_flops = positive(doc, path, "", "peak_bf16_flops_per_s");
  h.peak_fp32_flops = positive(doc, path, "", "peak_fp32_flops_per_s");
  h.device_memory_bytes = positive(doc, path, "", "device_memory_bytes");
  h.hbm_bytes_per_s = positive(doc, path, "", "hbm_bytes_per_s");
  const json& e = doc.at("efficiency");
  if (!e.is_object()) fail(path, "efficiency", "expected an object {gemm, attention, elementwise, optimizer}");
  check_keys(e, path, "efficiency.", {"gemm", "attention", "elementwise", "optimizer"});
  h.efficiency = {positive(e, path, "efficiency.", "gemm", 1), positive(e, path, "efficiency.", "attention", 1),
                  positive(e, path, "efficiency.", "elementwise", 1), positive(e, path, "efficiency.", "optimizer", 1)};
  const json& g = doc.at("gpus_per_node");
  if (!g.is_number_integer() || g.get<int64_t>() < 1 || g.get<int64_t>() > 4096)
    fail(path, "gpus_per_node", "expected an integer in [1, 4096], got " + g.dump());
  h.gpus_per_node = g.get<int64_t>();
  h.launch_latency_s = positive(doc, path, "", "collective_launch_latency_s");
  h.intra_bytes_per_s = positive(doc, path, "", "intra_node_bytes_per_s");
  h.intra_latency_s = positive(doc, path, "", "intra_node_latency_s");
  h.inter_bytes_per_s = positive(doc, path, "", "inter_node_bytes_per_s_per_gpu");
  h.inter_latency_s = positive(doc, path, "", "inter_node_latency_s");
  h.host_link_bytes_per_s = positive(doc, path, "", "host_link_bytes_per_s");
  h.host_memory_bytes_per_s = positive(doc, path, "", "host_memory_bytes_per_s");
  if (doc.contains("collective_beside_compute_s")) {
    const json& v = doc.at("collective_beside_compute_s");
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      fail(path, "collective_beside_compute_s", "expected a number >= 0 (seconds), got " + v.dump());
    h.collective_beside_compute_s = v.get<double>();
  }
  return h;
}

}  // namespace zt
