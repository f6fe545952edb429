// emu/include/fsemu/model/mbarrier.hpp — a pure model of one PTX mbarrier object (PTX ISA,
// "Parallel Synchronization and Communication Instructions: mbarrier"): its phase, expected and
// pending arrival counts and tx-count, and the operations the stages use on it. No threads and no
// waiting here: the emulator's scheduler owns one MBarrier per shared-memory mbarrier and asks
// test_wait / test_wait_parity whether a waiting thread may go on.
//
// What the ISA leaves undefined is a Fault (fault.hpp), with a sentence naming the rule:
//   * any operation but init on an object that is not initialized (mbarrier.inval: "Performing
//     any mbarrier operation except mbarrier.init on a memory location that does not contain a
//     valid mbarrier object, results in undefined behaviour"), and init on a valid object
//     (mbarrier.init: "invalidate the mbarrier object using mbarrier.inval first");
//   * a count outside "Contents of the mbarrier object": expected arrival count 1 .. 2^20-1,
//     pending arrival count 0 .. 2^20-1 (so an arrive may not take it below 0), tx-count
//     -(2^20-1) .. 2^20-1 (so tx-count may go negative: a complete-tx may land before its
//     expect-tx);
//   * a wait on a phase other than the current one or the immediately preceding one
//     ("mbarrier.test_wait / mbarrier.try_wait": "valid only for the current incomplete phase ...
//     [and] the immediately preceding phase"), and a phaseParity other than 0 or 1;
//   * an arrive-on in phase n >= 1 before any test_wait / try_wait returned True for phase n-1
//     ("Phase of the mbarrier object": "For each phase of the mbarrier object, at least one
//     test_wait or try_wait operation must be performed which returns True for waitComplete
//     before an arrive-on operation in the subsequent phase"). test_wait and test_wait_parity are
//     therefore the model of a wait that *returns*: call them for a thread's actual wait, not for
//     diagnostics (use phase() / describe() for those).
//
// One case the ISA does not spell out: test_wait_parity(1) on a barrier still in phase 0 returns
// true. The parity is "of either the current phase or the immediately preceding phase"; 1 is not
// the current phase's, so it names the phase before phase 0, which counts as complete. Producers
// of a ring rely on it to start without a handshake (CUTLASS's make_producer_start_state starts at
// phase 1, "as the buffers are initially empty"). Such a wait does not satisfy the rule above for
// any phase.
#pragma once

#include <cstdint>
#include <string>

namespace fsemu::model {

class MBarrier {
 public:
  /// Largest expected / pending arrival count and largest |tx-count| ("Contents of the mbarrier
  /// object": 2^20 - 1).
  static constexpr std::uint32_t kMaxCount = (1u << 20) - 1;

  /// mbarrier.init: phase 0, expected = pending = count, tx-count 0. Fault if count is not in
  /// 1 .. 2^20-1 or the object is already initialized.
  void init(std::uint32_t count);

  /// mbarrier.arrive (count 1 .. 2^20-1): pending -= count; completes the phase when pending and
  /// tx-count are both 0. Returns the state token of the phase the arrival belongs to (the phase
  /// "prior to the arrive-on operation"). Fault on an uninitialized object or count > pending.
  std::uint64_t arrive(std::uint32_t count = 1);

  /// mbarrier.arrive.expect_tx: expect-tx(bytes), then arrive-on with count 1, as one operation
  /// (checked in full before either changes the state).
  std::uint64_t arrive_expect_tx(std::uint32_t bytes);

  /// expect-tx operation (mbarrier.expect_tx): tx-count += bytes; Fault past 2^20-1.
  void expect_tx(std::uint32_t bytes);

  /// complete-tx operation (what cp.async.bulk{.tensor} performs when its data has landed, and
  /// mbarrier.complete_tx): tx-count -= bytes; may go negative down to -(2^20-1), Fault past it.
  /// Completes the phase when pending and tx-count are both 0.
  void complete_tx(std::uint32_t bytes);

  /// mbarrier.test_wait / try_wait with a state token: false while the token's phase is the
  /// current one, true once it is the immediately preceding one; Fault for any other token.
  bool test_wait(std::uint64_t token) const;

  /// mbarrier.test_wait.parity / try_wait.parity: false if `parity` is the current phase's
  /// parity (that phase is incomplete), true otherwise (it names the immediately preceding phase,
  /// which is complete). Fault unless parity is 0 or 1.
  bool test_wait_parity(std::uint32_t parity) const;

  bool initialized() const { return state_ == State::valid; }
  /// Phases completed since init (the current phase's number).
  std::uint32_t phase() const { return phase_; }
  std::uint32_t pending() const { return pending_; }
  std::uint32_t expected() const { return expected_; }
  std::int64_t tx_count() const { return tx_; }

  /// mbarrier.inval: the object is no longer valid (a later init makes a new one). Fault if it
  /// is not initialized.
  void inval();

  /// One line for deadlock reports, e.g. "phase 3 (parity 1), 2 of 128 arrivals pending,
  /// tx-count 4096".
  std::string describe() const;

 private:
  enum class State : std::uint8_t { never_initialized, valid, invalidated };

  void require_valid(const char* what) const;
  void check_arrive(std::uint32_t count, const char* what) const;
  void complete_phase_if_done();
  std::uint64_t token_for_current_phase() const;

  State state_ = State::never_initialized;
  std::uint32_t serial_ = 0;  // identifies this init in tokens (a token of another object faults)
  std::uint32_t phase_ = 0;
  std::uint32_t expected_ = 0;
  std::uint32_t pending_ = 0;
  std::int64_t tx_ = 0;
  // Whether a wait has returned True for phase_ - 1 (the rule of "Phase of the mbarrier object").
  mutable bool previous_phase_observed_ = false;
};

}  // namespace fsemu::model
