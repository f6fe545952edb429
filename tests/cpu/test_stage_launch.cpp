// What stages refuse in launch(), before anything reaches the device: a GPU is not needed. The
// stages' launchers are compiled into this binary by stage_launchers.cu.
#include "flashsteps_catch.hpp"

#include <cstddef>
#include <memory>
#include <string>

#include "flashsteps/stage.hpp"

namespace flashsteps {
std::unique_ptr<Stage> make_stage_01_tiled();
std::unique_ptr<Stage> make_stage_02_wmma();
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
