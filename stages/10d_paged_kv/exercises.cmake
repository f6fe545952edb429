# stages/10d_paged_kv/exercises.cmake — the exercise of 10d_paged_kv that asks the reader to write
# the step's lesson: one flashsteps_exercise() (emu/exercises/CMakeLists.txt says what each
# argument means; tests/exercise.sh runs it). SOLUTION is the stage's own code, whole lines that
# occur once: the page-table address of each row a thread copies.

flashsteps_exercise(10d_write_page_walk STAGE 10d_paged_kv
  TASK "write the address of each key row this thread copies. Its rows are keys j = row0 + r0 + step * kRowStep of the sequence (step = 0 .. kSteps-1) and its chunk is c. Key j is row j % pages.size of page pages.of(j / pages.size), whose rows of this K/V head start at head + page * pages.stride, D = kD elements a row. Issue the 16-byte cuda::memcpy_async of each row below n_rows (step * kRowStep < rows_left) into chunk = dst + swizzle<kD>(r0 + step * kRowStep, c), and store zeros into the chunks of the others. Dividing once and walking on page by page is the stage's way, a division per row passes too"
  SOLUTION [=[  int page = (row0 + r0) / pages.size;
  int in_page = (row0 + r0) % pages.size;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    T* chunk = dst + swizzle<kD>(r0 + step * kRowStep, c);  // (8) dtype in smem
    if (step * kRowStep < rows_left) {
      const T* src = head + pages.of(page) * pages.stride + std::int64_t{in_page} * kD + c * 8;
      cuda::memcpy_async(chunk, src, cuda::aligned_size_t<16>(16), pipe);
    } else {
      *reinterpret_cast<uint4*>(chunk) = make_uint4(0u, 0u, 0u, 0u);
    }
    in_page += kRowStep;
    if (in_page >= pages.size) {
      in_page -= pages.size;
      ++page;
    }
  }]=]
  STUB [=[  // Write the gather. This stub reads every key from the sequence's first page: right for a
  // contiguous cache (one page), the first page's keys over and over once the cache is paged.
  for (int step = 0; step < kSteps; ++step) {
    T* chunk = dst + swizzle<kD>(r0 + step * kRowStep, c);
    const std::int64_t j = (row0 + r0 + step * kRowStep) % pages.size;
    if (step * kRowStep < rows_left)
      cuda::memcpy_async(chunk, head + pages.of(0) * pages.stride + j * kD + c * 8,
                         cuda::aligned_size_t<16>(16), pipe);
    else
      *reinterpret_cast<uint4*>(chunk) = make_uint4(0u, 0u, 0u, 0u);
  }]=]
  EXPECT "heads: FAIL" TESTS "a paged KV cache*")
