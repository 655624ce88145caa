// checkpoint_comm.cpp — the two small agreements the checkpoint protocol needs: every rank
// learns whether any rank failed (and rank 0 which error to report), and rank 0's tag.
#include <cstring>

#include "ckpt_internal.h"
#include "zerotrain/core/check.h"

namespace zt {

namespace {
// One collective over a small device buffer, host values in and out.
void device_collective(Communicator& comm, Device& dev, void* host, size_t bytes,
                       const std::function<void(void* device_buf)>& collective) {
  std::unique_ptr<Stream> s = dev.create_stream("checkpoint");
  DeviceBuffer buf = dev.alloc(bytes, MemCategory::Workspace, true);
  dev.memcpy_async(buf.data(), host, bytes, CopyKind::HostToDevice, *s);
  s->synchronize();
  collective(buf.data());
  comm.synchronize();
  dev.memcpy_async(host, buf.data(), bytes, CopyKind::DeviceToHost, *s);
  s->synchronize();
}
}  // namespace

void agree_or_throw(Communicator& comm, Device& dev, const std::string& my_error) {
  const std::vector<std::string> all = comm.gather_strings(my_error, 0, "checkpoint errors");
  float failed = my_error.empty() ? 0.0f : 1.0f;
  device_collective(comm, dev, &failed, sizeof(failed), [&](void* d) {
    comm.all_reduce(d, d, 1, DType::F32, ReduceOp::Max, "checkpoint verdict");
  });
  if (failed == 0.0f) return;
  if (comm.rank() == 0) {
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) throw InputError(all[r]);
  }
  throw InputError(my_error.empty() ? "another rank reported a checkpoint error (rank 0 prints it)" : my_error);
}

namespace ckpt {

std::string broadcast_string(Communicator& comm, Device& dev, const std::string& s, int root) {
  float len = comm.rank() == root ? static_cast<float>(s.size()) : 0.0f;
  ZT_CHECK(s.size() < (size_t(1) << 24), "broadcast_string: too long");
  device_collective(comm, dev, &len, sizeof(len), [&](void* d) {
    comm.broadcast(d, 1, DType::F32, root, "checkpoint string length");
  });
  const size_t n = static_cast<size_t>(len);
  if (n == 0) return "";
  const size_t words = (n + 3) / 4;
  std::vector<char> bytes(words * 4, 0);
  if (comm.rank() == root) std::memcpy(bytes.data(), s.data(), n);
  device_collective(comm, dev, bytes.data(), bytes.size(), [&](void* d) {
    comm.broadcast(d, words, DType::F32, root, "checkpoint string");
  });
  return std::string(bytes.data(), n);
}

// checkpoint.tag_validation across ranks (DeepSpeed's _checkpoint_tag_validation): returns the
// tag every rank uses (rank 0's); a mismatch warns (WARN), is ignored (IGNORE) or fails (FAIL).
std::string agree_on_tag(Communicator& comm, Device& dev, const std::string& tag, const std::string& mode,
                         std::vector<std::string>* warnings) {
  const std::vector<std::string> tags = comm.gather_strings(tag, 0, "checkpoint tag");
  std::string err, differs;
  if (comm.rank() == 0) {
    for (size_t r = 1; r < tags.size(); ++r)
      if (tags[r] != tags[0]) differs += " rank " + std::to_string(r) + " '" + tags[r] + "'";
    if (!differs.empty()) {
      const std::string msg = "checkpoint tag differs across ranks: rank 0 '" + tags[0] + "'," + differs;
      if (mode == "FAIL") err = msg + " (checkpoint.tag_validation \"Fail\")";
      else if (mode != "IGNORE" && warnings) warnings->push_back(msg + "; every rank uses rank 0's");
    }
  }
  agree_or_throw(comm, dev, err);
  return ckpt::broadcast_string(comm, dev, tag, 0);
}

}  // namespace ckpt
}  // namespace zt
