// docs/zero-walkthrough.md against a real run: 2 ranks under mpirun, the CPU backend, the
// walkthrough's DeepSpeed configs (configs/ds/walkthrough_stage{0..3}.json) and the tiny MLP
// (configs/models/mlp-tiny.json), set up as `zerotrain train` sets them up.
//
// The doc carries its numbers in Markdown tables, each preceded by a marker comment
//   <!-- zt:KIND key=value ... -->
// (KIND: params, sizes, plan, owners, collectives, totals, memory, paper). Every table is
// compared cell by cell (numbers as integers, names as text) with the bucket plan, the
// communicator's ring log (op, label, count, bytes, dtype, sequence number) and
// ZeroEngine::memory_lines() (predicted and measured bytes). A missing, extra or unknown
// table is a failure too. Cells of columns whose header contains "arithmetic", "holds", "why",
// "formula" or "notes" are prose for the reader and not compared.
//
// ZT_WALKTHROUGH_PRINT=1 prints the tables the run produces (to see what changed).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/model/model_config.h"

#ifndef ZT_SOURCE_DIR
#error "ZT_SOURCE_DIR must name the source tree"
#endif

using namespace zt;

namespace {

const std::string kRoot = ZT_SOURCE_DIR;
const std::string kDoc = kRoot + "/docs/zero-walkthrough.md";
const std::string kModel = kRoot + "/configs/models/mlp-tiny.json";
std::string config_path(int stage) { return kRoot + "/configs/ds/walkthrough_stage" + std::to_string(stage) + ".json"; }
const char* kData = "teacher:noise=0.1,seed=3";
constexpr int kStages = 4;
constexpr int kSteps = 2;  // step 2 must repeat step 1 exactly (the doc documents "one step")

int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int world_size() { int n; MPI_Comm_size(MPI_COMM_WORLD, &n); return n; }

// ---------------------------------------------------------------------------------------------
// The doc's tables.

using Row = std::vector<std::string>;

struct Table {
  std::string kind;
  std::map<std::string, std::string> attrs;
  int line = 0;  // of the marker, 1-based
  Row header;
  std::vector<Row> rows;
  std::string where() const { return "docs/zero-walkthrough.md:" + std::to_string(line) + " (zt:" + kind + ")"; }
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A table cell without Markdown decoration: backticks and ** are dropped.
std::string clean(std::string s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '`') continue;
    if (s[i] == '*' && i + 1 < s.size() && s[i + 1] == '*') { ++i; continue; }
    out += s[i];
  }
  return trim(out);
}

Row split_row(const std::string& line) {
  std::string l = trim(line);
  if (!l.empty() && l.front() == '|') l.erase(0, 1);
  if (!l.empty() && l.back() == '|') l.pop_back();
  Row r;
  std::string cell;
  for (char c : l) {
    if (c == '|') { r.push_back(clean(cell)); cell.clear(); }
    else cell += c;
  }
  r.push_back(clean(cell));
  return r;
}

std::vector<Table> parse_doc(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  std::vector<Table> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string l = trim(lines[i]);
    if (l.rfind("<!-- zt:", 0) != 0) continue;
    Table t;
    t.line = static_cast<int>(i) + 1;
    std::istringstream words(l.substr(8, l.find("-->") - 8));
    words >> t.kind;
    for (std::string kv; words >> kv;) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error(t.where() + ": attribute '" + kv + "' is not key=value");
      t.attrs[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    size_t j = i + 1;
    while (j < lines.size() && trim(lines[j]).empty()) ++j;
    if (j >= lines.size() || trim(lines[j]).rfind('|', 0) != 0)
      throw std::runtime_error(t.where() + ": no table follows the marker");
    t.header = split_row(lines[j]);
    j += 2;  // header and the |---| line
    for (; j < lines.size() && trim(lines[j]).rfind('|', 0) == 0; ++j) t.rows.push_back(split_row(lines[j]));
    out.push_back(std::move(t));
  }
  return out;
}

