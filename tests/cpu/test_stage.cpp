// The shared refusal helpers every stage's supports() and launch() use: each names its limit.
#include <catch2/catch.hpp>

#include "flashsteps/stage.hpp"

using namespace flashsteps;

TEST_CASE("shared memory beyond the opt-in limit is refused with both numbers and the device") {
  DeviceInfo dev;
  dev.name = "Test GPU";
  dev.smem_optin_per_block = 101376;
  CHECK(fits_shared_memory(101376, "D 128", dev).ok);
  const Support s = fits_shared_memory(101377, "D 128, a ring of 2 K/V stages", dev);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::Contains("101377") && Catch::Contains("101376") &&
                           Catch::Contains("Test GPU") && Catch::Contains("a ring of 2 K/V"));
}

TEST_CASE("a grid beyond the limit is refused with the count and how it was made") {
  CHECK(fits_grid(100, 100, "B*H").ok);
  const Support s = fits_grid(101, 100, "B*H*ceil(Sq/64)");
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, Catch::StartsWith("B*H*ceil(Sq/64) = 101") && Catch::Contains("100"));
}

TEST_CASE("misaligned tensors are refused before launch, naming the stage") {
  alignas(64) static unsigned char buf[256];
  AttentionArgs a{buf, buf + 32, buf + 64, buf + 128, nullptr, nullptr};
  CHECK_NOTHROW(require_aligned("99_test", a, 16));
  a.v = buf + 72;  // 8-byte aligned only
  CHECK_THROWS_WITH(require_aligned("99_test", a, 16),
                    Catch::Contains("99_test") && Catch::Contains("16-byte aligned"));
}
