// simulate_report.cpp — text, JSON and trace of a predicted step (simulate_report.h).
#include "simulate_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "observe.h"

namespace zt {

namespace {

// v with `digits` decimals, then its unit.
std::string with_unit(double v, int digits, const char* unit) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v << unit;
  return o.str();
}
// Milliseconds; below 0.1 ms, microseconds (a toy model's step is microseconds long).
std::string ms(double s) { return s > 0 && s < 1e-4 ? with_unit(s * 1e6, 3, " us") : with_unit(s * 1e3, 3, " ms"); }
std::string mib(double b) { return with_unit(b / (1 << 20), 2, " MiB"); }
std::string pct(double p) { return p < 0 ? "n/a (no communication)" : with_unit(p, 1, "%"); }

std::string path_line(const SimResult& r, int i) {
  const SimSlice& s = r.slices[static_cast<size_t>(i)];
  char line[256];
  std::snprintf(line, sizeof(line), "    %-7s %-34s %10.3f ms .. %10.3f ms", lane_name(s.lane), s.name.c_str(), s.begin_s * 1e3,
                s.end_s * 1e3);
  std::string out = line;
  if (s.cause >= 0) {
    const SimSlice& c = r.slices[static_cast<size_t>(s.cause)];
    if (c.lane != s.lane) out += std::string("  (waited for ") + lane_name(c.lane) + ": " + c.name + ")";
  }
  return out + "\n";
}

std::string links_line(const CostModel& cost) {
  const HardwareProfile& h = cost.hardware();
  return "  links: ring " + std::string(cost.ring_spans_nodes() ? "across nodes" : "inside one node") + " at " +
         with_unit(cost.link_bytes_per_s() / 1e9, 1, " GB/s") + " per GPU, " + with_unit(cost.link_latency_s() * 1e6, 1, " us") +
         " latency per hop (" + with_unit(h.intra_latency_s * 1e6, 1, " us") + " inside a node, " +
         with_unit(h.launch_latency_s * 1e6, 1, " us") + " per collective); host link " + with_unit(h.host_link_bytes_per_s / 1e9, 1, " GB/s") + "; peak " +
         with_unit(cost.peak_flops() / 1e12, 1, " TFLOP/s") + " per GPU\n" +
         (cost.comm_shares_cores() ? "  comm thread on compute's cores: a collective beside running compute takes at least " +
                                         with_unit(h.collective_beside_compute_s * 1e3, 2, " ms") + " (its turn on the core)\n"
                                   : "");
}

}  // namespace

std::string simulate_report(const SimResult& r, const SimContext& c) {
  std::string out = "simulated step (ZeRO stage " + std::to_string(c.stage) + ", N=" + std::to_string(c.world) + " on " +
                    std::to_string(c.nodes) + " node(s) of " + c.cost->hardware().name + ", " + c.model_name + ", " +
                    c.compute_dtype + ", overlap_comm " + (c.overlap_comm ? "on" : "off") +
                    ", gradient_accumulation_steps " + std::to_string(c.gas) +
                    (c.offload_optimizer ? ", offload_optimizer" : "") + "):\n";
  out += links_line(*c.cost);
  out += "  step time:              " + ms(r.step_s) + "\n";
  out += "  compute busy:           " + ms(r.compute_busy_s) + "\n";
  out += "  comm busy:              " + ms(r.comm_busy_s) + " (" + std::to_string(r.collectives) + " collectives, " +
         mib(r.comm_ring_bytes_per_rank) + " sent per rank)\n";
  if (r.has_copy_lane)
    out += "  copy busy:              " + ms(r.copy_busy_s) + ", exposed " + ms(r.copy_exposed_s) + ", overlap " +
           pct(r.copy_overlap_pct()) + "\n";
  out += "  exposed communication:  " + ms(r.comm_exposed_s) + ", overlap " + pct(r.overlap_pct()) + "\n";
  out += "  throughput:             " + with_unit(r.tokens_per_s, 0, " tokens/s") + ", " + with_unit(r.samples_per_s, 2, " samples/s") +
         " (" + std::to_string(r.samples) + " samples per step), " + with_unit(r.model_flops_per_s / 1e12, 1, " TFLOP/s") +
         " model FLOPs, MFU " + with_unit(100 * r.mfu, 1, "%") + "\n";
  const size_t n = r.critical_path.size(), shown = std::min<size_t>(n, 12);
  out += "  critical path (" + std::to_string(n) + " slices; the last " + std::to_string(shown) +
         " shown, the last ends the step):\n";
  for (size_t k = n - shown; k < n; ++k) out += path_line(r, r.critical_path[k]);
  return out;
}

nlohmann::json simulate_json(const SimResult& r, const SimContext& c) {
  nlohmann::json path = nlohmann::json::array();
  for (int i : r.critical_path) {
    const SimSlice& s = r.slices[static_cast<size_t>(i)];
    path.push_back({{"lane", lane_name(s.lane)}, {"name", s.name}, {"begin_ms", s.begin_s * 1e3}, {"end_ms", s.end_s * 1e3}});
  }
  auto maybe = [](double p) { return p < 0 ? nlohmann::json() : nlohmann::json(p); };
  return {{"hardware", c.cost->hardware().name}, {"stage", c.stage}, {"world_size", c.world}, {"nodes", c.nodes},
          {"gradient_accumulation_steps", c.gas}, {"overlap_comm", c.overlap_comm}, {"step_ms", r.step_s * 1e3},
          {"compute_busy_ms", r.compute_busy_s * 1e3}, {"comm_busy_ms", r.comm_busy_s * 1e3},
          {"copy_busy_ms", r.copy_busy_s * 1e3}, {"comm_exposed_ms", r.comm_exposed_s * 1e3},
          {"copy_exposed_ms", r.copy_exposed_s * 1e3}, {"overlap_pct", maybe(r.overlap_pct())},
          {"copy_overlap_pct", maybe(r.copy_overlap_pct())}, {"comm_bytes_per_rank", r.comm_ring_bytes_per_rank},
          {"collectives", r.collectives}, {"samples_per_step", r.samples}, {"tokens_per_s", r.tokens_per_s},
          {"samples_per_s", r.samples_per_s}, {"model_tflops", r.model_flops_per_s / 1e12}, {"mfu", r.mfu},
          {"critical_path", path}};
}

nlohmann::json simulate_trace(const SimResult& r) {
  StepTimeline previous, step;  // the previous step's work that ends inside this one (step 0), and step 1
  previous.step = 0;
  step.step = 1;
  double origin = 0;
  for (size_t i = 0; i < r.slices.size(); ++i) {
    const SimSlice& s = r.slices[i];
    origin = std::min(origin, s.begin_s);
    TimelineSlice x;
    x.lane = s.lane;
    x.name = s.name;
    x.begin_s = s.begin_s;
    x.end_s = s.end_s;
    x.seq = i + 1;
    if (s.lane != Lane::Compute) {
      x.op = s.op_name;
      x.label = s.label;
      x.dtype = s.dtype;
      x.bucket = s.bucket;
      x.bytes = static_cast<uint64_t>(s.bytes);
    }
    StepTimeline& t = s.op < 0 ? previous : step;
    t.slices.push_back(x);
    if (s.handoff_s < 0) continue;
    TimelineSlice ready;  // the flow's source: compute handed bucket s.bucket over
    ready.lane = Lane::Compute;
    ready.grads_ready = true;
    ready.bucket = s.bucket;
    ready.begin_s = ready.end_s = s.handoff_s;
    t.slices.push_back(ready);
  }
  return trace_events(0, {previous, step}, origin);
}

}  // namespace zt
