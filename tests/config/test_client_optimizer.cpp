// docs/config.md §4 "No optimizer section": a config without one is valid (DeepSpeed leaves the
// optimizer to the client script); the trainer's client optimizer comes from flags with the GPT
// recipe's defaults, a config section takes precedence, and flags given beside a section are an
// error. Also §9: activation_checkpointing.partition_activations is accepted as "not used".
#include <cmath>
#include <vector>

#include "cfg_test.h"
#include "zerotrain/app/client_optimizer.h"
#include "zerotrain/app/train_setup.h"

using namespace zt_test;

namespace {

// The tutorial's ZeRO-2 config, as written: no optimizer, no scheduler.
const char* const kTutorial =
    R"({"bf16":{"enabled":true},"zero_optimization":{"stage":2,"overlap_comm":true,"reduce_bucket_size":5e5},)"
    R"("train_micro_batch_size_per_gpu":4})";

std::string with(const std::string& section) {
  std::string t = kTutorial;
  return t.substr(0, t.size() - 1) + "," + section + "}";
}

// Reads `args` as a command line of client optimizer flags; every one must be consumed.
zt::ClientOptimizer flags(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("train")};
  for (std::string& a : args) argv.push_back(a.data());
  zt::ClientOptimizer c;
  for (int i = 1; i < static_cast<int>(argv.size()); ++i) {
    EXPECT_TRUE(zt::take_client_optimizer_flag(c, "train", static_cast<int>(argv.size()), argv.data(), i)) << argv[i];
  }
  return c;
}

// The InputError message of reading `args` (flag parsing, then resolution on `config`), or "".
std::string flag_error(std::vector<std::string> args, const std::string& config = kTutorial) {
  try {
    zt::resolve_optimizer(resolve(config), flags(std::move(args)));
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return "";
}

void expect_same(const zt::OptimizerHparams& a, const zt::OptimizerHparams& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.beta1, b.beta1);
  EXPECT_EQ(a.beta2, b.beta2);
  EXPECT_EQ(a.eps, b.eps);
  EXPECT_EQ(a.weight_decay, b.weight_decay);
  EXPECT_EQ(a.bias_correction, b.bias_correction);
  EXPECT_EQ(a.adam_w_mode, b.adam_w_mode);
  EXPECT_EQ(a.momentum, b.momentum);
  EXPECT_EQ(a.dampening, b.dampening);
  EXPECT_EQ(a.nesterov, b.nesterov);
}

}  // namespace

TEST(ClientOptimizer, NoSectionIsAcceptedAndNotInvented) {
  const zt::DsConfig c = resolve(kTutorial, world(2));
  EXPECT_FALSE(c.optimizer.has_value());
  EXPECT_FALSE(c.resolved.contains("optimizer"));  // the resolved document stays DeepSpeed's
  EXPECT_FALSE(c.scheduler.has_value());
  const zt::EngineOptions e = zt::engine_options_from(c);
  EXPECT_EQ(e.optimizer.kind, zt::OptimizerKind::Adam);
  EXPECT_EQ(e.optimizer.type, "adamw");
  EXPECT_TRUE(e.optimizer.adam_w_mode);
  EXPECT_EQ(e.optimizer.lr, 3e-4);
  EXPECT_EQ(e.optimizer.beta1, 0.9);
  EXPECT_EQ(e.optimizer.beta2, 0.95);
  EXPECT_EQ(e.optimizer.eps, 1e-8);
  EXPECT_EQ(e.optimizer.weight_decay, 0.1);
  EXPECT_TRUE(e.optimizer.bias_correction);
}

