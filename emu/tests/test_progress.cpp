// emu/tests/test_progress.cpp — a launch's progress line (fsemu/progress.hpp): silent for the
// first two seconds and when not enabled (stderr not a terminal), then blocks done of total, rate
// and estimate, rewritten at most twice a second. The time is a fake clock the test advances;
// the expected lines are worked out by hand.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "flashsteps_catch.hpp"
#include "fsemu/progress.hpp"

using Catch::Matchers::ContainsSubstring;
using fsemu::Progress;

namespace {

// Collects what a Progress writes (open_memstream) and lets the test set the time.
struct Capture {
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  double t = 0.0;
  Progress::Clock clock() {
    return [this] { return t; };
  }
  std::string text() {
    std::fflush(f);
    return std::string(buf, len);
  }
  ~Capture() {
    std::fclose(f);
    std::free(buf);
  }
};

}  // namespace

TEST_CASE("progress: the line names blocks done of total, the rate and the time left") {
  CHECK(fsemu::progress_line(120, 600, 4.0) ==
        "fsemu: 120 of 600 blocks, 30.0 blocks/s, about 16 s left");
  CHECK(fsemu::progress_line(3, 10, 4.0) ==
        "fsemu: 3 of 10 blocks, 0.75 blocks/s, about 10 s left");
  CHECK(fsemu::progress_line(600, 600, 20.0) ==
        "fsemu: 600 of 600 blocks, 30.0 blocks/s in 20.0 s");
  CHECK(fsemu::progress_line(0, 600, 3.0) == "fsemu: 0 of 600 blocks");
}

TEST_CASE("progress: a launch shorter than two seconds prints nothing") {
  Capture c;
  {
    Progress p(100, c.f, true, c.clock());
    for (int i = 0; i < 100; ++i) {
      c.t += 0.019;  // 1.9 s in all
      p.block_done();
    }
  }
  CHECK(c.text().empty());
}

TEST_CASE("progress: a long launch rewrites one line, at most every half second, and ends it") {
  Capture c;
  {
    Progress p(10, c.f, true, c.clock());
    for (int i = 0; i < 10; ++i) {
      c.t += 0.6;
      p.block_done();
    }
    // Blocks 4..10 end at 2.4, 3.0, ..., 6.0 s: each more than 0.5 s after the last line.
    const std::string s = c.text();
    CHECK_THAT(s, ContainsSubstring("\rfsemu: 4 of 10 blocks, 1.67 blocks/s, about 4 s left"));
    CHECK_THAT(s, ContainsSubstring("\rfsemu: 10 of 10 blocks, 1.67 blocks/s in 6.0 s"));
    CHECK(s.find("3 of 10") == std::string::npos);  // before 2 s
    CHECK(s.find('\n') == std::string::npos);       // one line, rewritten
    p.end();
  }
  const std::string s = c.text();
  CHECK(s.back() == '\n');
  CHECK(s.find('\n') == s.size() - 1);  // ended once, not again by the destructor
}

TEST_CASE("progress: no more than one line each half second") {
  Capture c;
  Progress p(1000, c.f, true, c.clock());
  c.t = 2.0;
  for (int i = 0; i < 1000; ++i) {
    c.t += 0.001;  // a thousand blocks in one second after the quiet two
    p.block_done();
  }
  std::size_t lines = 0;
  for (char ch : c.text())
    lines += ch == '\r';
  CHECK(lines >= 2);
  CHECK(lines <= 4);  // at 2.001 s, then every 0.5 s, and the last block
}

TEST_CASE("progress: not enabled (stderr not a terminal), it prints nothing however long") {
  Capture c;
  {
    Progress p(10, c.f, false, c.clock());
    for (int i = 0; i < 10; ++i) {
      c.t += 60.0;
      p.block_done();
    }
  }
  CHECK(c.text().empty());
}
