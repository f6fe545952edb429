#include "flashsteps/runner.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_tensors.hpp"
#include "flashsteps/peaks.hpp"
#include "flashsteps/reference.hpp"
#include "flashsteps/resources.hpp"
#include "flashsteps/timing.hpp"

namespace flashsteps {

std::optional<int> parse_runner_cli(int argc, const char* const* argv, std::string_view stage,
                                    std::string_view title, RunnerOptions* opts, std::ostream& out,
                                    std::ostream& err) {
  CLI::App app{std::string(stage) + " — " + std::string(title) +
               ": runs the stage once against the CPU reference, then times it."};
  app.footer(
      "Exit codes: 0 ok, 1 check failed or CUDA error, 2 bad flag or invalid problem,\n"
      "3 no GPU, or the GPU or problem is outside what this stage supports.");
  Problem& p = opts->problem;
  std::string dtype = "fp16";
  std::int64_t seq_kv = -1;
  app.add_option("-b,--batch", p.batch, "batch size B")->capture_default_str();
  app.add_option("--heads", p.heads, "heads H")->capture_default_str();
  app.add_option("-s,--seq", p.seq_q, "query sequence length Sq (and Skv unless --seq-kv)")
      ->capture_default_str();
  app.add_option("--seq-kv", seq_kv, "key/value sequence length Skv (default: Sq)");
  app.add_option("-d,--dim", p.head_dim, "head dimension D")->capture_default_str();
  app.add_flag("--causal", p.causal, "bottom-right aligned causal mask");
  app.add_option("--dtype", dtype, "input/output dtype")
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--scale", p.scale, "softmax scale (default 1/sqrt(D))");
  app.add_option("--iters", opts->iters, "timed launches (median reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--warmup", opts->warmup, "untimed launches first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--seed", opts->seed, "seed of the random inputs")->capture_default_str();
  app.add_option("--device", opts->device, "CUDA device index")->capture_default_str();
  app.add_option("--check-heads", opts->check_heads,
                 "heads checked against the CPU reference (0 skips the check)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 31))
      ->capture_default_str();
  app.add_flag("!--no-peak", opts->measure_peak, "skip measuring the cuBLAS GEMM peak");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << stage << ": " << e.what() << "\nRun with --help for usage.\n";
    return kExitUsage;
  }
  p.dtype = *parse_dtype(dtype);
  p.seq_kv = seq_kv < 0 ? p.seq_q : seq_kv;
  if (std::string why = validate(p); !why.empty()) {
    err << refusal(stage, why) << '\n';
    return kExitUsage;
  }
  return std::nullopt;
}

namespace {

void print_resources(const Stage& stage, const Problem& p, const DeviceInfo& dev,
                     std::ostream& out) {
  out << "resources (runtime view; the build's ptxas report has per-arch detail):\n";
  for (const KernelResources& r : kernel_resources(stage, p, dev)) {
    out << "  " << std::left << std::setw(40) << r.name << std::right << " regs " << std::setw(3)
        << r.registers << "  smem " << std::setw(6) << r.static_smem + r.dynamic_smem << " B"
        << "  local " << r.local_bytes << " B  block " << r.block_threads << "  blocks/SM "
        << r.blocks_per_sm << "  occupancy " << std::fixed << std::setprecision(0)
        << 100.0 * r.occupancy << "%\n";
  }
}

int run(const RunnerOptions& opt, Stage& stage, std::ostream& out, std::ostream& err) {
  const Problem& p = opt.problem;
  if (Support s = stage.supports_problem(p); !s) {
    err << refusal(stage.name(), s.reason) << '\n';
    return kExitNoDevice;
  }
  std::string why;
  const auto dev = query_device(opt.device, &why);
  if (!dev) {
    err << refusal(stage.name(), no_device_reason(stage, why)) << '\n';
    return kExitNoDevice;
  }
  out << "gpu      " << dev->summary() << '\n';
  out << "stage    " << stage.name() << " — " << stage.title() << '\n';
  out << "problem  " << p.name() << "  (B=" << p.batch << " H=" << p.heads << " Sq=" << p.seq_q
      << " Skv=" << p.seq_kv << " D=" << p.head_dim << " scale=" << p.softmax_scale() << ")\n";
  if (Support s = check_runnable(stage, p, *dev); !s) {
    err << refusal(stage.name(), s.reason) << '\n';
    return kExitNoDevice;
  }
  stage.setup(*dev);
  cudaStream_t stream;
  FS_CUDA_CHECK(cudaStreamCreate(&stream));
  DeviceTensors dt(p, stage.workspace_bytes(p));
  const HostInputs in = make_inputs(p, opt.seed);
  dt.upload(in);
  auto launch = [&](cudaStream_t s) { stage.launch(p, dt.args(), s); };

  int rc = kExitOk;
  if (opt.check_heads > 0) {
    dt.poison(stream);
    launch(stream);
    FS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto heads = sample_heads(p, opt.check_heads);
    const Reference exact = reference_attention(in, heads, RefPrecision::exact);
    const Reference same = reference_attention(in, heads, RefPrecision::same_precision);
    const CheckResult c = check_attention(p, exact, same, dt.download_o(), dt.download_lse(),
                                          default_tolerance(p, exact));
    out << "check    " << c.summary << '\n';
    if (!c.pass) rc = kExitCheckFailed;
  } else {
    out << "check    skipped (--check-heads 0)\n";
  }

  L2Flusher flusher(*dev);
  const TimingStats t = summarize(time_launches(launch, stream, flusher, opt.warmup, opt.iters));
  const double tflops = p.flops() / (t.median_ms * 1e-3) / 1e12;
  out << std::fixed << std::setprecision(4) << "time     median " << t.median_ms << " ms  (p10 "
      << t.p10_ms << ", p90 " << t.p90_ms << ", " << t.samples << " launches, L2 flushed)\n";
  out << std::setprecision(2) << "rate     " << tflops << " TFLOP/s  (FLOPs = 4*B*H*Sq*Skv*D"
      << (p.causal ? " / 2" : "") << ")";
  if (opt.measure_peak) {
    GemmPeak gemm(p.dtype, 8192);
    const TimingStats g =
        summarize(time_launches([&](cudaStream_t s) { gemm.launch(s); }, stream, flusher, 3, 10));
    const double peak = gemm.flops() / (g.median_ms * 1e-3);
    out << ", " << 100.0 * tflops * 1e12 / peak << "% of the " << peak / 1e12 << " TFLOP/s "
        << to_string(p.dtype) << " cuBLAS GEMM (8192^3) measured now";
  }
  out << '\n';
  print_resources(stage, p, *dev, out);
  FS_CUDA_CHECK(cudaStreamDestroy(stream));
  return rc;
}

}  // namespace

int runner_main(int argc, const char* const* argv, Stage& stage) {
  RunnerOptions opt;
  if (auto code =
          parse_runner_cli(argc, argv, stage.name(), stage.title(), &opt, std::cout, std::cerr)) {
    return *code;
  }
  try {
    return run(opt, stage, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << stage.name() << ": " << e.what() << '\n';
    return kExitCheckFailed;
  }
}

}  // namespace flashsteps
