// bench/harness.cpp — what main() of every bench_<stage> binary runs (bench/stage_main.cpp), in the
// shared bench library: the canonical shapes
// (CONTRIBUTING.md, "How we measure"), each timed with the L2 flushed before every launch, written
// as Google Benchmark JSON with names <stage>/<Problem::name()>, b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_
// <dtype>[_causal][_hkv<H_kv>].
//
//   bench_03_online_softmax --benchmark_out=bench_03.json --benchmark_out_format=json
//       [--fs_dtypes=fp16,bf16] [--fs_iters=30] [--fs_shapes=canonical|small|decode]
//       [--fs_list_shapes]
// --fs_list_shapes prints the shapes' names, one a line, and exits without a GPU: the one list of
// each shape set, which bench/sdpa/sdpa_bench.py --harness reads too.
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_tensors.hpp"
#include "harness.hpp"

namespace flashsteps::bench {
namespace {

enum class ShapeSet { canonical, small, decode };

struct Options {
  std::vector<DType> dtypes{DType::fp16};
  int iters = 30;
  ShapeSet set = ShapeSet::canonical;
  bool list = false;
};

// Decode (Part V, issue 41): one new query row per sequence against a full KV cache of L keys,
// K/V heads shared by groups of query heads: Llama-3-8B's attention (H_q 32, H_kv 8, D 128) and a
// 70B model's on 8 GPUs (H_q 8, H_kv 1, D 128), B in {1, 8, 64}, L in {1k, 8k, 32k}. Bound by
// memory: judged by the bytes it must move (Problem::min_dram_bytes: K and V of the cache read
// once, Q read and O written once), per second. Then one of those shapes (B 8, H_q 32 / H_kv 8,
// 8k keys) with its cache in pages (Problem::page_size) of 16 keys, vLLM's default block, and of
// 256, FlashAttention-2's smallest: the same bytes through a shuffled block table, which only a
// stage whose kv_cache() reads pages runs (the others skip it, "unsupported").
std::vector<Problem> decode_shapes(const Options& opt) {
  std::vector<Problem> out;
  auto add = [&](std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t l,
                 std::int64_t page) {
    for (DType t : opt.dtypes) {
      Problem p;
      p.batch = b, p.heads = hq, p.heads_kv = hkv, p.seq_q = 1, p.seq_kv = l;
      p.head_dim = 128, p.dtype = t, p.causal = false, p.page_size = page;
      out.push_back(p);
    }
  };
  for (auto [hq, hkv] : {std::pair<std::int64_t, std::int64_t>{32, 8}, {8, 1}})
    for (std::int64_t b : {1, 8, 64})
      for (std::int64_t l : {1024, 8192, 32768})
        add(b, hq, hkv, l, 0);
  for (std::int64_t page : {16, 256})
    add(8, 32, 8, 8192, page);
  return out;
}

// FlashAttention's benchmark set (B*S = 16k tokens, H*D = 2048) plus the small L4-era shapes.
std::vector<Problem> canonical_shapes(const Options& opt) {
  if (opt.set == ShapeSet::decode) return decode_shapes(opt);
  std::vector<Problem> out;
  auto add = [&](std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool causal) {
    for (DType t : opt.dtypes) {
      Problem p;
      p.batch = b, p.heads = h, p.seq_q = p.seq_kv = s, p.head_dim = d;
      p.dtype = t, p.causal = causal;
      out.push_back(p);
    }
  };
  for (bool causal : {false, true}) {
    for (std::int64_t d : {64, 128}) {
      const std::vector<std::int64_t> seqs =
          opt.set == ShapeSet::small
              ? std::vector<std::int64_t>{512, 1024}
              : std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192, 16384};
      for (std::int64_t s : seqs)
        add(16384 / s, 2048 / d, s, d, causal);
    }
    add(1, 8, 512, 64, causal);
    add(32, 8, 512, 64, causal);
  }
  return out;
}

// The harness's own flags, for --help and for the message after a bad one.
constexpr const char* kOwnFlags =
    "  --fs_dtypes=fp16[,bf16]      dtypes to time (default fp16)\n"
    "  --fs_iters=N                 timed launches per shape, median reported (default 30)\n"
    "  --fs_shapes=canonical|small|decode\n"
    "                               every canonical shape, only S = 512 and 1024, or the decode\n"
    "                               shapes (Sq 1, GQA, KV caches of 1k to 32k keys, two of them\n"
    "                               paged; judged in bytes per second) (default canonical)\n"
    "  --fs_list_shapes             print the shapes' names, one a line, and exit (no GPU "
    "needed)\n";

void print_usage(std::string_view stage) {
  std::cout << "bench_" << stage << ": times stage " << stage
            << " at the canonical shapes (L2 flushed before every launch)\n"
               "and reports each shape's median as Google Benchmark output.\n\n"
               "  bench_"
            << stage
            << " --benchmark_out=out.json --benchmark_out_format=json [flags]\n\n"
               "Its own flags:\n"
            << kOwnFlags
            << "Exit codes: 0 ok, 1 CUDA error, 2 bad flag, 3 no GPU or a GPU the stage does not "
               "run on.\n\nGoogle Benchmark's flags:\n";
}

bool parse_own_flag(const char* arg, Options* opt) {
  auto value = [&](const char* prefix) -> const char* {
    return std::strncmp(arg, prefix, std::strlen(prefix)) == 0 ? arg + std::strlen(prefix)
                                                               : nullptr;
  };
  if (const char* v = value("--fs_dtypes=")) {
    opt->dtypes.clear();
    std::string s(v);
    for (std::size_t at = 0; at <= s.size();) {
      const std::size_t end = std::min(s.find(',', at), s.size());
      const auto t = parse_dtype(s.substr(at, end - at));
      if (!t) return false;
      opt->dtypes.push_back(*t);
      at = end + 1;
    }
    return !opt->dtypes.empty();
  }
  if (const char* v = value("--fs_iters=")) {
    opt->iters = std::atoi(v);
    return opt->iters > 0;
  }
  if (std::strcmp(arg, "--fs_list_shapes") == 0) {
    opt->list = true;
    return true;
  }
  if (const char* v = value("--fs_shapes=")) {
    for (auto [name, set] : {std::pair{"canonical", ShapeSet::canonical},
                             {"small", ShapeSet::small},
                             {"decode", ShapeSet::decode}})
      if (std::strcmp(v, name) == 0) {
        opt->set = set;
        return true;
      }
    return false;
  }
  return false;
}

void bench_problem(benchmark::State& state, Stage& stage, const DeviceInfo& dev, Problem p,
                   L2Flusher& flusher) {
  if (p.seq_q > stage.bench_max_seq() || p.seq_kv > stage.bench_max_seq()) {
    state.SkipWithError(("not timed: " + std::string(stage.name()) +
                         " is benchmarked up to S = " + std::to_string(stage.bench_max_seq()))
                            .c_str());
    return;
  }
  if (Support s = check_runnable(stage, p, dev); !s) {
    state.SkipWithError(("unsupported: " + s.reason).c_str());
    return;
  }
  try {
    cudaStream_t stream;
    FS_CUDA_CHECK(cudaStreamCreate(&stream));
    // A backward stage gets dO, dQ, dK, dV too, and is counted at the backward's FLOPs and bytes.
    DeviceTensors dt(p, stage.workspace_bytes(p), stage.kind());
    dt.fill_random(1, stream);  // random inputs generated on the GPU, never zeros
    timed_loop(
        state, [&](cudaStream_t s) { stage.launch(p, dt.args(), s); }, stream, flusher,
        stage_flops(stage, p), static_cast<double>(p.min_dram_bytes(stage.kind())));
    FS_CUDA_CHECK(cudaStreamDestroy(stream));
  } catch (const std::exception& e) {
    state.SkipWithError(("failed: " + std::string(e.what())).c_str());
  }
}

}  // namespace
}  // namespace flashsteps::bench