// Stages a table applies to: stage=S or stages=0,1,2; none means all.
std::vector<int> stages_of(const Table& t) {
  std::vector<int> s;
  std::string v = t.attrs.count("stage") ? t.attrs.at("stage") : t.attrs.count("stages") ? t.attrs.at("stages") : "";
  if (v.empty()) return {0, 1, 2, 3};
  std::istringstream in(v);
  for (std::string x; std::getline(in, x, ',');) s.push_back(std::stoi(x));
  return s;
}

bool is_prose_column(const std::string& h) {
  for (const char* w : {"arithmetic", "holds", "why", "formula", "notes"})
    if (h.find(w) != std::string::npos) return true;
  return false;
}

// Expected rows are compared with the doc's rows in the columns that are not prose. Numbers
// compare as integers ("5,508" is not accepted: the doc writes plain digits).
void compare_table(const Table& t, const std::vector<Row>& expected, const std::string& what) {
  SCOPED_TRACE(t.where() + " " + what);
  ASSERT_EQ(t.rows.size(), expected.size()) << "row count";
  for (size_t r = 0; r < expected.size(); ++r) {
    ASSERT_EQ(t.rows[r].size(), t.header.size()) << "row " << r + 1 << " has the wrong number of cells";
    ASSERT_EQ(expected[r].size(), t.header.size()) << "test bug: expected row width";
    for (size_t c = 0; c < t.header.size(); ++c) {
      if (is_prose_column(t.header[c])) continue;
      EXPECT_EQ(t.rows[r][c], expected[r][c])
          << "row " << r + 1 << ", column '" << t.header[c] << "': doc says '" << t.rows[r][c] << "', the run gives '"
          << expected[r][c] << "'";
    }
  }
}

void print_rows(const Table& t, const std::vector<Row>& rows) {
  if (!std::getenv("ZT_WALKTHROUGH_PRINT") || world_rank() != 0) return;
  std::printf("\n<!-- zt:%s", t.kind.c_str());
  for (const auto& [k, v] : t.attrs) std::printf(" %s=%s", k.c_str(), v.c_str());
  std::printf(" -->\n");
  for (const Row& r : rows) {
    std::printf("|");
    for (size_t c = 0; c < r.size(); ++c)
      std::printf(" %s |", c < t.header.size() && is_prose_column(t.header[c]) ? "..." : r[c].c_str());
    std::printf("\n");
  }
}

// ---------------------------------------------------------------------------------------------
// The run: what `zerotrain train --config walkthrough_stageS.json --model mlp-tiny.json` does,
// with the comm log's sequence numbers noted at each phase boundary.

struct StageRun {
  int stage = 0;
  EngineOptions opt;
  ZeroPlan plan;
  std::vector<ParamSpec> params;
  std::vector<CommRecord> records;       // the whole ring, oldest first
  uint64_t after_setup = 0;              // last seq of construction + init_parameters
  std::vector<std::vector<uint64_t>> micro_end;  // [step][micro] last seq after that micro-step
  std::vector<uint64_t> step_end;        // last seq after step()
  std::vector<MemoryLine> memory;
  double paper_bytes = 0;
};

