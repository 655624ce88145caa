// stage3_gather.cpp — stage-3 parameter buckets: gathered before each unit's forward and
// backward, prefetched within stage3_prefetch_bucket_size and stage3_max_live_parameters,
// kept when reused within stage3_max_reuse_distance, persistent buckets always gathered.
#include <algorithm>

#include "engine_impl.h"

namespace zt {

Stage3Gatherer::Stage3Gatherer(ZeroEngine::Impl& e) : e_(e) {
  const int U = e.U;
  need_.resize(static_cast<size_t>(2 * U));
  for (int pos = 0; pos < 2 * U; ++pos) {
    std::vector<int>& n = need_[static_cast<size_t>(pos)];
    for (int p : e.unit_params[static_cast<size_t>(unit_of(pos))]) n.push_back(e.plan.params[static_cast<size_t>(p)].bucket);
    std::sort(n.begin(), n.end());
    n.erase(std::unique(n.begin(), n.end()), n.end());
  }
  slots_.resize(e.plan.buckets.size());
  for (auto& s : slots_) s.done = e.comm.create_event();
}

Stage3Gatherer::~Stage3Gatherer() { collect_pending(true); }

int Stage3Gatherer::unit_of(int pos) const { return pos < e_.U ? pos : 2 * e_.U - 1 - pos; }

int64_t Stage3Gatherer::persistent_bytes() const {
  int64_t n = 0;
  for (const PlanBucket& b : e_.plan.buckets)
    if (b.persistent) n += b.padded * static_cast<int64_t>(e_.cs);
  return n;
}

// Frees released buffers whose last reader finished. wait_all: block until all of them did,
// so gathered memory never exceeds what the schedule holds live.
void Stage3Gatherer::collect_pending(bool wait_all) {
  auto it = pending_.begin();
  while (it != pending_.end()) {
    if (wait_all) it->after->synchronize();
    if (wait_all || it->after->query()) it = pending_.erase(it);
    else ++it;
  }
}

void Stage3Gatherer::issue(int b, bool prefetch) {
  const PlanBucket& bk = e_.plan.buckets[static_cast<size_t>(b)];
  Slot& s = slots_[static_cast<size_t>(b)];
  if (!s.buf) {
    collect_pending(true);
    s.buf = e_.dev.alloc(static_cast<size_t>(bk.padded) * e_.cs, MemCategory::Gather);
  }
  const char* shard = static_cast<const char*>(e_.params.data()) + bk.shard_begin * static_cast<int64_t>(e_.cs);
  e_.comm.all_gather(shard, s.buf.data(), static_cast<size_t>(bk.slice), e_.opt.compute_dtype,
                     "gather b" + std::to_string(b), s.done.get());
  if (s.state == State::Released && !bk.persistent) live_elems_ += bk.padded;
  s.state = State::Gathered;
  s.waited = false;
  ++stats_.gathers;
  if (prefetch) ++stats_.prefetched;
  if (!e_.opt.overlap_comm) {
    e_.compute.wait(*s.done);
    s.waited = true;
  }
}

void Stage3Gatherer::release(int b) {
  Slot& s = slots_[static_cast<size_t>(b)];
  if (s.state != State::Gathered || e_.plan.buckets[static_cast<size_t>(b)].persistent) return;
  Pending p{std::move(s.buf), e_.dev.create_event()};
  p.after->record(e_.compute);  // every use of the buffer so far is on the compute stream
  pending_.push_back(std::move(p));
  s.state = State::Released;
  live_elems_ -= e_.plan.buckets[static_cast<size_t>(b)].padded;
}

void Stage3Gatherer::begin_position(int pos) {
  collect_pending(false);
  const std::vector<int>& need = need_[static_cast<size_t>(pos)];
  for (int b : need)
    if (slots_[static_cast<size_t>(b)].state == State::Released) issue(b, false);
  for (int b : need) {
    Slot& s = slots_[static_cast<size_t>(b)];
    if (!s.waited) {
      e_.compute.wait(*s.done);
      s.waited = true;
    }
  }
  int64_t current = 0;
  for (int b : need)
    if (!e_.plan.buckets[static_cast<size_t>(b)].persistent) current += e_.plan.buckets[static_cast<size_t>(b)].padded;
  // Prefetch upcoming buckets in schedule order until a budget is reached.
  int64_t taken = 0;
  bool stop = false;
  for (int j = pos + 1; j < 2 * e_.U && !stop; ++j) {
    for (int b : need_[static_cast<size_t>(j)]) {
      const PlanBucket& bk = e_.plan.buckets[static_cast<size_t>(b)];
      if (bk.persistent || slots_[static_cast<size_t>(b)].state == State::Gathered) continue;
      if (taken + bk.padded > e_.opt.prefetch_bucket_size ||
          live_elems_ - current + bk.padded > e_.opt.max_live_parameters) {
        stop = true;
        break;
      }
      issue(b, true);
      taken += bk.padded;
    }
  }
  stats_.peak_live_elems = std::max(stats_.peak_live_elems, live_elems_);
  stats_.peak_live_beyond_current = std::max(stats_.peak_live_beyond_current, live_elems_ - current);
  for (int p : e_.unit_params[static_cast<size_t>(unit_of(pos))]) {
    const PlanParam& pp = e_.plan.params[static_cast<size_t>(p)];
    const PlanBucket& bk = e_.plan.buckets[static_cast<size_t>(pp.bucket)];
    e_.model.bind_param(p, static_cast<char*>(slots_[static_cast<size_t>(pp.bucket)].buf.data()) +
                               (pp.flat_begin - bk.flat_begin) * static_cast<int64_t>(e_.cs));
  }
}

void Stage3Gatherer::end_position(int pos) {
  for (int b : need_[static_cast<size_t>(pos)]) {
    if (e_.plan.buckets[static_cast<size_t>(b)].persistent) continue;
    // Distance to the next use: elements of the buckets needed in between.
    int64_t distance = 0;
    bool reused = false;
    for (int j = pos + 1; j < 2 * e_.U; ++j) {
      const std::vector<int>& n = need_[static_cast<size_t>(j)];
      if (std::find(n.begin(), n.end(), b) != n.end()) {
        reused = true;
        break;
      }
      for (int x : n) distance += e_.plan.buckets[static_cast<size_t>(x)].padded;
    }
    if (!reused || distance >= e_.opt.max_reuse_distance) release(b);
  }
}

void Stage3Gatherer::refresh_after_update() {
  for (size_t b = 0; b < slots_.size(); ++b) {
    if (e_.plan.buckets[b].persistent) issue(static_cast<int>(b), false);  // same buffer, new values
    else release(static_cast<int>(b));                                    // stale
  }
}

}  // namespace zt
