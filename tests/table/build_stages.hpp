// tests/table/build_stages.hpp — the stage list the table tests read: the one this build wrote
// (<build>/stages.json, from the stage manifests).
#pragma once

#include "fs_table/table.hpp"

namespace flashsteps::table {

inline const StageList& build_stages() {
  static const StageList list = load_stage_list(FS_TABLE_STAGE_LIST);
  return list;
}

}  // namespace flashsteps::table
