// emu/tests/test_mbarrier.cpp — the mbarrier model against the PTX ISA's semantics
// ("Parallel Synchronization and Communication Instructions: mbarrier"). Expected phases and
// counts are worked out by hand from the ISA's rules, never read back from the model.
#include <cstdint>
#include <string>

#include "flashsteps_catch.hpp"
#include "fsemu/model/fault.hpp"
#include "fsemu/model/mbarrier.hpp"

using Catch::Matchers::ContainsSubstring;
using fsemu::model::Fault;
using fsemu::model::MBarrier;

TEST_CASE("mbarrier: init sets phase 0, pending = count, tx-count 0") {
  MBarrier b;
  CHECK_FALSE(b.initialized());
  CHECK(b.describe() == "not initialized");
  b.init(128);
  CHECK(b.initialized());
  CHECK(b.phase() == 0);
  CHECK(b.pending() == 128);
  CHECK(b.expected() == 128);
  CHECK(b.tx_count() == 0);
  CHECK(b.describe() == "phase 0 (parity 0), 128 of 128 arrivals pending, tx-count 0");
}

TEST_CASE("mbarrier: init(2) — two arrivals complete phase 0, parity 0 only after") {
  MBarrier b;
  b.init(2);
  CHECK_FALSE(b.test_wait_parity(0));
  const std::uint64_t t1 = b.arrive();
  CHECK(b.pending() == 1);
  CHECK(b.phase() == 0);
  CHECK_FALSE(b.test_wait_parity(0));
  CHECK_FALSE(b.test_wait(t1));
  const std::uint64_t t2 = b.arrive();
  // Both arrivals belong to phase 0: the tokens name the same phase.
  CHECK(t1 == t2);
  CHECK(b.phase() == 1);
  CHECK(b.pending() == 2);  // reinitialized to the expected count
  CHECK(b.test_wait_parity(0));
  CHECK(b.test_wait(t1));
  CHECK(b.test_wait(t2));
  CHECK_FALSE(b.test_wait_parity(1));  // phase 1 is current, incomplete
  CHECK(b.describe() == "phase 1 (parity 1), 2 of 2 arrivals pending, tx-count 0");
}

TEST_CASE("mbarrier: arrive with a count") {
  MBarrier b;
  b.init(5);
  b.arrive(3);
  CHECK(b.pending() == 2);
  b.arrive(2);
  CHECK(b.phase() == 1);
  CHECK(b.pending() == 5);
}

TEST_CASE("mbarrier: parity sequence over ten phases of a count-1 barrier") {
  MBarrier b;
  b.init(1);
  for (std::uint32_t n = 0; n < 10; ++n) {
    INFO("phase " << n);
    CHECK(b.phase() == n);
    CHECK_FALSE(b.test_wait_parity(n % 2));             // current phase: incomplete
    if (n > 0) CHECK(b.test_wait_parity((n + 1) % 2));  // phase n-1: complete
    const std::uint64_t t = b.arrive();
    CHECK(b.test_wait(t));
    CHECK(b.test_wait_parity(n % 2));  // phase n has completed
  }
  CHECK(b.phase() == 10);
}

TEST_CASE("mbarrier: a fresh barrier's parity-1 wait succeeds (the phase before phase 0)") {
  MBarrier b;
  b.init(256);
  CHECK(b.test_wait_parity(1));
  CHECK_FALSE(b.test_wait_parity(0));
}

TEST_CASE("mbarrier: tx-count keeps a phase open until complete_tx") {
  MBarrier b;
  b.init(1);
  b.arrive_expect_tx(4096);
  // The one arrival is in, 4096 bytes are not: still phase 0.
  CHECK(b.pending() == 0);
  CHECK(b.tx_count() == 4096);
  CHECK(b.phase() == 0);
  CHECK_FALSE(b.test_wait_parity(0));
  b.complete_tx(4000);
  CHECK(b.tx_count() == 96);
  CHECK_FALSE(b.test_wait_parity(0));
  b.complete_tx(96);
  CHECK(b.phase() == 1);
  CHECK(b.tx_count() == 0);
  CHECK(b.pending() == 1);
  CHECK(b.test_wait_parity(0));
}

