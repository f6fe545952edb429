#include "flashsteps/runner.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_tensors.hpp"
#include "flashsteps/reference.hpp"
#include "flashsteps/resources.hpp"
#include "flashsteps/timing.hpp"

#ifdef FLASHSTEPS_EMULATED_BUILD
#include <fstream>

#include "fsemu/layout.hpp"
#include "fsemu/profile.hpp"
#else
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "flashsteps/peaks.hpp"
#endif

namespace flashsteps {

namespace {

// --profile, --profile-csv, --profile-blocks: counting on the emulator (fsemu/profile.hpp).
void add_profile_flags(CLI::App& app, RunnerOptions* opts) {
  app.add_flag("--profile", opts->profile,
               "with --emulate: count per kernel the instructions by class, shared-memory "
               "wavefronts and bank conflicts, and global sectors, named after the Nsight "
               "Compute metrics they correspond to (emu/README.md, Counting)");
  app.add_option("--profile-csv", opts->profile_csv,
                 "with --profile: also write the counts as bench/profile.sh's Nsight Compute CSV "
                 "(marked emulated)");
  app.add_option("--profile-blocks", opts->profile_blocks,
                 "with --profile: emulate only this many evenly spaced blocks of each launch and "
                 "scale the counts (0: every block); skips the check")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 31));
}

// Whether the profile flags make sense together; the refusal otherwise.
std::string profile_flags_error(const RunnerOptions& o) {
  if (!o.profile && (!o.profile_csv.empty() || o.profile_blocks > 0))
    return "--profile-csv and --profile-blocks need --profile";
  if (o.profile && !o.emulate)
    return "--profile counts on the CPU emulator, so it needs --emulate (run it as: --emulate "
           "--profile); bench/profile.sh profiles on a GPU with Nsight Compute";
  return {};
}

#ifdef FLASHSTEPS_EMULATED_BUILD
void start_profile(const RunnerOptions& o) {
  if (o.profile) fsemu::profile::enable(fsemu::profile::Options{o.profile_blocks});
}
// Prints the counts and writes the CSV; false if the CSV cannot be written.
bool finish_profile(const RunnerOptions& o, std::string_view stage, std::ostream& out,
                    std::ostream& err) {
  if (!o.profile) return true;
  fsemu::profile::print(out);
  if (o.profile_csv.empty()) return true;
  std::ofstream f(o.profile_csv);
  fsemu::profile::write_ncu_csv(f, std::string(stage));
  f.close();
  if (!f) {
    err << stage << ": cannot write " << o.profile_csv << '\n';
    return false;
  }
  out << "profile  written to " << o.profile_csv << '\n';
  return true;
}
#endif

// --cache-lens: "L0,L1,..." (B of them) or "seeded:<n>" into p.cache_seqlens. Returns why not;
// validate() then checks each length against Skv.
std::string parse_cache_lens(const std::string& text, Problem& p) {
  const std::string seeded = "seeded:";
  if (text.rfind(seeded, 0) == 0) {
    std::uint64_t seed = 0;
    const char* first = text.data() + seeded.size();
    const auto r = std::from_chars(first, text.data() + text.size(), seed);
    if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || r.ptr == first)
      return "seeded:<n> takes a non-negative integer seed";
    p.cache_seqlens = draw_cache_seqlens(p.batch, p.seq_kv, seed);
    return {};
  }
  std::vector<std::int32_t> lens;
  std::size_t at = 0;
  while (true) {
    const std::size_t cut = text.find(',', at);
    const std::size_t end = cut == std::string::npos ? text.size() : cut;
    std::int32_t v = 0;
    const auto r = std::from_chars(text.data() + at, text.data() + end, v);
    if (r.ec != std::errc{} || r.ptr != text.data() + end || end == at)
      return "takes B comma-separated integer lengths or seeded:<n>; '" +
             text.substr(at, end - at) + "' is not an integer";
    lens.push_back(v);
    if (cut == std::string::npos) break;
    at = cut + 1;
  }
  p.cache_seqlens = std::move(lens);
  return {};
}

}  // namespace

