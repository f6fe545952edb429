// emu/src/state.cpp — the device shim's state per thread and per block (state.hpp): created when a
// thread or its block first needs it, dropped when the block ends, which it learns as an observer
// of the scheduler's events (fsemu/events.hpp).
#include "state.hpp"

#include <map>
#include <memory>
#include <vector>

#include "fsemu/events.hpp"
#include "sanitize.hpp"

namespace fsemu {
namespace {

// The running block's state, subscribed to the scheduler's events from its first creation on.
class BlockState final : public events::Observer {
 public:
  std::vector<std::unique_ptr<ThreadExtra>> threads;  // by linear thread index; null until used
  std::unique_ptr<BlockExtra> block;

  void block_end() override {
    threads.clear();
    block.reset();
  }
  // A parked block's state waits aside until it resumes (fsemu/events.hpp).
  void block_park(const events::Block& b) override {
    Parked& p = parked[b.key()];
    p.threads = std::move(threads);
    p.block = std::move(block);
    threads.clear();
  }
  void block_resume(const events::Block& b) override {
    const auto it = parked.find(b.key());
    if (it == parked.end()) return;
    threads = std::move(it->second.threads);
    block = std::move(it->second.block);
    parked.erase(it);
  }

 private:
  struct Parked {
    std::vector<std::unique_ptr<ThreadExtra>> threads;
    std::unique_ptr<BlockExtra> block;
  };
  std::map<std::uint64_t, Parked> parked;
};
BlockState g_state;

// The state, about to be created in: from now on it is dropped at every block's end.
BlockState& creating() {
  static const bool subscribed = (events::subscribe(&g_state), true);
  (void)subscribed;
  return g_state;
}

}  // namespace

ThreadExtra& thread_extra() {
  const ThreadInfo& t = self();
  BlockState& s = creating();
  if (s.threads.empty())
    s.threads.resize(std::size_t{t.block_dim.x} * t.block_dim.y * t.block_dim.z);
  std::unique_ptr<ThreadExtra>& mine = s.threads[static_cast<std::size_t>(t.linear)];
  if (!mine) {
    const sanitize::IgnoreAccesses bookkeeping;
    mine = std::make_unique<ThreadExtra>();
  }
  return *mine;
}

BlockExtra& block_extra() {
  BlockState& s = creating();
  if (!s.block) {
    const sanitize::IgnoreAccesses bookkeeping;
    s.block = std::make_unique<BlockExtra>();
  }
  return *s.block;
}

ThreadExtra* find_thread_extra() {
  if (!in_thread()) return nullptr;
  const std::vector<std::unique_ptr<ThreadExtra>>& threads = g_state.threads;
  const auto i = static_cast<std::size_t>(self().linear);
  return i < threads.size() ? threads[i].get() : nullptr;
}

ThreadExtra* find_thread_extra(int linear) {
  const std::vector<std::unique_ptr<ThreadExtra>>& threads = g_state.threads;
  const auto i = static_cast<std::size_t>(linear);
  return linear >= 0 && i < threads.size() ? threads[i].get() : nullptr;
}

BlockExtra* find_block_extra() {
  return g_state.block.get();
}

}  // namespace fsemu