TEST_CASE("mbarrier: expect_tx and complete_tx in either order") {
  SECTION("expect first") {
    MBarrier b;
    b.init(1);
    b.expect_tx(100);
    b.complete_tx(100);
    CHECK(b.phase() == 0);  // the arrival is still pending
    b.arrive();
    CHECK(b.phase() == 1);
  }
  SECTION("complete first: tx-count goes negative, then back to 0") {
    MBarrier b;
    b.init(1);
    b.complete_tx(100);
    CHECK(b.tx_count() == -100);
    b.arrive_expect_tx(60);
    CHECK(b.tx_count() == -40);
    CHECK(b.pending() == 0);
    CHECK(b.phase() == 0);
    b.expect_tx(40);  // tx-count 0 and no arrival pending: the phase completes
    CHECK(b.phase() == 1);
  }
  SECTION("two copies into one phase, landing out of order") {
    MBarrier b;
    b.init(1);
    b.arrive_expect_tx(2 * 16384);
    b.complete_tx(16384);
    CHECK(b.phase() == 0);
    b.complete_tx(16384);
    CHECK(b.phase() == 1);
  }
}

TEST_CASE("mbarrier: a ring of full/empty barriers runs like the Hopper stages' (07c on)") {
  // Producer: wait empty[s] parity (n&1)^1, arrive.expect_tx full[s], data lands (complete_tx).
  // Consumers (2 threads here): wait full[s] parity n&1, arrive empty[s].
  constexpr int kStages = 2;
  MBarrier full[kStages], empty[kStages];
  for (int s = 0; s < kStages; ++s) {
    full[s].init(1);
    empty[s].init(2);
  }
  for (int j = 0; j < 9; ++j) {
    const int s = j % kStages;
    const std::uint32_t n = static_cast<std::uint32_t>(j / kStages);
    INFO("tile " << j);
    REQUIRE(empty[s].test_wait_parity((n & 1u) ^ 1u));
    full[s].arrive_expect_tx(1024);
    CHECK_FALSE(full[s].test_wait_parity(n & 1u));
    full[s].complete_tx(1024);
    REQUIRE(full[s].test_wait_parity(n & 1u));
    REQUIRE(full[s].test_wait_parity(n & 1u));  // the second consumer's wait
    empty[s].arrive();
    CHECK_FALSE(empty[s].test_wait_parity(n & 1u));
    empty[s].arrive();
    CHECK(empty[s].test_wait_parity(n & 1u));
  }
}

TEST_CASE("mbarrier: inval, then init again") {
  MBarrier b;
  b.init(1);
  const std::uint64_t old = b.arrive();
  b.inval();
  CHECK_FALSE(b.initialized());
  CHECK(b.describe() == "invalidated (mbarrier.inval)");
  b.init(3);
  CHECK(b.phase() == 0);
  CHECK(b.pending() == 3);
  // A token of the object before inval is not one of this object's.
  CHECK_THROWS_WITH(b.test_wait(old), ContainsSubstring("not returned by mbarrier.arrive"));
}

TEST_CASE("mbarrier: faults on init outside 1 .. 2^20-1 and on a second init") {
  MBarrier b;
  CHECK_THROWS_WITH(b.init(0), ContainsSubstring("count 0 is outside"));
  CHECK_THROWS_WITH(b.init(1u << 20), ContainsSubstring("count 1048576 is outside"));
  CHECK_FALSE(b.initialized());
  b.init((1u << 20) - 1);  // the maximum is valid
  CHECK_THROWS_WITH(b.init(4), ContainsSubstring("already holds a valid mbarrier"));
}

TEST_CASE("mbarrier: faults on use of an uninitialized or invalidated object") {
  MBarrier b;
  CHECK_THROWS_WITH(b.arrive(), ContainsSubstring("not initialized"));
  CHECK_THROWS_AS(b.arrive_expect_tx(16), Fault);
  CHECK_THROWS_AS(b.expect_tx(16), Fault);
  CHECK_THROWS_AS(b.complete_tx(16), Fault);
  CHECK_THROWS_AS(b.test_wait_parity(0), Fault);
  CHECK_THROWS_AS(b.test_wait(0), Fault);
  CHECK_THROWS_AS(b.inval(), Fault);
  b.init(1);
  b.inval();
  CHECK_THROWS_WITH(b.arrive(), ContainsSubstring("invalidated"));
  CHECK_THROWS_AS(b.inval(), Fault);
}