Problem runner_default_problem() {
  Problem p;
  p.batch = 2;
  p.heads = 3;
  p.seq_q = 197;
  p.seq_kv = 197;
  p.head_dim = 64;
  return p;
}

std::optional<int> parse_runner_cli(int argc, const char* const* argv, std::string_view stage,
                                    std::string_view title, RunnerOptions* opts, std::ostream& out,
                                    std::ostream& err) {
#ifdef FLASHSTEPS_EMULATED_BUILD
  CLI::App app{std::string(stage) + " — " + std::string(title) +
               ": runs the stage's own kernels once on the CPU emulator (fsemu) and checks them "
               "against the CPU reference. Nothing is timed: --iters, --warmup and --no-peak are "
               "accepted and ignored."};
  app.footer(
      "Exit codes: 0 ok, 1 check failed or the launch failed on the emulator (a fault or a\n"
      "deadlock, reported), 2 bad flag or invalid problem, 3 the problem is outside what this\n"
      "stage supports.");
  const char* ignored = " (ignored: the emulator times nothing)";
#else
  CLI::App app{std::string(stage) + " — " + std::string(title) +
               ": runs the stage once against the CPU reference, then times it."};
  app.footer(
      "Exit codes: 0 ok, 1 check failed or CUDA error, 2 bad flag or invalid problem,\n"
      "3 no GPU, or the GPU or problem is outside what this stage supports.");
  const char* ignored = "";
#endif
  Problem& p = opts->problem;
  {
    const Problem d = runner_default_problem();
    app.description(app.get_description() + " With no shape flags it runs B=" +
                    std::to_string(d.batch) + " H=" + std::to_string(d.heads) +
                    " Sq=Skv=" + std::to_string(d.seq_q) + " D=" + std::to_string(d.head_dim) +
                    ": several heads, and ragged last tiles of Q and of K, V in every stage.");
  }
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
  std::string cache_lens;
  app.add_option("--heads-kv", p.heads_kv,
                 "K/V heads H_kv, a divisor of H (GQA; 1 is MQA): query head h reads K/V head "
                 "h / (H / H_kv) (default: H)");
  app.add_option("--cache-lens", cache_lens,
                 "keys each sequence's KV cache holds, each in [0, Skv]: B comma-separated "
                 "lengths (3,0,197), or seeded:<n> for B lengths drawn uniformly from [0, Skv] "
                 "with seed n (default: Skv each, no cache)");
  app.add_option("--page-size", p.page_size,
                 "a paged K/V cache of pages of this many keys, in a shuffled block table "
                 "(default 0: contiguous)");
  app.add_option("--iters", opts->iters, std::string("timed launches (median reported)") + ignored)
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--warmup", opts->warmup, std::string("untimed launches first") + ignored)
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--seed", opts->seed, "seed of the random inputs")->capture_default_str();
  app.add_option("--device", opts->device, "CUDA device index")->capture_default_str();
  app.add_option("--check-heads", opts->check_heads,
                 "heads checked against the CPU reference (0 skips the check)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 31))
      ->capture_default_str();
  app.add_flag("--deterministic", opts->deterministic,
               "launch the stage's deterministic mode (a backward stage that has one: dQ added "
               "in a fixed order); refused by a stage without one");
  app.add_flag("!--no-peak", opts->measure_peak,
               std::string("skip measuring the cuBLAS GEMM peak") + ignored);
#ifdef FLASHSTEPS_EMULATED_BUILD
  app.add_flag("--emulate", opts->emulate,
               "run on the CPU emulator (this runner always does; accepted for symmetry)");
  app.add_flag(
      "--layout", opts->layout,
      "print which lane holds which tensor-core fragment element (mma.sync and wgmma stages), "
      "probed from the emulator's instruction models, and exit");
#else
  app.add_flag("--emulate", opts->emulate,
               "run the stage's own kernels on the CPU emulator instead of the GPU: execs the "
               "emulated build of this runner (emulated/<this runner's name>, next to it) with "
               "the same arguments; it checks, and times nothing");
  app.add_flag(
      "--layout", opts->layout,
      "with --emulate: print the tensor-core fragment layouts (mma.sync and wgmma stages)");
#endif
  add_profile_flags(app, opts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << stage << ": " << e.what() << "\nRun with --help for usage.\n";
    return kExitUsage;
  }
#ifdef FLASHSTEPS_EMULATED_BUILD
  opts->emulate = true;
#else
  if (opts->layout) {
    err << refusal(stage,
                   "--layout prints fragment layouts read off the CPU emulator's instruction "
                   "models, so it needs --emulate (run it as: --emulate --layout)")
        << '\n';
    return kExitUsage;
  }
#endif
  if (std::string why = profile_flags_error(*opts); !why.empty()) {
    err << refusal(stage, why) << '\n';
    return kExitUsage;
  }
  p.dtype = *parse_dtype(dtype);
  p.seq_kv = seq_kv < 0 ? p.seq_q : seq_kv;
  if (!cache_lens.empty()) {
    std::string why = parse_cache_lens(cache_lens, p);
    if (!why.empty()) {
      err << refusal(stage, "--cache-lens " + cache_lens + ": " + why) << '\n';
      return kExitUsage;
    }
  }
  if (std::string why = validate(p); !why.empty()) {
    err << refusal(stage, why) << '\n';
    return kExitUsage;
  }
  return std::nullopt;
}

namespace {

#ifdef FLASHSTEPS_EMULATED_BUILD

// What a PASS under the emulator means, printed where the GPU runner prints its timing.
constexpr const char* kEmulatedMeaning =
    "emulated the stage's own kernels ran on fsemu, the CPU emulator (emu/), each thread a\n"
    "         fiber, each instruction modelled from the PTX ISA. A PASS above means their\n"
    "         logic, indexing and synchronisation (barriers, mbarriers, async copies, warp and\n"
    "         warpgroup collectives) hold under the emulator's reading of the ISA. It proves\n"
    "         nothing about speed (nothing was timed: no latency, rate, peak or resources),\n"
    "         about the hardware's rounding, or that the hardware agrees with that reading:\n"
    "         the GPU suite on real hardware (ctest -L gpu) stays the truth.\n";

}  // namespace

int print_layout(const Stage& stage, std::ostream& out) {
  const std::string_view name = stage.name();
  out << "stage    " << name << " — " << stage.title() << "\n\n";
  const std::vector<FragmentLayout> layouts = stage.fragment_layouts();
  if (!layouts.empty()) {
    const char* sep = "";
    for (FragmentLayout l : layouts) {
      out << sep
          << (l == FragmentLayout::mma_m16n8k16 ? fsemu::mma_m16n8k16_layout_report()
                                                : fsemu::wgmma_m64nNk16_layout_report(16));
      sep = "\n";
    }
    out << "\n(probed from emu/include/fsemu/model/tensor_core.hpp, the emulator's reading of the "
           "PTX ISA's\nfragment tables; emu/include/fsemu/layout.hpp says how)\n";
    return kExitOk;
  }
  out << "fragment layouts are not part of " << name << "'s lesson.\n"
      << "Its kernels address no tensor-core fragment lane by lane: they use no tensor cores,\n"
         "or reach them through WMMA, whose fragment layout the API keeps opaque (a kernel may\n"
         "not depend on which lane holds which element). The stages whose kernels do (mma.sync\n"
         "m16n8k16, wgmma m64nNk16) print those layouts with --emulate --layout.\n";
  return kExitOk;
}

namespace {

#else

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

// One word of a command line as a POSIX shell reads it back.
std::string shell_word(std::string_view w) {
  if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_./=:,+-@%") == std::string_view::npos)
    return std::string(w);
  std::string q = "'";
  for (char c : w)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// What a runner without a GPU offers instead: this very command with --emulate.
std::string emulate_offer(std::string_view stage, int argc, const char* const* argv) {
  std::string cmd = shell_word(argc > 0 ? argv[0] : "stageNN") + " --emulate";
  for (int i = 1; i < argc; ++i)
    cmd += " " + shell_word(argv[i]);
  return std::string(stage) +
         ": without a GPU, --emulate runs the same kernels on the CPU emulator (fsemu) and checks "
         "them against the CPU reference (it times nothing):\n  " +
         cmd;
}

// `--emulate` in the GPU build: exec stages/emulated/<this runner> with the same arguments.
// Returns only when that cannot be done (the exit code, after a refusal).
int exec_emulated(int argc, const char* const* argv, std::string_view stage, std::ostream& err) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    err << refusal(stage, "--emulate: cannot find this runner's own path (/proc/self/exe: " +
                              ec.message() + ")")
        << '\n';
    return kExitNoDevice;
  }
  const std::filesystem::path emulated = self.parent_path() / "emulated" / self.filename();
  const std::string how = "configure with -DFLASHSTEPS_EMULATION=ON (the default) and build it (" +
                          self.filename().string() + "_emulated, or the whole build)";
  if (!std::filesystem::exists(emulated, ec)) {
    err << refusal(stage, "--emulate runs the emulated build of this runner, " + emulated.string() +
                              ", which does not exist; " + how)
        << '\n';
    return kExitNoDevice;
  }
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    args.push_back(const_cast<char*>(argv[i]));
  args.push_back(nullptr);
  execv(emulated.c_str(), args.data());
  const int e = errno;
  err << refusal(stage, "--emulate: cannot run " + emulated.string() + ": " + std::strerror(e) +
                            "; " + how)
      << '\n';
  return kExitNoDevice;
}

#endif

// `emulate_offer`: what the refusal without a GPU offers instead (empty in the emulated build).
int run(const RunnerOptions& opt, Stage& stage, std::string_view emulate_offer, std::ostream& out,
        std::ostream& err) {
  const Problem& p = opt.problem;
#ifdef FLASHSTEPS_EMULATED_BUILD
  if (opt.layout) return print_layout(stage, out);
#endif
  if (Support s = supports_problem_of(stage, p); !s) {
    err << refusal(stage.name(), s.reason) << '\n';
    return kExitNoDevice;
  }
  if (opt.deterministic && !stage.deterministic_mode()) {
    err << refusal(stage.name(), "--deterministic: the stage has no deterministic mode (" +
                                     std::string(stage.deterministic() ? "it is deterministic "
                                                                         "always"
                                                                       : "its adds are in the "
                                                                         "hardware's order") +
                                     ")")
        << '\n';
    return kExitNoDevice;
  }
  std::string why;
  const auto dev = query_device(opt.device, &why);
  if (!dev) {
    err << refusal(stage.name(), no_device_reason(stage, why)) << '\n';
    if (!emulate_offer.empty()) err << emulate_offer << '\n';
    return kExitNoDevice;
  }
  out << (kEmulatedBuild ? "device   " : "gpu      ") << dev->summary() << '\n';
  out << "stage    " << stage.name() << " — " << stage.title() << '\n';
  out << "problem  " << p.name() << "  (B=" << p.batch << " H=" << p.heads << " Sq=" << p.seq_q
      << " Skv=" << p.seq_kv << " D=" << p.head_dim << " scale=" << p.softmax_scale();
  if (p.grouped()) out << " H_kv=" << p.kv_heads();
  if (p.paged()) out << " page=" << p.page_size;
  out << ")\n";
  if (Support s = check_runnable(stage, p, *dev); !s) {
    err << refusal(stage.name(), s.reason) << '\n';
    return kExitNoDevice;
  }
  stage.setup(*dev);
  cudaStream_t stream;
  FS_CUDA_CHECK(cudaStreamCreate(&stream));
  // A backward stage reads O and LSE from the reference forward, never from a stage under test.
  const bool backward = stage.kind() == StageKind::backward;
  DeviceTensors dt(p, stage.workspace_bytes(p), stage.kind());
  const BackwardInputs in = backward ? make_backward_inputs(p, opt.seed)
                                     : BackwardInputs{make_inputs(p, opt.seed), {}, {}, {}};
  if (backward)
    dt.upload(in);
  else
    dt.upload(in.fwd);
  AttentionArgs args = dt.args();
  args.deterministic = opt.deterministic;
  auto launch = [&](cudaStream_t s) { stage.launch(p, args, s); };

  int rc = kExitOk;
#ifdef FLASHSTEPS_EMULATED_BUILD
  // The launch runs the kernels to completion on the CPU; a fault (an access out of bounds, an
  // instruction used against the ISA's rules) or a deadlock fails it with the emulator's report.
  dt.poison(stream);
  start_profile(opt);
  try {
    launch(stream);
    FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (const std::exception& e) {
    out << "check    FAIL: the launch failed on the emulator: " << e.what() << '\n';
    out << kEmulatedMeaning;
    return kExitCheckFailed;
  }
  if (!finish_profile(opt, stage.name(), out, err)) rc = kExitCheckFailed;
  if (opt.profile_blocks > 0) {
    out << "check    skipped (--profile-blocks: only a sample of each launch's blocks ran)\n";
  } else if (opt.check_heads > 0) {
#else
  if (opt.check_heads > 0) {
    dt.poison(stream);
    launch(stream);
    FS_CUDA_CHECK(cudaStreamSynchronize(stream));
#endif
    const auto heads = sample_heads(p, opt.check_heads);
    if (backward) {
      const BackwardReference exact = reference_attention_backward(in, heads, RefPrecision::exact);
      const BackwardReference same =
          reference_attention_backward(in, heads, RefPrecision::same_precision);
      const BackwardCheckResult c = check_attention_backward(p, exact, same, dt.download_dq(),
                                                             dt.download_dk(), dt.download_dv());
      out << "check    " << c.summary << '\n';
      if (!c.pass) rc = kExitCheckFailed;
    } else {
      const Reference exact = reference_attention(in.fwd, heads, RefPrecision::exact);
      const Reference same = reference_attention(in.fwd, heads, RefPrecision::same_precision);
      const CheckResult c = check_attention(p, exact, same, dt.download_o(), dt.download_lse(),
                                            default_tolerance(p, exact));
      out << "check    " << c.summary << '\n';
      if (!c.pass) rc = kExitCheckFailed;
    }
  } else {
    out << "check    skipped (--check-heads 0)"
        << (kEmulatedBuild ? "; the launch ran to completion on the emulator" : "") << '\n';
  }

#ifdef FLASHSTEPS_EMULATED_BUILD
  out << kEmulatedMeaning;
#else
  L2Flusher flusher(*dev);
  const TimingStats t = summarize(time_launches(launch, stream, flusher, opt.warmup, opt.iters));
  const double tflops = stage_flops(stage, p) / (t.median_ms * 1e-3) / 1e12;
  out << std::fixed << std::setprecision(4) << "time     median " << t.median_ms << " ms  (p10 "
      << t.p10_ms << ", p90 " << t.p90_ms << ", " << t.samples << " launches, L2 flushed)\n";
  out << std::setprecision(2) << "rate     " << tflops
      << " TFLOP/s  (FLOPs = " << (backward ? "2.5*" : "") << "4*B*H*Sq*Skv*D"
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
#endif
  FS_CUDA_CHECK(cudaStreamDestroy(stream));
  return rc;
}

}  // namespace

int runner_main(int argc, const char* const* argv, Stage& stage) {
#ifndef FLASHSTEPS_EMULATED_BUILD
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") break;
    if (std::string_view(argv[i]) == "--emulate")
      return exec_emulated(argc, argv, stage.name(), std::cerr);
  }
#endif
  RunnerOptions opt;
  if (auto code =
          parse_runner_cli(argc, argv, stage.name(), stage.title(), &opt, std::cout, std::cerr)) {
    return *code;
  }
#ifdef FLASHSTEPS_EMULATED_BUILD
  const std::string offer;
#else
  const std::string offer = emulate_offer(stage.name(), argc, argv);
#endif
  try {
    return run(opt, stage, offer, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << stage.name() << ": " << e.what() << '\n';
    return kExitCheckFailed;
  }
}

}  // namespace flashsteps