TEST(ClientOptimizer, FlagsEqualTheEquivalentSection) {
  const zt::OptimizerHparams sgd = zt::resolve_optimizer(resolve(kTutorial), flags({"--optimizer", "sgd", "--lr", "0.01",
                                                                                     "--momentum", "0.9"}));
  expect_same(sgd, zt::engine_options_from(resolve(with(R"("optimizer":{"type":"SGD","params":{"lr":0.01,"momentum":0.9}})")))
                       .optimizer);
  EXPECT_EQ(sgd.weight_decay, 0.0);
  const zt::OptimizerHparams adamw = zt::resolve_optimizer(resolve(kTutorial), {});
  expect_same(adamw, zt::engine_options_from(resolve(with(
                         R"("optimizer":{"type":"AdamW","params":{"lr":3e-4,"betas":[0.9,0.95],"eps":1e-8,"weight_decay":0.1}})")))
                         .optimizer);
  const zt::OptimizerHparams adam =
      zt::resolve_optimizer(resolve(kTutorial), flags({"--optimizer", "adam", "--betas", "0.8,0.99", "--eps", "1e-6",
                                                       "--weight-decay", "0.01", "--lr", "1e-3"}));
  expect_same(adam, zt::engine_options_from(resolve(with(
                        R"("optimizer":{"type":"Adam","params":{"lr":1e-3,"betas":[0.8,0.99],"eps":1e-6,)"
                        R"("weight_decay":0.01,"adam_w_mode":false}})")))
                        .optimizer);
  EXPECT_FALSE(adam.adam_w_mode);  // torch.optim.Adam: L2 decay
}

TEST(ClientOptimizer, BadFlagValuesNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, const char*>> bad = {
      {{"--optimizer", "lion"}, "--optimizer 'lion': expected adamw, adam or sgd"},
      {{"--optimizer", "AdamW"}, "--optimizer"},
      {{"--lr", "0"}, "--lr '0'"},
      {{"--lr", "-1e-3"}, "--lr"},
      {{"--lr", "abc"}, "--lr 'abc'"},
      {{"--lr", "1e-3x"}, "--lr"},
      {{"--lr", "nan"}, "--lr"},
      {{"--lr", "inf"}, "--lr"},
      {{"--lr", ""}, "--lr"},
      {{"--weight-decay", "-0.1"}, "--weight-decay"},
      {{"--eps", "0"}, "--eps"},
      {{"--betas", "0.9"}, "--betas '0.9'"},
      {{"--betas", "0.9,1"}, "--betas (B2) '1'"},
      {{"--betas", "0.9,0.95,0.1"}, "--betas"},
      {{"--betas", "-0.1,0.9"}, "--betas (B1)"},
      {{"--optimizer", "sgd", "--momentum", "1"}, "--momentum '1'"},
      {{"--optimizer", "sgd", "--betas", "0.9,0.95"}, "--betas: does not apply to --optimizer sgd"},
      {{"--optimizer", "sgd", "--eps", "1e-8"}, "--eps: does not apply"},
      {{"--momentum", "0.9"}, "--momentum: does not apply to --optimizer adamw"},
  };
  for (const auto& [args, needle] : bad) {
    const std::string err = flag_error(args);
    EXPECT_NE(err.find(needle), std::string::npos) << "args " << args[0] << " " << args[1] << ": " << err;
  }
  std::vector<std::string> missing{"--lr"};
  std::vector<char*> argv{const_cast<char*>("train"), missing[0].data()};
  zt::ClientOptimizer c;
  int i = 1;
  EXPECT_THROW(zt::take_client_optimizer_flag(c, "train", 2, argv.data(), i), zt::InputError);
  std::string other = "--steps";
  argv[1] = other.data();
  EXPECT_FALSE(zt::take_client_optimizer_flag(c, "train", 2, argv.data(), i));  // not a client flag
}

TEST(ClientOptimizer, SectionTakesPrecedenceAndFlagsBesideItAreAnError) {
  const std::string section = with(R"("optimizer":{"type":"SGD","params":{"lr":0.05}})");
  EXPECT_EQ(zt::resolve_optimizer(resolve(section), {}).lr, 0.05);
  const std::string err = flag_error({"--lr", "0.01", "--optimizer", "sgd"}, section);
  EXPECT_NE(err.find("--lr: given, but the config test.json has an \"optimizer\" section"), std::string::npos) << err;
  EXPECT_NE(err.find("remove --lr, --optimizer or the config's \"optimizer\" section"), std::string::npos) << err;
  // A section without a type is no optimizer in DeepSpeed (a warning): the client's is used.
  const zt::DsConfig no_type = resolve(with(R"("optimizer":{"params":{"lr":0.5}})"));
  EXPECT_EQ(zt::resolve_optimizer(no_type, flags({"--lr", "0.002"})).lr, 0.002);
}