StageRun run_stage(int stage) {
  StageRun out;
  out.stage = stage;
  const int world = world_size();
  ModelConfig mcfg = parse_model_config_file(kModel);
  ConfigOptions copt;
  copt.world_size = world;
  copt.world_size_origin = "MPI";
  copt.hidden_size = model_hidden_size(mcfg);
  DsConfig cfg = load_ds_config(config_path(stage), copt);
  EngineOptions eopt = engine_options_from(cfg);
  out.opt = eopt;

  auto dev = make_cpu_device();
  auto compute = dev->create_stream("compute");
  CommOptions comm_opt;
  comm_opt.timeout_s = 120;
  std::unique_ptr<Communicator> comm = make_mpi_communicator(*dev, MPI_COMM_WORLD, comm_opt);
  ModelOptions mopt;
  mopt.compute_dtype = eopt.compute_dtype;
  mopt.micro_batch = cfg.train_micro_batch_size_per_gpu;
  mopt.device = dev.get();
  mopt.stream = compute.get();
  std::unique_ptr<Model> model = load_model(kModel, mopt);
  DatasetShape shape;
  shape.mlp_dims = mcfg.mlp.dims;
  shape.mlp_relu = mcfg.mlp.activation == Activation::ReLU;
  shape.mlp_classification = mcfg.mlp.task == MlpTask::Classification;
  shape.global_batch = cfg.train_batch_size;
  shape.seed = 1234;
  std::unique_ptr<Dataset> data = make_dataset(kData, shape);
  {
    ZeroEngine engine(*model, *dev, *compute, *comm, eopt, schedule_from(cfg, eopt.optimizer));
    engine.init_parameters(1234);
    out.after_setup = comm->log().last_issued();
    const int gas = static_cast<int>(cfg.gradient_accumulation_steps);
    const int64_t mbs = cfg.train_micro_batch_size_per_gpu;
    Batch batch;
    for (int k = 0; k < kSteps; ++k) {
      out.micro_end.emplace_back();
      for (int j = 0; j < gas; ++j) {
        data->fill(k, sample_range(comm->rank(), world, j, gas, mbs), mbs, batch);
        engine.micro_step(batch);
        out.micro_end.back().push_back(comm->log().last_issued());
      }
      engine.step();
      out.step_end.push_back(comm->log().last_issued());
    }
    comm->synchronize();
    compute->synchronize();
    out.plan = engine.plan();
    out.params = model->params();
    out.memory = engine.memory_lines();
    out.paper_bytes = engine.zero_paper_model_state_bytes();
    out.records = comm->log().recent(comm->log().capacity());
  }
  return out;
}

// The phase of a collective in step k (0-based): "micro-step J" or "step".
std::string phase_of(const StageRun& r, int k, uint64_t seq) {
  for (size_t j = 0; j < r.micro_end[k].size(); ++j)
    if (seq <= r.micro_end[k][j]) return "micro-step " + std::to_string(j + 1);
  return "step";
}

std::vector<CommRecord> records_between(const StageRun& r, uint64_t after, uint64_t upto) {
  std::vector<CommRecord> v;
  for (const CommRecord& c : r.records)
    if (c.seq > after && c.seq <= upto) v.push_back(c);
  return v;
}

Row record_row(const CommRecord& c, const std::string& when) {
  return {std::to_string(c.seq), when, comm_op_name(c.op), c.label, std::to_string(c.count), std::to_string(c.bytes),
          dtype_name(c.dtype)};
}

const MemoryLine& mem_line(const StageRun& r, MemCategory c) {
  for (const MemoryLine& l : r.memory)
    if (l.category == c) return l;
  throw std::runtime_error("no memory line");
}

const MemCategory kStateCats[] = {MemCategory::Params, MemCategory::Grads, MemCategory::Master,
                                  MemCategory::OptimMoments};
const MemCategory kMemCats[] = {MemCategory::Params, MemCategory::Grads, MemCategory::Master,
                                MemCategory::OptimMoments, MemCategory::Buckets, MemCategory::Gather};

