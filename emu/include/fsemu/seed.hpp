// emu/include/fsemu/seed.hpp — the seed that orders blocks and warps, set from a program: a test
// that shows a result the same (or not) under several schedules runs its launches under several
// seeds in one process. FSEMU_SEED in the environment sets it for a whole run
// (fsemu::schedule_seed(), fsemu/scheduler.hpp).
#pragma once

#include <cstdint>

namespace fsemu {

/// The launches from now on order their blocks and warps by `seed`, as under FSEMU_SEED=seed.
void set_schedule_seed(std::uint64_t seed);

}  // namespace fsemu
