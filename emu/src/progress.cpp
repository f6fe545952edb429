// emu/src/progress.cpp — a launch's progress on a terminal (fsemu/progress.hpp).
#include "fsemu/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace fsemu {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string progress_line(std::uint64_t done, std::uint64_t total, double elapsed_seconds) {
  std::ostringstream s;
  s << "fsemu: " << done << " of " << total << " blocks";
  if (done == 0 || elapsed_seconds <= 0.0) return s.str();
  const double rate = static_cast<double>(done) / elapsed_seconds;
  s.setf(std::ios::fixed);
  s.precision(rate < 10.0 ? 2 : 1);
  s << ", " << rate << " blocks/s";
  if (done < total) {
    s.precision(0);
    s << ", about " << std::ceil(static_cast<double>(total - done) / rate) << " s left";
  } else {
    s.precision(1);
    s << " in " << elapsed_seconds << " s";
  }
  return s.str();
}

Progress::Progress(std::uint64_t total_blocks)
    : Progress(total_blocks, stderr, isatty(fileno(stderr)) == 1, steady_seconds) {
  if (const char* after = std::getenv("FSEMU_PROGRESS_AFTER")) quiet_ = std::atof(after);
}

Progress::Progress(std::uint64_t total_blocks, std::FILE* out, bool enabled, Clock now)
    : total_(total_blocks), out_(out), enabled_(enabled), now_(std::move(now)) {
  if (enabled_) start_ = now_();
}

void Progress::block_done() {
  ++done_;
  if (!enabled_) return;
  const double t = now_() - start_;
  if (t < quiet_ || (printed_ && t - last_ < kEverySeconds && done_ < total_)) return;
  // \r and "erase to the end of the line": the line is rewritten in place.
  std::fprintf(out_, "\r%s\033[K", progress_line(done_, total_, t).c_str());
  std::fflush(out_);
  printed_ = true;
  last_ = t;
}

void Progress::end() {
  if (!printed_) return;
  std::fputc('\n', out_);  // the line stays: the last count (the total, unless a block failed)
  std::fflush(out_);
  printed_ = false;
  enabled_ = false;
}

Progress::~Progress() {
  end();
}

}  // namespace fsemu
