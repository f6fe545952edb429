// emu/src/model/mbarrier.cpp — the mbarrier model (mbarrier.hpp). Section names in the comments
// are those of the PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier".
#include "fsemu/model/mbarrier.hpp"

#include <atomic>

#include "fsemu/model/fault.hpp"

namespace fsemu::model {

namespace {

// A state token: tag (16 bits) | serial of the init (16 bits) | phase (32 bits). "Contents of the
// state operand are implementation specific" (mbarrier.arrive); this one lets test_wait tell a
// token of this object's current or preceding phase from anything else.
constexpr std::uint64_t kTokenTag = 0xB47Eull;

std::uint32_t next_serial() {
  static std::atomic<std::uint32_t> counter{0};
  return (counter.fetch_add(1, std::memory_order_relaxed) + 1) & 0xFFFFu;
}

std::string n(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

void MBarrier::require_valid(const char* what) const {
  if (state_ == State::valid) return;
  throw Fault(std::string(what) + ": the mbarrier object is " +
              (state_ == State::invalidated ? "invalidated (mbarrier.inval)" : "not initialized") +
              "; every mbarrier operation except mbarrier.init on a location without a valid "
              "mbarrier object is undefined (PTX ISA, mbarrier.inval)");
}

void MBarrier::init(std::uint32_t count) {
  if (state_ == State::valid)
    throw Fault("mbarrier.init: the location already holds a valid mbarrier object (phase " +
                n(phase_) +
                "); initializing it again is undefined — invalidate it with mbarrier.inval first "
                "(PTX ISA, mbarrier.init)");
  if (count < 1 || count > kMaxCount)
    throw Fault("mbarrier.init: count " + n(count) +
                " is outside the valid range 1 .. 2^20-1 of the expected arrival count (PTX ISA, "
                "Contents of the mbarrier object)");
  state_ = State::valid;
  serial_ = next_serial();
  phase_ = 0;
  expected_ = count;
  pending_ = count;
  tx_ = 0;
  previous_phase_observed_ = false;
}

std::uint64_t MBarrier::token_for_current_phase() const {
  return (kTokenTag << 48) | (std::uint64_t{serial_} << 32) | phase_;
}

// "Phase Completion of the mbarrier object": the current phase completes when the pending
// arrivals and the tx-count have both reached zero; then, atomically, the object moves to the next
// phase and the pending count is reinitialized to the expected count.
void MBarrier::complete_phase_if_done() {
  if (pending_ != 0 || tx_ != 0) return;
  ++phase_;
  pending_ = expected_;
  previous_phase_observed_ = false;
}

void MBarrier::check_arrive(std::uint32_t count, const char* what) const {
  if (count < 1 || count > kMaxCount)
    throw Fault(std::string(what) + ": count " + n(count) +
                " is outside 1 .. 2^20-1 (PTX ISA, mbarrier.arrive: the value of count must be in "
                "the range of Contents of the mbarrier object)");
  if (count > pending_)
    throw Fault(std::string(what) + ": " + n(count) + " arrival(s) in phase " + n(phase_) +
                ", which has only " + n(pending_) + " of " + n(expected_) +
                " pending: the pending arrival count may not go below 0 (PTX ISA, Contents of the "
                "mbarrier object)");
  if (phase_ > 0 && !previous_phase_observed_)
    throw Fault(std::string(what) + ": arrive-on in phase " + n(phase_) +
                " before any test_wait / try_wait returned True for phase " + n(phase_ - 1) +
                " (PTX ISA, Phase of the mbarrier object: at least one such wait must precede an "
                "arrive-on in the subsequent phase)");
}

std::uint64_t MBarrier::arrive(std::uint32_t count) {
  require_valid("mbarrier.arrive");
  check_arrive(count, "mbarrier.arrive");
  // "Arrive-on operation on mbarrier object": the pending arrival count is decremented by count,
  // then the mbarrier potentially completes the current phase. The state returned captures "the
  // phase of the mbarrier object prior to the arrive-on operation".
  const std::uint64_t token = token_for_current_phase();
  pending_ -= count;
  complete_phase_if_done();
  return token;
}

std::uint64_t MBarrier::arrive_expect_tx(std::uint32_t bytes) {
  require_valid("mbarrier.arrive.expect_tx");
  if (tx_ + std::int64_t{bytes} > std::int64_t{kMaxCount})
    throw Fault("mbarrier.arrive.expect_tx: expect-tx of " + n(bytes) + " bytes on tx-count " +
                n(tx_) +
                " exceeds the tx-count's maximum 2^20-1 (PTX ISA, Contents of the "
                "mbarrier object)");
  check_arrive(1, "mbarrier.arrive.expect_tx");
  // "The optional qualifier .expect_tx specifies that an expect-tx operation is performed prior to
  // the arrive-on operation ... the count argument of the arrive-on operation is assumed to be 1."
  tx_ += bytes;
  const std::uint64_t token = token_for_current_phase();
  pending_ -= 1;
  complete_phase_if_done();
  return token;
}

void MBarrier::expect_tx(std::uint32_t bytes) {
  require_valid("mbarrier.expect_tx");
  if (tx_ + std::int64_t{bytes} > std::int64_t{kMaxCount})
    throw Fault("mbarrier.expect_tx: expect-tx of " + n(bytes) + " bytes on tx-count " + n(tx_) +
                " exceeds the tx-count's maximum 2^20-1 (PTX ISA, Contents of the mbarrier "
                "object)");
  // "Tracking asynchronous operations by the mbarrier object", expect-tx operation: increases the
  // tx-count. Only arrive-on and complete-tx are said to complete a phase; a phase whose pending
  // count is 0 cannot be current with tx-count 0, except after a complete-tx overshoot, which an
  // expect-tx may balance: completion is checked after every change.
  tx_ += bytes;
  complete_phase_if_done();
}

void MBarrier::complete_tx(std::uint32_t bytes) {
  require_valid("complete-tx");
  if (tx_ - std::int64_t{bytes} < -std::int64_t{kMaxCount})
    throw Fault("complete-tx: " + n(bytes) + " bytes on tx-count " + n(tx_) +
                " take the tx-count below its minimum -(2^20-1) (PTX ISA, Contents of the "
                "mbarrier object)");
  // complete-tx operation: "tx-count is decremented by completeCount", then "mbarrier potentially
  // completing the current phase".
  tx_ -= bytes;
  complete_phase_if_done();
}

bool MBarrier::test_wait(std::uint64_t token) const {
  require_valid("mbarrier.test_wait");
  const std::uint64_t tag = token >> 48;
  const auto serial = static_cast<std::uint32_t>((token >> 32) & 0xFFFFu);
  const auto token_phase = static_cast<std::uint32_t>(token);
  if (tag != kTokenTag || serial != serial_)
    throw Fault("mbarrier.test_wait: state 0x" + SharedWindow::hex(token) +
                " was not returned by mbarrier.arrive on this mbarrier object (PTX ISA, "
                "mbarrier.test_wait / mbarrier.try_wait)");
  if (token_phase == phase_) return false;  // the current incomplete phase
  if (token_phase + 1 == phase_) {          // the immediately preceding phase
    previous_phase_observed_ = true;
    return true;
  }
  throw Fault("mbarrier.test_wait: the state names phase " + n(token_phase) +
              " but the object is in phase " + n(phase_) +
              "; a wait is valid only for the current phase or the immediately preceding one "
              "(PTX ISA, mbarrier.test_wait / mbarrier.try_wait)");
}

bool MBarrier::test_wait_parity(std::uint32_t parity) const {
  require_valid("mbarrier.test_wait.parity");
  if (parity > 1)
    throw Fault("mbarrier.test_wait.parity: phaseParity " + n(parity) +
                " — the valid values are 0 and 1 (PTX ISA, mbarrier.test_wait / "
                "mbarrier.try_wait)");
  if (parity == (phase_ & 1u)) return false;  // the current phase: incomplete
  // The immediately preceding phase (for phase 0: the phase before it, complete by convention).
  if (phase_ > 0) previous_phase_observed_ = true;
  return true;
}

void MBarrier::inval() {
  require_valid("mbarrier.inval");
  state_ = State::invalidated;
}

std::string MBarrier::describe() const {
  if (state_ == State::never_initialized) return "not initialized";
  if (state_ == State::invalidated) return "invalidated (mbarrier.inval)";
  return "phase " + n(phase_) + " (parity " + n(phase_ & 1u) + "), " + n(pending_) + " of " +
         n(expected_) + " arrivals pending, tx-count " + n(tx_);
}

}  // namespace fsemu::model
