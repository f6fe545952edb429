// The shared-memory wavefront rule of the emulator's counters (emu/src/profile.hpp, emu/README.md
// "Counting") against the bank rules of the CUDA C++ Programming Guide ("Shared Memory" of the
// compute capabilities: 32 banks of 32-bit words; lanes reading the same word do not conflict;
// 64- and 128-bit accesses are served per half and quarter warp) and the ldmatrix 8-row phases.
// Every expected count is worked out here from the guide's statements, not by the code under test.
#include "flashsteps_catch.hpp"

#include <cstdint>

#include "../src/profile.hpp"

using fsemu::profile::shared_wavefronts;

namespace {

struct Access {
  std::uint32_t addr[32];
  std::uint8_t size[32];
};
// Lane l accesses `width` bytes at base + l * stride.
Access strided(std::uint32_t stride, int width, std::uint32_t base = 0) {
  Access a{};
  for (int l = 0; l < 32; ++l) {
    a.addr[l] = base + static_cast<std::uint32_t>(l) * stride;
    a.size[l] = static_cast<std::uint8_t>(width);
  }
  return a;
}
std::uint64_t wavefronts(const Access& a, int width, std::uint32_t mask = 0xffffffffu) {
  return shared_wavefronts(a.addr, a.size, mask, width).total;
}

}  // namespace

TEST_CASE("profile: 32-bit accesses, one wavefront per distinct word in the busiest bank",
          "[profile]") {
  CHECK(wavefronts(strided(4, 4), 4) == 1);               // consecutive words: every bank once
  CHECK(wavefronts(strided(8, 4), 4) == 2);               // stride 2 words: 2-way conflict
  CHECK(wavefronts(strided(12, 4), 4) == 1);              // stride 3 words (odd): conflict-free
  CHECK(wavefronts(strided(128, 4), 4) == 32);            // stride 32 words: all in bank 0
  CHECK(wavefronts(strided(0, 4), 4) == 1);               // one word for all: a broadcast
  CHECK(wavefronts(strided(4, 4, 64), 4) == 1);           // the start does not matter
  CHECK(wavefronts(strided(4 * 65, 4), 4) == 1);          // a padded column (pitch 65 words)
  CHECK(wavefronts(strided(4 * 64, 4), 4) == 32);         // the unpadded column (pitch 64)
  CHECK(wavefronts(strided(1, 1), 1) == 1);               // bytes: 8 words, 8 banks
  CHECK(wavefronts(strided(2, 2), 2) == 1);               // halves: 16 words
  CHECK(wavefronts(strided(8, 4), 4, 0x0000ffffu) == 1);  // 16 lanes at stride 2: 16 banks
  const auto w = shared_wavefronts(strided(8, 4).addr, strided(8, 4).size, 0xffffffffu, 4);
  CHECK(w.ideal == 1);
  CHECK(shared_wavefronts(strided(4, 4).addr, strided(4, 4).size, 0, 4).total == 0);  // no lane
}

TEST_CASE("profile: 64- and 128-bit accesses are served per half and quarter warp", "[profile]") {
  CHECK(wavefronts(strided(8, 8), 8) == 2);     // 256 contiguous bytes: one per half warp
  CHECK(wavefronts(strided(16, 8), 8) == 4);    // every other 8 bytes: 2 per half warp
  CHECK(wavefronts(strided(0, 8), 8) == 2);     // one 8-byte word for all: a broadcast per phase
  CHECK(wavefronts(strided(16, 16), 16) == 4);  // 512 contiguous bytes: one per quarter warp
  CHECK(wavefronts(strided(32, 16), 16) == 8);  // every other 16 bytes: 2 per quarter warp
  const auto w = shared_wavefronts(strided(16, 16).addr, strided(16, 16).size, ~0u, 16);
  CHECK(w.ideal == 4);
}

TEST_CASE("profile: ldmatrix rows, 8 addresses of 16 bytes per phase", "[profile]") {
  // An 8x8 matrix of 16-bit elements with rows 128 bytes apart (a 64-element tile row, no
  // padding): the 8 rows hit the same 4 banks, 8 wavefronts; with 16 bytes of padding per row
  // (pitch 144) they spread over all 32 banks, 1 wavefront.
  CHECK(wavefronts(strided(128, 16), 16, 0xffu) == 8);
  CHECK(wavefronts(strided(144, 16), 16, 0xffu) == 1);
  // .x4: four phases of 8 rows each.
  Access a = strided(144, 16);
  CHECK(shared_wavefronts(a.addr, a.size, ~0u, 16).ideal == 4);
}