std::string fmt_shape(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

// ---------------------------------------------------------------------------------------------
// Expected rows per table kind, from the run of the stage the table names.

std::vector<Row> expect_params(const StageRun& r) {
  std::vector<Row> rows;
  for (size_t i = 0; i < r.params.size(); ++i) {
    const ParamSpec& p = r.params[i];
    rows.push_back({std::to_string(i), p.name, fmt_shape(p.shape), std::to_string(p.unit), std::to_string(p.numel)});
  }
  return rows;
}

std::vector<Row> expect_sizes(const StageRun& r) {
  const ZeroPlan& p = r.plan;
  return {{std::to_string(p.world), std::to_string(p.numel), std::to_string(p.buckets.size()),
           std::to_string(p.padded_numel), std::to_string(p.shard_numel)}};
}

std::vector<Row> expect_plan(const StageRun& r) {
  std::vector<Row> rows;
  for (const PlanBucket& b : r.plan.buckets) {
    std::string names;
    for (int p : b.params) names += (names.empty() ? "" : ", ") + r.params[static_cast<size_t>(p)].name;
    rows.push_back({std::to_string(b.id), std::to_string(b.unit), b.persistent ? "yes" : "no", names,
                    std::to_string(b.numel), std::to_string(b.padded - b.numel), std::to_string(b.padded),
                    std::to_string(b.slice), std::to_string(b.flat_begin), std::to_string(b.shard_begin)});
  }
  return rows;
}

// | rank | bucket | parameter | from | to | elements |: what of which parameter each rank's slice
// of each bucket holds (padding rows say "padding").
std::vector<Row> expect_owners(const StageRun& r) {
  std::vector<Row> rows;
  for (int rank = 0; rank < r.plan.world; ++rank) {
    for (const PlanBucket& b : r.plan.buckets) {
      const int64_t lo = r.plan.owned_flat_begin(b.id, rank), hi = lo + b.slice;
      for (int p : b.params) {
        const PlanParam& pp = r.plan.params[static_cast<size_t>(p)];
        int64_t a = std::max(lo, pp.flat_begin), e = std::min(hi, pp.flat_begin + pp.numel);
        if (e > a)
          rows.push_back({std::to_string(rank), std::to_string(b.id), r.params[static_cast<size_t>(p)].name,
                          std::to_string(a - pp.flat_begin), std::to_string(e - pp.flat_begin), std::to_string(e - a)});
      }
      const int64_t pad_lo = std::max(lo, b.flat_begin + b.span);  // the tail after the last parameter
      if (hi > pad_lo)
        rows.push_back({std::to_string(rank), std::to_string(b.id), "padding", std::to_string(pad_lo - b.flat_begin),
                        std::to_string(hi - b.flat_begin), std::to_string(hi - pad_lo)});
    }
  }
  return rows;
}

// | # | when | op | label | count | bytes | dtype |: start-up, then step 1 (micro-steps and step).
std::vector<Row> expect_collectives(const StageRun& r) {
  std::vector<Row> rows;
  for (const CommRecord& c : records_between(r, 0, r.after_setup)) rows.push_back(record_row(c, "start-up"));
  for (const CommRecord& c : records_between(r, r.after_setup, r.step_end[0]))
    rows.push_back(record_row(c, phase_of(r, 0, c.seq)));
  return rows;
}

// | op | calls | elements | bytes |: per optimizer step (step 1), for the three data collectives.
std::vector<Row> expect_totals(const StageRun& r) {
  std::vector<Row> rows;
  for (CommOp op : {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather}) {
    int64_t calls = 0, count = 0, bytes = 0;
    for (const CommRecord& c : records_between(r, r.after_setup, r.step_end[0]))
      if (c.op == op) { ++calls; count += static_cast<int64_t>(c.count); bytes += static_cast<int64_t>(c.bytes); }
    rows.push_back({comm_op_name(op), std::to_string(calls), std::to_string(count), std::to_string(bytes)});
  }
  return rows;
}

// | category | holds | arithmetic | bytes |: predicted == measured (gather: its peak, the gathered
// buffers come and go) on this rank; the doc's number is the same on both ranks.
std::vector<Row> expect_memory(const StageRun& r) {
  std::vector<Row> rows;
  for (MemCategory c : kMemCats) {
    const MemoryLine& l = mem_line(r, c);
    const int64_t measured = c == MemCategory::Gather ? l.peak : l.measured;
    EXPECT_EQ(l.predicted, measured) << "stage " << r.stage << " " << mem_category_name(c)
                                     << ": the engine's prediction differs from the allocator's count";
    rows.push_back({mem_category_name(c), "", "", std::to_string(measured)});
  }
  return rows;
}

// | stage | formula | paper bytes | zerotrain bytes | difference |
Row paper_row(const StageRun& r) {
  int64_t states = 0;
  for (MemCategory c : kStateCats) states += mem_line(r, c).measured;
  const int64_t paper = static_cast<int64_t>(r.paper_bytes);
  return {std::to_string(r.stage), "", std::to_string(paper), std::to_string(states), std::to_string(states - paper)};
}

// ---------------------------------------------------------------------------------------------

class Walkthrough : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (int s = 0; s < kStages; ++s) runs_.push_back(run_stage(s));  // collectives: every rank, always
    try {
      tables_ = parse_doc(kDoc);
    } catch (const std::exception& e) {
      parse_error_ = e.what();
    }
  }
  void SetUp() override { ASSERT_EQ(parse_error_, "") << "reading " << kDoc; }
  static inline std::string parse_error_;
  static std::vector<Table> tables_;
  static std::vector<StageRun> runs_;

  // The expected rows for table `t` in the run of `stage`; empty kind = unknown.
  static std::vector<Row> expected(const Table& t, int stage) {
    const StageRun& r = runs_[static_cast<size_t>(stage)];
    if (t.kind == "params") return expect_params(r);
    if (t.kind == "sizes") return expect_sizes(r);
    if (t.kind == "plan") return expect_plan(r);
    if (t.kind == "owners") return expect_owners(r);
    if (t.kind == "collectives") return expect_collectives(r);
    if (t.kind == "totals") return expect_totals(r);
    if (t.kind == "memory") return expect_memory(r);
    ADD_FAILURE() << t.where() << ": unknown table kind";
    return {};
  }
};
std::vector<Table> Walkthrough::tables_;
std::vector<StageRun> Walkthrough::runs_;

