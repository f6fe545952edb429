# stages/10b_split_kv/exercises.cmake — the exercise of 10b_split_kv that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once: the combine's merge of one row's partials.

flashsteps_exercise(10b_write_combine STAGE 10b_split_kv
  TASK "write the merge of one row of O from its splits. Split s holds O_s, fp32 (`o_part[(s * rows + row) * kD + c]`), and lse_s (`lse_part[s * rows + row]`). The row's LSE is lse_max + ln(sum_s w_s) and O = sum_s w_s O_s / sum_s w_s with w_s = exp(lse_s - lse_max). Leave this lane's kCols columns of sum_s w_s O_s in `acc` and 1 / sum_s w_s in `inv_sum`, write `lse[row]`, and give a row that no split saw a key of (every lse_s = -inf) O = 0 and LSE = -inf, without a NaN"
  SOLUTION [=[  // lse_max, the largest partial LSE of the row: the lanes take splits lane, lane + 32, ...
  float lse_max = -INFINITY;
  for (int s = lane; s < splits; s += 32)
    lse_max = fmaxf(lse_max, lse_part[s * rows + row]);
  for (int offset = 16; offset > 0; offset /= 2)
    lse_max = fmaxf(lse_max, __shfl_xor_sync(kFullMask, lse_max, offset));
  // Weights w_s = exp(lse_s - lse_max): the largest is 1 and none overflows, however large the
  // scores. A row that no split saw a key of has every lse_s = -inf: subtracting a safe 0 instead
  // keeps exp(-inf - -inf) = NaN out, every weight is 0, and so is the sum.
  const float shift = lse_max == -INFINITY ? 0.0f : lse_max;
  float sum = 0.0f;
  for (int s = lane; s < splits; s += 32)
    sum += expf(lse_part[s * rows + row] - shift);
  for (int offset = 16; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(kFullMask, sum, offset);
  // O = sum_s w_s O_s / sum_s w_s, LSE = lse_max + ln(sum_s w_s); a row without keys: O = 0,
  // LSE = -inf, as 10a writes it.
  float acc[kCols] = {};
  for (int s = 0; s < splits; ++s) {
    const float w = expf(lse_part[s * rows + row] - shift);
    const float* src = o_part + (s * rows + row) * kD + lane * kCols;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      acc[c] += w * src[c];
  }
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
  if (lane == 0) lse[row] = sum > 0.0f ? shift + logf(sum) : -INFINITY;]=]
  STUB [=[  // Write the merge. This stub keeps split 0 alone: its O and its LSE, as if it had every key.
  float acc[kCols];
  for (int c = 0; c < kCols; ++c)
    acc[c] = o_part[row * kD + lane * kCols + c];
  const float inv_sum = 1.0f;
  if (lane == 0) lse[row] = lse_part[row];]=]
  EXPECT "heads: FAIL" TESTS "a KV cache of ragged lengths*")
