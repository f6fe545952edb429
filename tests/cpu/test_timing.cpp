#include "flashsteps_catch.hpp"

#include "flashsteps/timing.hpp"

using namespace flashsteps;

TEST_CASE("median and nearest-rank percentiles") {
  const TimingStats odd = summarize({5, 1, 4, 2, 3});
  CHECK(odd.median_ms == 3);
  CHECK(odd.min_ms == 1);
  CHECK(odd.mean_ms == 3);
  const TimingStats even = summarize({4, 1, 3, 2});
  CHECK(even.median_ms == 2.5);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i)
    hundred.push_back(i);
  const TimingStats t = summarize(hundred);
  CHECK(t.p10_ms == 10);
  CHECK(t.p90_ms == 90);
  CHECK(t.samples == 100);
  CHECK(summarize({}).samples == 0);
}
