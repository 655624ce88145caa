// TensorBoard event encoding (io/tfevents.h) and the monitors' file rules (app/monitors.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "zerotrain/app/monitors.h"
#include "zerotrain/core/check.h"
#include "zerotrain/io/tfevents.h"

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// RFC 3720 (iSCSI) B.4 and the common check value.
TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(zt::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(zt::crc32c("", 0), 0u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(zt::crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(zt::crc32c(ones.data(), 32), 0x62A8AB43u);
  std::string inc, dec;
  for (int i = 0; i < 32; ++i) {
    inc.push_back(static_cast<char>(i));
    dec.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(zt::crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(zt::crc32c(dec.data(), 32), 0x113FDB5Cu);
  // Continuing a CRC over a split buffer gives the whole buffer's CRC.
  EXPECT_EQ(zt::crc32c("6789", 4, zt::crc32c("12345", 5)), 0xE3069283u);
}

TEST(Crc32c, Masking) {
  const uint32_t c = zt::crc32c("123456789", 9);
  EXPECT_EQ(zt::masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TfEvents, RecordFraming) {
  const std::string data = "hello";
  const std::string r = zt::tfrecord(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(r.substr(0, 8), bytes({5, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(le32(r, 8), zt::masked_crc32c(r.data(), 8));
  EXPECT_EQ(r.substr(12, 5), data);
  EXPECT_EQ(le32(r, 17), zt::masked_crc32c(data.data(), data.size()));
}

// Bytes worked out by hand from the protobuf wire format.
TEST(TfEvents, FileVersionEvent) {
  const std::string e = zt::file_version_event(1.5);  // 1.5 = 0x3FF8000000000000
  EXPECT_EQ(e, bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13}) + "brain.Event:2");
}

TEST(TfEvents, ScalarEvent) {
  // step 300 = varint AC 02; 2.0f = 0x40000000.
  const std::string e = zt::scalar_event(0.0, 300, "a/b", 2.0f);
  const std::string value = bytes({0x0A, 3}) + "a/b" + bytes({0x15, 0, 0, 0, 0x40});
  const std::string summary = bytes({0x0A, static_cast<int>(value.size())}) + value;
  EXPECT_EQ(e, bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0xAC, 0x02, 0x2A, static_cast<int>(summary.size())}) + summary);
  // Step 0 is a proto3 default: not written.
  EXPECT_EQ(zt::scalar_event(0.0, 0, "a/b", 2.0f).substr(9, 1), bytes({0x2A}));
}

TEST(Monitors, PythonFloatRepr) {
  EXPECT_EQ(zt::python_float_repr(65536.0), "65536.0");
  EXPECT_EQ(zt::python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(zt::python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(zt::python_float_repr(3e-4), "0.0003");
  EXPECT_EQ(zt::python_float_repr(2.5e-5), "2.5e-05");
  EXPECT_EQ(zt::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(zt::python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(zt::python_float_repr(-0.1), "-0.1");
  EXPECT_EQ(zt::python_float_repr(0.0), "0.0");
  EXPECT_EQ(zt::python_float_repr(10.703125), "10.703125");
  EXPECT_EQ(zt::python_float_repr(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(zt::python_float_repr(std::nan("")), "nan");
  EXPECT_EQ(zt::python_float_repr(-1.0 / 0.0), "-inf");
}

TEST(Monitors, DirectoryFollowsOsPathJoin) {
  zt::MonitorConfig m;
  EXPECT_EQ(zt::monitor_dir(m), "DeepSpeedJobName");
  m.output_path = "out";
  EXPECT_EQ(zt::monitor_dir(m), "out/DeepSpeedJobName");
  m.output_path = "out/";
  EXPECT_EQ(zt::monitor_dir(m), "out/DeepSpeedJobName");
  m.job_name = "";
  EXPECT_EQ(zt::monitor_dir(m), "out/");
  m.job_name = "/abs";
  EXPECT_EQ(zt::monitor_dir(m), "/abs");
  m.output_path = m.job_name = "";
  EXPECT_EQ(zt::monitor_dir(m), ".");
}

class MonitorFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/zt_monitors_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  zt::MonitorConfig csv(const std::string& job) {
    zt::MonitorConfig m;
    m.enabled = true;
    m.output_path = dir_;
    m.job_name = job;
    return m;
  }
  std::string dir_;
};

TEST_F(MonitorFiles, CsvRowsAsDeepSpeedWritesThem) {
  {
    zt::Monitors mon(zt::MonitorConfig{}, csv("job"), /*fp16=*/true, /*breakdown=*/false);
    zt::StepStats st;
    st.loss = 2.5;
    st.lr = 1e-05;
    st.loss_scale = 65536;
    mon.write_step(st, 16);
  }
  std::ifstream f(dir_ + "/job/Train_Samples_train_loss.csv", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "step,train_loss\r\n16,2.5\r\n");
  std::ifstream g(dir_ + "/job/Train_Samples_loss_scale.csv", std::ios::binary);
  std::stringstream sg;
  sg << g.rdbuf();
  EXPECT_EQ(sg.str(), "step,loss_scale\r\n16,65536.0\r\n");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/job/Train_Samples_lr.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/job/Train_Samples_elapsed_time_ms_step.csv"));
}

TEST_F(MonitorFiles, RefusesSymlinksAndFilesWhereDirectoriesMustBe) {
  std::filesystem::create_directories(dir_ + "/job");
  ASSERT_EQ(::symlink("/tmp/zt_planted_target", (dir_ + "/job/Train_Samples_lr.csv").c_str()), 0);
  try {
    zt::Monitors mon(zt::MonitorConfig{}, csv("job"), false, false);
    FAIL() << "a planted symlink was followed";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("symlink"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/zt_planted_target"));
  std::ofstream(dir_ + "/afile") << "x";
  try {
    zt::Monitors mon(csv("afile"), zt::MonitorConfig{}, false, false);
    FAIL() << "a file where the directory must be was accepted";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensorboard"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("afile"), std::string::npos) << e.what();
  }
}

TEST_F(MonitorFiles, TensorboardFileStartsWithTheVersionRecord) {
  {
    zt::Monitors mon(csv("tb"), zt::MonitorConfig{}, false, true);
    EXPECT_NE(mon.describe().find("elapsed_time_ms_backward_allreduce"), std::string::npos);
  }
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/tb")) {
    ++n;
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string ev = ss.str().substr(12, ss.str().size() - 16);
    EXPECT_EQ(ss.str(), zt::tfrecord(ev));
    EXPECT_NE(ev.find("brain.Event:2"), std::string::npos);
  }
  EXPECT_EQ(n, 1);
}

}  // namespace