TEST_CASE("mbarrier: faults on an arrival past the pending count") {
  MBarrier b;
  b.init(4);
  b.arrive(3);
  CHECK_THROWS_WITH(b.arrive(2), ContainsSubstring("only 1 of 4 pending"));
  CHECK(b.pending() == 1);  // unchanged
  CHECK_THROWS_WITH(b.arrive(0), ContainsSubstring("count 0 is outside"));
  // All arrivals in but bytes outstanding: one more arrival has nothing to decrement.
  MBarrier c;
  c.init(1);
  c.arrive_expect_tx(64);
  CHECK_THROWS_WITH(c.arrive(), ContainsSubstring("only 0 of 1 pending"));
  CHECK_THROWS_AS(c.arrive_expect_tx(64), Fault);
  CHECK(c.tx_count() == 64);  // the failed arrive.expect_tx changed nothing
}

TEST_CASE("mbarrier: faults on tx-count out of -(2^20-1) .. 2^20-1") {
  MBarrier b;
  b.init(1);
  b.expect_tx((1u << 20) - 1);
  CHECK_THROWS_WITH(b.expect_tx(1), ContainsSubstring("maximum 2^20-1"));
  CHECK_THROWS_AS(b.arrive_expect_tx(1), Fault);
  CHECK(b.pending() == 1);  // arrive.expect_tx is one operation: nothing happened
  MBarrier c;
  c.init(1);
  c.complete_tx((1u << 20) - 1);
  CHECK(c.tx_count() == -((1 << 20) - 1));
  CHECK_THROWS_WITH(c.complete_tx(1), ContainsSubstring("minimum -(2^20-1)"));
  // The limit is on the count, not on one operand: from -100, 2^20-1 + 100 bytes reach the maximum.
  MBarrier d;
  d.init(1);
  d.complete_tx(100);
  d.expect_tx((1u << 20) - 1 + 100);
  CHECK(d.tx_count() == (1 << 20) - 1);
}

TEST_CASE("mbarrier: faults on waits the ISA leaves undefined") {
  MBarrier b;
  b.init(1);
  CHECK_THROWS_WITH(b.test_wait_parity(2), ContainsSubstring("valid values are 0 and 1"));
  const std::uint64_t t0 = b.arrive();
  CHECK(b.test_wait(t0));
  const std::uint64_t t1 = b.arrive();
  CHECK(b.test_wait(t1));
  // t0 names phase 0; the object is in phase 2: neither current nor immediately preceding.
  CHECK_THROWS_WITH(b.test_wait(t0),
                    ContainsSubstring("names phase 0 but the object is in phase 2"));
  MBarrier other;
  other.init(1);
  CHECK_THROWS_WITH(other.test_wait(t1), ContainsSubstring("not returned by mbarrier.arrive"));
  CHECK_THROWS_AS(b.test_wait(12345), Fault);
}

TEST_CASE("mbarrier: faults on an arrival in phase n+1 before a wait saw phase n complete") {
  MBarrier b;
  b.init(1);
  b.arrive();  // phase 0 completes; nobody waits for it
  CHECK_THROWS_WITH(b.arrive(), ContainsSubstring("before any test_wait / try_wait returned True"));
  CHECK_THROWS_AS(b.arrive_expect_tx(8), Fault);
  CHECK(b.tx_count() == 0);
  CHECK_FALSE(b.test_wait_parity(1));  // a False result does not count
  CHECK_THROWS_AS(b.arrive(), Fault);
  CHECK(b.test_wait_parity(0));
  b.arrive();
  CHECK(b.phase() == 2);
  // expect_tx and complete_tx are not arrive-on operations: no wait needed before them.
  b.expect_tx(16);
  b.complete_tx(16);
}