TEST(ClientOptimizer, SchedulesWorkWithTheClientOptimizer) {
  // WarmupLR's warmup_max_lr defaults to the optimizer's lr: the client's.
  const zt::DsConfig warm = resolve(with(R"("scheduler":{"type":"WarmupLR","params":{"warmup_num_steps":4,"warmup_type":"linear"}})"));
  const zt::OptimizerHparams h = zt::resolve_optimizer(warm, flags({"--lr", "0.002"}));
  std::unique_ptr<zt::LrSchedule> s = zt::schedule_from(warm, h);
  EXPECT_DOUBLE_EQ(s->lr_at(4), 0.002);
  EXPECT_DOUBLE_EQ(s->lr_at(10), 0.002);
  EXPECT_DOUBLE_EQ(s->lr_at(2), 0.001);  // linear: t / warmup_num_steps of the way
  // OneCycle cycles momentum through Adam's betas: on with the client AdamW, off (warned) with SGD.
  const zt::DsConfig one = resolve(with(
      R"("scheduler":{"type":"OneCycle","params":{"cycle_min_lr":1e-4,"cycle_max_lr":1e-3,"cycle_first_step_size":2}})"));
  std::unique_ptr<zt::LrSchedule> adamw = zt::schedule_from(one, zt::engine_options_from(one).optimizer);
  EXPECT_TRUE(adamw->cycles_momentum());
  EXPECT_TRUE(adamw->warnings().empty());
  EXPECT_TRUE(adamw->current().has_betas);
  std::unique_ptr<zt::LrSchedule> sgd =
      zt::schedule_from(one, zt::engine_options_from(one, flags({"--optimizer", "sgd"})).optimizer);
  EXPECT_FALSE(sgd->cycles_momentum());
  ASSERT_EQ(sgd->warnings().size(), 1u);
}

TEST(ClientOptimizer, OneLineNamesWhatIsUsed) {
  const zt::DsConfig c = resolve(kTutorial);
  EXPECT_EQ(zt::optimizer_line(c, {}, zt::resolve_optimizer(c, {})),
            "optimizer: AdamW lr 0.0003 betas (0.9, 0.95) eps 1e-08 weight_decay 0.1 (client optimizer: the defaults; "
            "a config \"optimizer\" section takes precedence); scheduler: none (constant lr)");
  const zt::ClientOptimizer f = flags({"--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"});
  EXPECT_EQ(zt::optimizer_line(c, f, zt::resolve_optimizer(c, f)),
            "optimizer: SGD lr 0.01 momentum 0.9 weight_decay 0 (client optimizer from --optimizer, --lr, --momentum, "
            "defaults for the rest; a config \"optimizer\" section takes precedence); scheduler: none (constant lr)");
  const zt::DsConfig s = resolve(with(R"("optimizer":{"type":"Adam","params":{"adam_w_mode":false}},)"
                                      R"("scheduler":{"type":"WarmupLR","params":{}})"));
  EXPECT_EQ(zt::optimizer_line(s, {}, zt::resolve_optimizer(s, {})),
            "optimizer: Adam (L2 weight decay) lr 0.001 betas (0.9, 0.999) eps 1e-08 weight_decay 0 (the config's "
            "\"optimizer\" section); scheduler: WarmupLR (the config's \"scheduler\" section)");
}

TEST(ActivationCheckpointing, PartitionActivationsIsNotUsed) {
  const zt::DsConfig c = resolve(with(R"("activation_checkpointing":{"partition_activations":true})"), world(2));
  EXPECT_EQ(c.resolved["activation_checkpointing"]["partition_activations"], true);
  int hits = 0;
  for (const std::string& w : c.warnings) {
    if (w.find("set but not used") != std::string::npos &&
        w.find("activation_checkpointing.partition_activations = true") != std::string::npos)
      ++hits;
  }
  EXPECT_EQ(hits, 1);
  EXPECT_FALSE(has_warning(resolve(with(R"("activation_checkpointing":{"partition_activations":false})")),
                           "partition_activations"));
}
