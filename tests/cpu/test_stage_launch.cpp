// What stages refuse in launch() and supports(), before anything reaches the device: a GPU is not
// needed. The stages' launchers are compiled into this binary by stage_launchers.cpp.
#include "flashsteps_catch.hpp"

#include <cstddef>
#include <memory>
#include <string>

#include "flashsteps/stage.hpp"

namespace flashsteps {
std::unique_ptr<Stage> make_stage_01_tiled();
std::unique_ptr<Stage> make_stage_02_wmma();
std::unique_ptr<Stage> make_stage_07a_wgmma();
std::unique_ptr<Stage> make_stage_07b_tma();
std::unique_ptr<Stage> make_stage_07c_roles();
std::unique_ptr<Stage> make_stage_07d_overlap();
}  // namespace flashsteps

using namespace flashsteps;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

namespace {

// Launches `stage` with Q one element past an aligned address, then with O half of `bytes` past
// one: both must be refused with a message that starts with the stage's name and names the
// alignment. The tensors are host memory that nothing touches, since the check comes before any
// CUDA call; without it, the launch would fail with another message (no GPU) or fault (on a GPU).
void check_refuses_misaligned(const Stage& stage, std::size_t bytes) {
  alignas(256) static unsigned char buf[4 * 256];
  const Problem p;
  const std::string name(stage.name()), alignment = std::to_string(bytes) + "-byte aligned";

  const AttentionArgs q_off{buf + 2, buf + 256, buf + 512, buf + 768, nullptr, nullptr};
  CHECK_THROWS_WITH(stage.launch(p, q_off, nullptr),
                    StartsWith(name) && ContainsSubstring(alignment));
  const AttentionArgs o_off{buf, buf + 256, buf + 512, buf + 768 + bytes / 2, nullptr, nullptr};
  CHECK_THROWS_WITH(stage.launch(p, o_off, nullptr),
                    StartsWith(name) && ContainsSubstring(alignment));
}

}  // namespace

TEST_CASE("stage 01 refuses Q or O off an 8-byte boundary before launch") {
  check_refuses_misaligned(*make_stage_01_tiled(), 8);
}

TEST_CASE("stage 02 refuses Q or O off a 16-byte boundary before launch") {
  check_refuses_misaligned(*make_stage_02_wmma(), 16);
}

// An sm_90a build runs on compute capability 9.0 only (FusedStage's kOnlyComputeCapability): a
// later GPU passes "at least 9.0" but must be refused, by name, while an H100 is accepted.
TEST_CASE("the sm_90a stages (07a to 07d) refuse every GPU but compute capability 9.0") {
  // A loop, not GENERATE: Catch2 3 needs a header of its own for generators.
  for (auto* make : {&make_stage_07a_wgmma, &make_stage_07b_tma, &make_stage_07c_roles,
                     &make_stage_07d_overlap}) {
    const std::unique_ptr<Stage> stage = make();
    INFO(stage->name());
    DeviceInfo dev;
    dev.name = "Test GPU";
    dev.smem_optin_per_block = 232448;  // sm_90's 227 KiB
    dev.cc_major = 10, dev.cc_minor = 0;
    const Problem p;
    const Support later = stage->supports(p, dev);
    CHECK_FALSE(later.ok);
    CHECK_THAT(later.reason, StartsWith("needs sm_90a (H100/H200)") &&
                                 ContainsSubstring("compute capability 9.0 only") &&
                                 ContainsSubstring("Test GPU is sm_100"));
    dev.cc_major = 9, dev.cc_minor = 0;
    CHECK(stage->supports(p, dev).ok);
  }
}
