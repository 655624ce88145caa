// check.h — the one family of check macros.
//
// Internal failures (a library call failed, an invariant broke): print one line with
//   [zerotrain rank R host H] file:line: CALL failed: library error text
// then take every rank down (MPI_Abort when MPI is up, else exit 1).
//
// Bad user input (config, model file, data file, flag) is not a crash: throw zt::InputError,
// which the CLI turns into one message on stderr and exit code 2.
#pragma once
#include <stdexcept>
#include <string>

namespace zt {

// Identity of this process for error messages. Filled from MPI once it is initialised, and
// before that from the launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID).
struct ProcessInfo {
  int rank = -1;        // -1: not known yet
  int world_size = 1;
  std::string host;     // gethostname(); "localhost" when it fails
  std::string exe;      // this program's path (/proc/self/exe); empty when it cannot be read
};
const ProcessInfo& process_info();
void set_process_rank(int rank, int world_size);
std::string process_tag();  // "rank R host H"

// Bad input from the user. `what` names the input and what was expected.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fatal(const char* file, int line, const std::string& call, const std::string& detail);

// Exit codes every command promises (README "Error handling"); 3 is the comm layer's
// kExitCommFailure (comm/communicator.h).
constexpr int kExitInternal = 1;    // internal error: a clean one-line message
constexpr int kExitBadInput = 2;    // bad input: the message names the input and what was expected
constexpr int kExitStalled = 4;     // train: training went non-finite (--max-skipped-steps in a row, or final loss NaN/Inf)

}  // namespace zt

#define ZT_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) ::zt::fatal(__FILE__, __LINE__, #cond, ::zt::detail_format(__VA_ARGS__));   \
  } while (0)

#define ZT_MPI_CHECK(call)                                                                   \
  do {                                                                                       \
    int zt_mpi_rc_ = (call);                                                                 \
    if (zt_mpi_rc_ != 0) ::zt::fatal(__FILE__, __LINE__, #call, ::zt::mpi_error_text(zt_mpi_rc_)); \
  } while (0)

namespace zt {
std::string mpi_error_text(int rc);
inline std::string detail_format() { return std::string(); }
inline std::string detail_format(const std::string& s) { return s; }
inline std::string detail_format(const char* s) { return s ? s : ""; }
}  // namespace zt
