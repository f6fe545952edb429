// fp16/bf16 conversions: the bit patterns come from the IEEE 754 binary16 and bfloat16 formats.
#include "flashsteps_catch.hpp"

#include <cmath>

#include "flashsteps/host_tensors.hpp"

using namespace flashsteps;
using Catch::Approx;

TEST_CASE("known bit patterns") {
  CHECK(float_to_bits(1.0f, DType::fp16) == 0x3C00);
  CHECK(float_to_bits(-2.0f, DType::fp16) == 0xC000);
  CHECK(float_to_bits(65504.0f, DType::fp16) == 0x7BFF);  // largest finite binary16
  CHECK(float_to_bits(1.0f, DType::bf16) == 0x3F80);
  CHECK(float_to_bits(-2.0f, DType::bf16) == 0xC000);
  CHECK(bits_to_float(0x3555, DType::fp16) == Approx(0.333251953125).epsilon(0));
}

TEST_CASE("round to nearest, ties to even") {
  CHECK(round_to(1.0f + 0x1p-11f, DType::fp16) == 1.0f);                // halfway: down to even
  CHECK(round_to(1.0f + 3 * 0x1p-11f, DType::fp16) == 1.0f + 0x1p-9f);  // halfway: up to even
  CHECK(round_to(1.0f + 0x1p-8f, DType::bf16) == 1.0f);
  CHECK(round_to(1.0f + 3 * 0x1p-8f, DType::bf16) == 1.0f + 0x1p-6f);
}

TEST_CASE("all-ones bytes are NaN: the poison pattern") {
  CHECK(std::isnan(bits_to_float(0xFFFF, DType::fp16)));
  CHECK(std::isnan(bits_to_float(0xFFFF, DType::bf16)));
}

TEST_CASE("inputs are seeded, random, offset from zero mean") {
  Problem p;
  p.batch = 2;
  p.heads = 2;
  p.seq_q = 100;
  p.seq_kv = 50;
  p.head_dim = 64;
  const HostInputs a = make_inputs(p, 7), b = make_inputs(p, 7), c = make_inputs(p, 8);
  CHECK(a.q == b.q);
  CHECK(a.v == b.v);
  CHECK(a.q != c.q);
  REQUIRE(a.q.size() == static_cast<std::size_t>(p.q_elems()));
  REQUIRE(a.k.size() == static_cast<std::size_t>(p.kv_elems()));
  auto mean = [&](const std::vector<std::uint16_t>& t) {
    double s = 0;
    int zeros = 0;
    for (auto x : t) {
      s += bits_to_float(x, p.dtype);
      zeros += x == 0;
    }
    CHECK(zeros < static_cast<int>(t.size() / 100));
    return s / static_cast<double>(t.size());
  };
  CHECK(mean(a.q) == Approx(0.25).margin(0.05));
  CHECK(mean(a.v) == Approx(0.5).margin(0.05));
}
