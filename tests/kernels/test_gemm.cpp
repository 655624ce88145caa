// GEMM: every transpose combination, odd shapes, alpha/beta, all dtypes, against a double reference.
#include <limits>

#include "kernel_test_util.h"

namespace zt::test {
namespace {

class GemmTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GemmTest, MatchesDoubleReference) {
  const DType dt = GetParam();
  struct Shape { int64_t M, N, K; };
  set_stream_omp_threads(s(), 3);  // the last shape is split into row slices (16-bit: widened slice by slice)
  for (Shape sh : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{17, 13, 9}, Shape{64, 33, 65}, Shape{2, 40, 1},
                   Shape{200, 150, 300}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 0.75f}, std::pair{-2.0f, 1.0f}}) {
          const int64_t M = sh.M, N = sh.N, K = sh.K;
          HostTensor A = random_tensor(rng_, dt, {ta ? K : M, ta ? M : K});
          HostTensor Bm = random_tensor(rng_, dt, {tb ? N : K, tb ? K : N});
          HostTensor C = random_tensor(rng_, dt, {M, N});
          auto a = A.values(), b = Bm.values(), c0 = C.values();
          std::vector<double> want(M * N), mag(M * N);
          for (int64_t i = 0; i < M; ++i) {
            for (int64_t j = 0; j < N; ++j) {
              double acc = 0, am = 0;
              for (int64_t k = 0; k < K; ++k) {
                double x = ta ? a[k * M + i] : a[i * K + k];
                double y = tb ? b[j * K + k] : b[k * N + j];
                acc += x * y;
                am += std::fabs(x * y);
              }
              want[i * N + j] = alpha * acc + beta * c0[i * N + j];
              mag[i * N + j] = std::fabs(alpha) * am + std::fabs(beta * c0[i * N + j]);
            }
          }
          ops::gemm(s(), ta, tb, M, N, K, alpha, A.view(), Bm.view(), beta, C.view());
          sync();
          expect_close_mag(C.values(), want, mag, dtype_eps(dt),
                           std::string("gemm ") + dtype_name(dt) + " M" + std::to_string(M) + " N" +
                               std::to_string(N) + " K" + std::to_string(K) + " ta" + std::to_string(ta) + " tb" +
                               std::to_string(tb));
        }
      }
    }
  }
  set_stream_omp_threads(s(), 1);
}

TEST_P(GemmTest, BetaZeroOverwritesNaN) {
  const DType dt = GetParam();
  const int64_t M = 4, N = 3, K = 5;
  HostTensor A = random_tensor(rng_, dt, {M, K}), Bm = random_tensor(rng_, dt, {K, N});
  HostTensor C(dt, {M, N});
  for (int64_t i = 0; i < M * N; ++i) C.set(i, std::numeric_limits<double>::quiet_NaN());
  ops::gemm(s(), false, false, M, N, K, 1.0f, A.view(), Bm.view(), 0.0f, C.view());
  sync();
  for (double v : C.values()) EXPECT_TRUE(std::isfinite(v));
}

TEST_P(GemmTest, EmptyInnerDimensionScalesC) {
  const DType dt = GetParam();
  HostTensor A(dt, {3, 0}), Bm(dt, {0, 2});
  HostTensor C = random_tensor(rng_, dt, {3, 2});
  auto c0 = C.values();
  ops::gemm(s(), false, false, 3, 2, 0, 1.0f, A.view(), Bm.view(), 0.5f, C.view());
  sync();
  std::vector<double> want(c0.size());
  for (size_t i = 0; i < c0.size(); ++i) want[i] = 0.5 * c0[i];
  expect_close(C.values(), want, 0, 0, "gemm K=0");  // halving is exact
}

TEST_P(GemmTest, RepeatedRunsAreBitwiseEqual) {
  const DType dt = GetParam();
  const int64_t M = 37, N = 29, K = 71;
  HostTensor A = random_tensor(rng_, dt, {M, K}), Bm = random_tensor(rng_, dt, {N, K});
  HostTensor C1 = random_tensor(rng_, dt, {M, N});
  HostTensor C2 = C1;
  ops::gemm(s(), false, true, M, N, K, 1.0f, A.view(), Bm.view(), 1.0f, C1.view());
  ops::gemm(s(), false, true, M, N, K, 1.0f, A.view(), Bm.view(), 1.0f, C2.view());
  sync();
  EXPECT_EQ(C1.raw(), C2.raw());
}

// A GEMM op splits its output over the stream's OpenMP threads (the slices as large as the model's
// projections): every thread count gives the same bits, for every transpose combination, with
// the split along C's rows (M >= N) and along its columns.
TEST_P(GemmTest, ResultDoesNotDependOnThreads) {
  const DType dt = GetParam();
  struct Shape { int64_t M, N, K; };
  for (Shape sh : {Shape{1024, 96, 288}, Shape{96, 768, 1024}, Shape{517, 301, 263}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t M = sh.M, N = sh.N, K = sh.K;
        HostTensor A = random_tensor(rng_, dt, {ta ? K : M, ta ? M : K});
        HostTensor Bm = random_tensor(rng_, dt, {tb ? N : K, tb ? K : N});
        const HostTensor C0 = random_tensor(rng_, dt, {M, N});
        std::vector<HostTensor> out;
        for (int threads : {1, 2, 3}) {
          set_stream_omp_threads(s(), threads);
          out.push_back(C0);
          ops::gemm(s(), ta, tb, M, N, K, 0.5f, A.view(), Bm.view(), 1.0f, out.back().view());
          sync();
        }
        set_stream_omp_threads(s(), 1);
        const std::string what = std::string("gemm ") + dtype_name(dt) + " M" + std::to_string(M) + " N" +
                                 std::to_string(N) + " K" + std::to_string(K) + " ta" + std::to_string(ta) + " tb" +
                                 std::to_string(tb);
        EXPECT_EQ(out[0].raw(), out[1].raw()) << what << ": 2 threads";
        EXPECT_EQ(out[0].raw(), out[2].raw()) << what << ": 3 threads";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GemmTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