int flashsteps::bench::bench_main(int argc, char** argv, std::unique_ptr<Stage> stage) {
  using namespace flashsteps;
  // Google Benchmark answers --help itself (its flags only) and exits: this stage's flags first.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0) {
      bench::print_usage(stage->name());
      std::cout.flush();
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!bench::parse_own_flag(argv[i], &opt)) {
      std::cerr << "bench_" << stage->name() << ": unknown or bad flag: " << argv[i]
                << "\nIts own flags:\n"
                << bench::kOwnFlags << "and Google Benchmark's --benchmark_* flags (--help).\n";
      return 2;
    }
  }
  if (opt.list) {
    for (const Problem& p : bench::canonical_shapes(opt))
      std::cout << p.name() << '\n';
    return 0;
  }
  std::string why;
  const auto dev = query_device(0, &why);
  if (!dev) {
    std::cerr << refusal("bench_" + std::string(stage->name()), no_device_reason(*stage, why))
              << '\n';
    return 3;
  }
  try {
    stage->setup(*dev);
    bench::add_context(*dev, argc, argv);
    benchmark::AddCustomContext("flashsteps_stage", std::string(stage->name()));
    benchmark::AddCustomContext("flashsteps_kind", std::string(to_string(stage->kind())));
    auto flusher = std::make_shared<L2Flusher>(*dev);
    for (const Problem& p : bench::canonical_shapes(opt)) {
      benchmark::RegisterBenchmark((std::string(stage->name()) + "/" + p.name()).c_str(),
                                   [&, p, flusher](benchmark::State& st) {
                                     bench::bench_problem(st, *stage, *dev, p, *flusher);
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(opt.iters);
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::cerr << "bench_" << stage->name() << ": " << e.what() << '\n';
    return 1;
  }
  return 0;
}
