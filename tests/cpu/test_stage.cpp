// The shared refusal helpers every stage's supports() and launch() use: each names its limit.
#include "flashsteps_catch.hpp"

#include "flashsteps/stage.hpp"

using namespace flashsteps;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

TEST_CASE("shared memory beyond the opt-in limit is refused with both numbers and the device") {
  DeviceInfo dev;
  dev.name = "Test GPU";
  dev.smem_optin_per_block = 101376;
  CHECK(fits_shared_memory(101376, "D 128", dev).ok);
  const Support s = fits_shared_memory(101377, "D 128, a ring of 2 K/V stages", dev);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, ContainsSubstring("101377") && ContainsSubstring("101376") &&
                           ContainsSubstring("Test GPU") && ContainsSubstring("a ring of 2 K/V"));
}

TEST_CASE("a grid beyond the limit is refused with the count and how it was made") {
  CHECK(fits_grid(100, 100, "B*H").ok);
  const Support s = fits_grid(101, 100, "B*H*ceil(Sq/64)");
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, StartsWith("B*H*ceil(Sq/64) = 101") && ContainsSubstring("100"));
}

TEST_CASE("misaligned tensors are refused before launch, naming the stage") {
  alignas(64) static unsigned char buf[256];
  AttentionArgs a{buf, buf + 32, buf + 64, buf + 128, nullptr, nullptr};
  CHECK_NOTHROW(require_aligned("99_test", a, 16));
  a.v = buf + 72;  // 8-byte aligned only
  CHECK_THROWS_WITH(require_aligned("99_test", a, 16),
                    ContainsSubstring("99_test") && ContainsSubstring("16-byte aligned"));
}

namespace {
// A stage with nothing but the names and the compute capability a refusal reads.
class FakeStage final : public Stage {
 public:
  explicit FakeStage(int min_cc, KvCacheSupport kv = {}) : min_cc_(min_cc), kv_(kv) {}
  std::string_view name() const override { return "99_test"; }
  std::string_view title() const override { return "test"; }
  int min_compute_capability() const override { return min_cc_; }
  KvCacheSupport kv_cache() const override { return kv_; }
  Support supports(const Problem&, const DeviceInfo&) const override { return Support::yes(); }
  void launch(const Problem&, const AttentionArgs&, cudaStream_t) const override {}
  std::vector<KernelLaunchInfo> kernels(const Problem&) const override { return {}; }

 private:
  int min_cc_;
  KvCacheSupport kv_;
};
}  // namespace

TEST_CASE("every refusal has one shape: who, 'cannot run', the reason") {
  CHECK(refusal("99_test", "D must be one of {64, 128}") ==
        "99_test: cannot run: D must be one of {64, 128}");
  const FakeStage stage(90);
  CHECK(no_device_reason(stage, "no NVIDIA GPU or driver found") ==
        "no NVIDIA GPU or driver found; this stage needs sm_90 or newer");
  DeviceInfo dev;
  dev.name = "Test GPU";
  dev.cc_major = 8, dev.cc_minor = 6;
  const Support s = supports_device(stage, dev);
  CHECK_FALSE(s.ok);
  CHECK(s.reason == "needs sm_90 or newer; Test GPU is sm_86");
  dev.cc_major = 9, dev.cc_minor = 0;
  CHECK(supports_device(stage, dev).ok);
}

TEST_CASE("no GPU is said plainly: CUDA's 'insufficient driver' without a driver is no driver") {
  const std::string none = "no NVIDIA GPU or driver found";
  CHECK(no_gpu_reason(cudaErrorInsufficientDriver, 0, 13000) == none);
  CHECK(no_gpu_reason(cudaErrorNoDevice, 13000, 13000) == none);
  CHECK(no_gpu_reason(cudaSuccess, 13000, 13000) == none);  // a driver that sees no device
  const std::string old_driver = no_gpu_reason(cudaErrorInsufficientDriver, 12040, 13000);
  CHECK(old_driver.find("driver supports CUDA 12.4") != std::string::npos);
  CHECK(old_driver.find("CUDA 13.0 runtime") != std::string::npos);
  CHECK(old_driver.find("update the driver") != std::string::npos);
  const std::string other = no_gpu_reason(cudaErrorDevicesUnavailable, 13000, 13000);
  CHECK(other.find("no usable NVIDIA GPU") != std::string::npos);
  CHECK(other.find("cudaErrorDevicesUnavailable") != std::string::npos);
}

TEST_CASE("kv cache: a stage is refused what it does not read, by name, in one shared check") {
  Problem p;
  p.batch = 3;
  p.heads = 8;
  p.heads_kv = 2;
  p.seq_kv = 37;
  const FakeStage plain(80);
  Support s = supports_problem_of(plain, p);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, ContainsSubstring("99_test reads K/V with as many heads as Q"));
  p.heads_kv = 0;
  p.cache_seqlens = {1, 2, 3};
  CHECK_THAT(supports_problem_of(plain, p).reason, ContainsSubstring("cache_seqlens"));
  p.cache_seqlens.clear();
  p.page_size = 16;
  CHECK_THAT(supports_problem_of(plain, p).reason, ContainsSubstring("paged cache (page_size"));
  p.page_size = 0;
  CHECK(supports_problem_of(plain, p).ok);
  // A stage that reads all three takes them, page sizes of its multiple only.
  const FakeStage reader(80, {true, true, true, 16});
  p.heads_kv = 1;
  p.causal = true;
  p.cache_seqlens = {0, 1, 37};
  p.page_size = 32;
  CHECK(supports_problem_of(reader, p).ok);
  p.page_size = 24;
  CHECK_THAT(supports_problem_of(reader, p).reason,
             ContainsSubstring("takes pages of a multiple of 16 keys"));
}