TEST_F(Walkthrough, RunsAtTwoRanks) {
  ASSERT_EQ(world_size(), 2) << "the walkthrough is written for N = 2 ranks";
  for (const StageRun& r : runs_) EXPECT_EQ(r.plan.world, 2);
}

// Every table kind the doc must have, for every stage, exactly once.
TEST_F(Walkthrough, DocHasEveryTable) {
  std::map<std::string, std::multiset<int>> seen;
  for (const Table& t : tables_)
    for (int s : stages_of(t)) seen[t.kind].insert(s);
  for (const char* k : {"params", "sizes", "plan", "owners", "collectives", "totals", "memory", "paper"})
    for (int s = 0; s < kStages; ++s)
      EXPECT_EQ(seen[k].count(s), 1u) << "zt:" << k << " tables covering stage " << s;
  for (const auto& [k, v] : seen)
    EXPECT_TRUE(std::set<std::string>({"params", "sizes", "plan", "owners", "collectives", "totals", "memory", "paper"})
                    .count(k))
        << "unknown table kind zt:" << k;
}

// Each table equals the run of every stage it claims to describe.
TEST_F(Walkthrough, TablesMatchTheRun) {
  for (const Table& t : tables_) {
    if (t.kind == "paper") continue;
    for (int s : stages_of(t)) {
      std::vector<Row> want = expected(t, s);
      if (s == stages_of(t).front()) print_rows(t, want);
      compare_table(t, want, "vs the stage " + std::to_string(s) + " run on rank " + std::to_string(world_rank()));
    }
  }
}

TEST_F(Walkthrough, PaperTableMatchesTheRun) {
  for (const Table& t : tables_) {
    if (t.kind != "paper") continue;
    std::vector<Row> want;
    for (int s : stages_of(t)) want.push_back(paper_row(runs_[static_cast<size_t>(s)]));
    print_rows(t, want);
    compare_table(t, want, "ZeRO paper vs zerotrain model states");
  }
}

// The doc documents "one step": the second step issues the same collectives as the first
// (same ops, labels, counts, bytes, dtypes, phases), only with later sequence numbers.
TEST_F(Walkthrough, EveryStepIssuesTheSameCollectives) {
  for (const StageRun& r : runs_) {
    std::vector<CommRecord> a = records_between(r, r.after_setup, r.step_end[0]);
    std::vector<CommRecord> b = records_between(r, r.step_end[0], r.step_end[1]);
    ASSERT_EQ(a.size(), b.size()) << "stage " << r.stage;
    for (size_t i = 0; i < a.size(); ++i) {
      Row ra = record_row(a[i], phase_of(r, 0, a[i].seq)), rb = record_row(b[i], phase_of(r, 1, b[i].seq));
      ra.erase(ra.begin());
      rb.erase(rb.begin());
      EXPECT_EQ(ra, rb) << "stage " << r.stage << " collective " << i + 1 << " of step 2 vs step 1";
    }
  }
}

}  // namespace
