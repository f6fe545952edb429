// python/src/stage_module.cpp — what a stage's Python extension module offers, for whichever
// stage is linked with it.
//
// python/CMakeLists.txt compiles this file once per build and links it into one module per stage,
// with that stage's library, whose make_stage() is the stage (CONTRIBUTING.md, "The Python
// package"); module_init.cpp names the module:
//   flashsteps._gpu_<stage>   against the CUDA runtime: CUDA arrays, on the caller's stream
//   flashsteps._emu_<stage>   against fsemu (FLASHSTEPS_EMULATED_BUILD): CPU arrays, emulated
// Each module keeps every symbol of what it links to itself (--exclude-libs, hidden visibility),
// so sixteen make_stage() and two cudaMalloc() live side by side in one process.
//
// Every refusal is the runners': validate() and the stage's limits give the messages stageNN
// prints, through refusal(); a bad problem, or one the stage's kernels are not made for (a head
// dim or dtype it does not support, the runner's exit 3), raises ValueError; a device or build
// that cannot run it RuntimeError (exit 3). run() serves a forward stage, run_backward() a
// backward one (Stage::kind()). What only arrays can get wrong (rank, dtype,
// layout, device) is said here, once, in the same shape. flashsteps/__init__.py is the API.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_info.hpp"
#include "flashsteps/device_tensors.hpp"
#include "flashsteps/host_tensors.hpp"
#include "flashsteps/problem.hpp"
#include "flashsteps/runner.hpp"
#include "flashsteps/stage.hpp"

namespace nb = nanobind;
using namespace flashsteps;

namespace {

using Input = nb::ndarray<nb::ro>;  // Q, K, V: any DLPack or buffer-protocol array, never converted
using Output = nb::ndarray<>;       // O, LSE: allocated by flashsteps/__init__.py

Stage& stage() {
  static const std::unique_ptr<Stage> s = make_stage();
  return *s;
}

[[noreturn]] void bad_problem(const std::string& reason) {  // the runners' exit 2
  throw nb::value_error(refusal(stage().name(), reason).c_str());
}
[[noreturn]] void cannot_run(const std::string& reason) {  // the runners' exit 3
  throw std::runtime_error(refusal(stage().name(), reason));
}

std::string dtype_name(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const char* kind = nullptr;
  switch (static_cast<C>(t.code)) {
    case C::Int:
      kind = "int";
      break;
    case C::UInt:
      kind = "uint";
      break;
    case C::Float:
      kind = "float";
      break;
    case C::Bfloat:
      kind = "bfloat";
      break;
    case C::Complex:
      kind = "complex";
      break;
    case C::Bool:
      kind = "bool";
      break;
    default:
      break;
  }
  std::ostringstream s;
  if (kind)
    s << kind;
  else
    s << "DLPack type code " << int{t.code} << " of ";
  s << int{t.bits};
  if (t.lanes != 1) s << 'x' << t.lanes;
  return s.str();
}

std::string device_name(int type, int id) {
  if (type == nb::device::cpu::value) return "the CPU";
  if (type == nb::device::cuda::value) return "cuda:" + std::to_string(id);
  if (type == nb::device::cuda_host::value) return "pinned host memory (DLPack kDLCUDAHost)";
  if (type == nb::device::cuda_managed::value) return "managed memory (DLPack kDLCUDAManaged)";
  return "DLPack device type " + std::to_string(type);
}

template <class A>
std::string shape_of(const A& a) {
  std::string s = "[";
  for (std::size_t i = 0; i < a.ndim(); ++i)
    s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

// Whether `a` is row-major without gaps ("contiguous" as PyTorch says it: a dimension of extent 1
// may have any stride). nanobind fills in the strides of a producer that leaves them out.
template <class A>
bool contiguous(const A& a) {
  if (a.stride_ptr() == nullptr || a.size() == 0) return true;  // no element has a place
  std::int64_t expect = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// fp16 or bf16, from the DLPack dtype; uint16 is bf16 only when flashsteps/__init__.py viewed an
// ml_dtypes.bfloat16 NumPy array as its bits (NumPy's DLPack export has no bfloat16).
std::optional<DType> dtype_of(nb::dlpack::dtype t, bool uint16_is_bf16) {
  using C = nb::dlpack::dtype_code;
  if (t.bits != 16 || t.lanes != 1) return std::nullopt;
  if (t.code == static_cast<std::uint8_t>(C::Float)) return DType::fp16;
  if (t.code == static_cast<std::uint8_t>(C::Bfloat)) return DType::bf16;
  if (t.code == static_cast<std::uint8_t>(C::UInt) && uint16_is_bf16) return DType::bf16;
  return std::nullopt;
}

struct Named {
  const char* name;
  const Input& a;
};

// The int32 values of a KV cache's table (cache_seqlens [B], block_table [B, pages]), read on
// the host: validate() and the checks here need them. A CUDA array is copied on `stream` and the
// stream synchronised (the lengths are a few bytes; the check is worth the wait).
std::vector<std::int32_t> host_int32(const char* name, const Input& a,
                                     [[maybe_unused]] std::uintptr_t stream) {
  std::vector<std::int32_t> values(a.size());
  if (a.device_type() == nb::device::cpu::value) {
    if (a.size() != 0) std::memcpy(values.data(), a.data(), a.nbytes());
    return values;
  }
#if !(defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD)
  if (a.device_type() == nb::device::cuda::value) {
    auto s = reinterpret_cast<cudaStream_t>(stream);
    if (a.size() != 0) {
      FS_CUDA_CHECK(
          cudaMemcpyAsync(values.data(), a.data(), a.nbytes(), cudaMemcpyDeviceToHost, s));
      FS_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    return values;
  }
#endif
  bad_problem(std::string(name) + " is on " + device_name(a.device_type(), a.device_id()) +
              ", which this build cannot read");
}

// A KV cache's int32 table: its rank, dtype, layout and device (Q's), then its values.
std::vector<std::int32_t> table_of(const char* name, const Input& a, const Input& q,
                                   std::size_t ndim, const std::string& expect,
                                   std::uintptr_t stream) {
  const bool int32 = a.dtype() == nb::dtype<std::int32_t>();
  if (a.ndim() != ndim || !int32 || !contiguous(a)) {
    bad_problem(std::string(name) + " is " + shape_of(a) + " " + dtype_name(a.dtype()) +
                (contiguous(a) ? "" : ", not contiguous") + "; it must be " + expect +
                " int32, contiguous");
  }
  if (a.device_type() != q.device_type() || a.device_id() != q.device_id()) {
    bad_problem("Q is on " + device_name(q.device_type(), q.device_id()) + " but " + name +
                " is on " + device_name(a.device_type(), a.device_id()) +
                ": a KV cache's tables live on Q's device");
  }
  return host_int32(name, a, stream);
}

// The problem that Q, K and V describe, with what the arrays themselves can get wrong refused:
// rank, matching sizes, one dtype of the two, row-major layout, one device. K and V may have
// fewer heads than Q (GQA, MQA: heads_kv); a KV cache adds per-sequence lengths (cache_seqlens
// [B]) and pages (block_table [B, pages]: K and V are then the pool [P, H_kv, page_size, D]).
Problem problem_of(const Input& q, const Input& k, const Input& v,
                   const std::optional<Input>& cache_seqlens,
                   const std::optional<Input>& block_table, bool causal, double scale,
                   std::uintptr_t stream, bool uint16_is_bf16) {
  const std::string layout =
      block_table ? " (a paged KV cache: Q [B, H, Sq, D], K and V pages [P, H_kv, page_size, D])"
                  : " (PyTorch SDPA's layout: Q [B, H, Sq, D], K and V [B, H_kv, Skv, D], H a "
                    "multiple of H_kv)";
  for (const Named& t : {Named{"Q", q}, Named{"K", k}, Named{"V", v}}) {
    if (t.a.ndim() != 4) {
      bad_problem(std::string(t.name) + " has " + std::to_string(t.a.ndim()) + " dimensions " +
                  shape_of(t.a) + "; it must have 4" + layout);
    }
  }
  for (std::size_t i = 0; i < 4; ++i) {
    if (k.shape(i) != v.shape(i)) {
      bad_problem("K is " + shape_of(k) + " but V is " + shape_of(v) +
                  ": K and V must have one shape" + layout);
    }
  }
  for (std::size_t i : {0, 3}) {
    if (i == 0 && block_table) continue;  // K's first dimension counts pages
    if (q.shape(i) != k.shape(i)) {
      bad_problem("Q is " + shape_of(q) + " but K and V are " + shape_of(k) +
                  ": B and D (dimensions 0 and 3) must match" + layout);
    }
  }
  const std::optional<DType> dt = dtype_of(q.dtype(), uint16_is_bf16);
  if (!dt) {
    bad_problem(
        "Q is " + dtype_name(q.dtype()) +
        "; the stages take float16 (fp16) or bfloat16 (bf16), and nothing is converted here (a "
        "bfloat16 NumPy array is an ml_dtypes.bfloat16 array)");
  }
  for (const Named& t : {Named{"K", k}, Named{"V", v}}) {
    if (dtype_of(t.a.dtype(), uint16_is_bf16) != dt) {
      bad_problem(std::string("Q is ") + std::string(to_string(*dt)) + " but " + t.name + " is " +
                  dtype_name(t.a.dtype()) + ": Q, K and V must have one dtype");
    }
  }
  for (const Named& t : {Named{"Q", q}, Named{"K", k}, Named{"V", v}}) {
    if (!contiguous(t.a)) {
      std::string strides = "[";
      for (std::size_t i = 0; i < 4; ++i)
        strides += (i ? ", " : "") + std::to_string(t.a.stride(i));
      bad_problem(std::string(t.name) + " is not contiguous (strides " + strides +
                  "] elements for shape " + shape_of(t.a) +
                  "); the kernels read row-major [B, H, S, D] tensors and nothing is copied "
                  "here: pass x.contiguous() (PyTorch) or numpy.ascontiguousarray(x)");
    }
  }
  for (const Named& t : {Named{"K", k}, Named{"V", v}}) {
    if (t.a.device_type() != q.device_type() || t.a.device_id() != q.device_id()) {
      bad_problem("Q is on " + device_name(q.device_type(), q.device_id()) + " but " + t.name +
                  " is on " + device_name(t.a.device_type(), t.a.device_id()) +
                  ": Q, K and V must be on one device");
    }
  }
  Problem p;
  p.batch = static_cast<std::int64_t>(q.shape(0));
  p.heads = static_cast<std::int64_t>(q.shape(1));
  p.seq_q = static_cast<std::int64_t>(q.shape(2));
  p.seq_kv = static_cast<std::int64_t>(k.shape(2));
  p.head_dim = static_cast<std::int64_t>(q.shape(3));
  p.dtype = *dt;
  p.causal = causal;
  p.scale = static_cast<float>(scale);
  const auto heads_kv = static_cast<std::int64_t>(k.shape(1));
  p.heads_kv = heads_kv == p.heads ? 0 : heads_kv;
  if (cache_seqlens) {
    p.cache_seqlens = table_of("cache_seqlens", *cache_seqlens, q, 1,
                               "[B] = [" + std::to_string(p.batch) + "]", stream);
  }
  if (block_table) {
    const std::string expect = "[B, pages] = [" + std::to_string(p.batch) + ", pages]";
    const std::vector<std::int32_t> table =
        table_of("block_table", *block_table, q, 2, expect, stream);
    if (static_cast<std::int64_t>(block_table->shape(0)) != p.batch) {
      bad_problem("block_table is " + shape_of(*block_table) + "; it must be " + expect +
                  ", one row per sequence");
    }
    const auto pages = static_cast<std::int64_t>(block_table->shape(1));
    p.page_size = static_cast<std::int64_t>(k.shape(2));
    p.seq_kv = pages * p.page_size;
    if (static_cast<std::int64_t>(k.shape(0)) != p.num_pages()) {
      bad_problem("K and V hold " + std::to_string(k.shape(0)) + " pages; a block table of " +
                  std::to_string(pages) + " pages per sequence for B = " + std::to_string(p.batch) +
                  " needs a pool of B * pages = " + std::to_string(p.num_pages()) + layout);
    }
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i] < 0 || table[i] >= p.num_pages()) {
        bad_problem("block_table[" + std::to_string(i / pages) + ", " + std::to_string(i % pages) +
                    "] = " + std::to_string(table[i]) + " is outside [0, " +
                    std::to_string(p.num_pages()) + "): a page index into K and V's pool");
      }
    }
  }
  if (std::string why = validate(p); !why.empty()) bad_problem(why);
  return p;
}

// O and LSE come from flashsteps/__init__.py, made for this problem; a mismatch is a bug there.
void check_outputs(const Problem& p, const Input& q, const Output& o, const Output& lse) {
  const bool o_ok = o.ndim() == 4 && o.dtype() == q.dtype() && contiguous(o) &&
                    o.device_type() == q.device_type() && o.device_id() == q.device_id();
  const bool lse_ok = lse.ndim() == 3 && lse.dtype() == nb::dtype<float>() && contiguous(lse) &&
                      lse.device_type() == q.device_type() && lse.device_id() == q.device_id();
  bool shapes_ok = o_ok && lse_ok;
  for (std::size_t i = 0; shapes_ok && i < 4; ++i)
    shapes_ok = o.shape(i) == q.shape(i) && (i == 3 || lse.shape(i) == q.shape(i));
  if (!shapes_ok) {
    bad_problem("O " + shape_of(o) + " (" + dtype_name(o.dtype()) + ") and LSE " + shape_of(lse) +
                " (" + dtype_name(lse.dtype()) + ") must be contiguous, on Q's device, O " +
                p.name() + "'s [B, H, Sq, D] in Q's dtype and LSE [B, H, Sq] float32");
  }
}

#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

// DeviceInfo of `id` as query_device() reports it, asked once; nullopt with the reason otherwise.
const std::optional<DeviceInfo>& device_info(int id, std::string* why) {
  static std::map<int, std::pair<std::optional<DeviceInfo>, std::string>> known;
  auto it = known.find(id);
  if (it == known.end()) {
    std::string reason;
    int previous = 0;
    const bool had_device = cudaGetDevice(&previous) == cudaSuccess;
    cudaGetLastError();
    std::optional<DeviceInfo> d = query_device(id, &reason);  // sets the device when there is one
    if (had_device && d) FS_CUDA_CHECK(cudaSetDevice(previous));
    it = known.emplace(id, std::make_pair(std::move(d), std::move(reason))).first;
  }
  *why = it->second.second;
  return it->second.first;
}

// Stage::setup() once per device, outside any launch the caller times.
void setup_once(const DeviceInfo& dev) {
  static std::map<int, bool> done;
  if (!done[dev.id]) {
    stage().setup(dev);
    done[dev.id] = true;
  }
}

// The arrays of one call: Q, K, V, O and LSE (the forward's outputs, a backward stage's inputs),
// and for a backward stage dO (an input) and dQ, dK, dV (allocated by flashsteps/__init__.py).
struct Arrays {
  const Input& q;
  const Input& k;
  const Input& v;
  Output o, lse;
  std::optional<Input> dout;
  std::optional<Output> dq, dk, dv;
  std::optional<Input> cache_seqlens, block_table;  // a KV cache's tables (forward only)
  std::uintptr_t stream = 0;                        // the caller's, for the tables' copies
  bool backward() const { return dout.has_value(); }
};

// The call's problem, with what the arrays can get wrong refused, and the stage's kind checked.
Problem checked_problem(const Arrays& a, bool causal, double scale, bool uint16_is_bf16) {
  const Problem p = problem_of(a.q, a.k, a.v, a.cache_seqlens, a.block_table, causal, scale,
                               a.stream, uint16_is_bf16);
  if (a.backward() != (stage().kind() == StageKind::backward)) {
    bad_problem(std::string("it is a ") + std::string(to_string(stage().kind())) +
                " stage: flashsteps." +
                (stage().kind() == StageKind::backward ? "attention_backward" : "attention") +
                "() runs it");
  }
  if (Support s = supports_problem_of(stage(), p); !s) bad_problem(s.reason);
  if (!a.backward()) return p;
  // dO is the caller's: Q's shape, dtype, layout and device; dQ, dK, dV come from __init__.py.
  const Input& dout = *a.dout;
  bool same = dout.ndim() == 4 && dout.dtype() == a.q.dtype() && contiguous(dout) &&
              dout.device_type() == a.q.device_type() && dout.device_id() == a.q.device_id();
  for (std::size_t i = 0; same && i < 4; ++i)
    same = dout.shape(i) == a.q.shape(i);
  if (!same) {
    bad_problem("dO is " + shape_of(dout) + " (" + dtype_name(dout.dtype()) +
                "); it must be O's: contiguous, " + shape_of(a.q) + " in Q's dtype, on Q's device");
  }
  auto check_like = [&](const char* name, const Output& x, const Input& like) {
    bool ok = x.ndim() == 4 && x.dtype() == like.dtype() && contiguous(x) &&
              x.device_type() == like.device_type() && x.device_id() == like.device_id();
    for (std::size_t i = 0; ok && i < 4; ++i)
      ok = x.shape(i) == like.shape(i);
    if (!ok) bad_problem(std::string(name) + " " + shape_of(x) + " must be shaped as its input");
  };
  check_like("dQ", *a.dq, a.q);
  check_like("dK", *a.dk, a.k);
  check_like("dV", *a.dv, a.v);
  return p;
}

#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD

// On the emulator, as `stageNN --emulate` runs it: the arrays are copied into the emulator's
// device memory (DeviceTensors; the outputs poisoned first), the stage launched and run to the
// end, and the outputs (O and LSE, or dQ, dK and dV) copied back into the caller's arrays.
void run_arrays(Arrays& a, bool causal, double scale, bool uint16_is_bf16) {
  const Problem p = checked_problem(a, causal, scale, uint16_is_bf16);
  if (a.q.device_type() != nb::device::cpu::value) {
    bad_problem("the emulator runs CPU arrays (NumPy, PyTorch on the CPU), and Q, K and V are on " +
                device_name(a.q.device_type(), a.q.device_id()) +
                "; leave emulate unset to run them on the GPU, or move them to the CPU");
  }
  check_outputs(p, a.q, a.o, a.lse);
  std::string why;
  const std::optional<DeviceInfo>& dev = device_info(0, &why);
  if (!dev) cannot_run(no_device_reason(stage(), why));
  if (Support s = check_runnable(stage(), p, *dev); !s) cannot_run(s.reason);
  setup_once(*dev);

  auto take = [](const auto& x, auto* to) {
    to->resize(x.size());
    std::memcpy(to->data(), static_cast<const char*>(x.data()), x.nbytes());
  };
  BackwardInputs in{{p, {}, {}, {}, {}}, {}, {}, {}};
  take(a.q, &in.fwd.q);
  take(a.k, &in.fwd.k);
  take(a.v, &in.fwd.v);
  if (a.block_table) take(*a.block_table, &in.fwd.block_table);
  DeviceTensors dt(p, stage().workspace_bytes(p), stage().kind());
  if (a.backward()) {
    take(a.o, &in.o);
    take(a.lse, &in.lse);
    take(*a.dout, &in.dout);
    dt.upload(in);
  } else {
    dt.upload(in.fwd);
  }
  cudaStream_t stream;
  FS_CUDA_CHECK(cudaStreamCreate(&stream));
  dt.poison(stream);
  try {
    stage().launch(p, dt.args(), stream);
    FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (const std::invalid_argument&) {
    cudaStreamDestroy(stream);
    throw;
  } catch (const std::exception& e) {
    // A fault or a deadlock: the emulator's report, as the emulated runner prints it.
    cudaStreamDestroy(stream);
    throw std::runtime_error(std::string(stage().name()) +
                             ": the launch failed on the emulator: " + e.what());
  }
  FS_CUDA_CHECK(cudaStreamDestroy(stream));
  auto give = [](const auto& from, Output& to) {
    std::memcpy(to.data(), from.data(), from.size() * sizeof(from[0]));
  };
  if (a.backward()) {
    give(dt.download_dq(), *a.dq);
    give(dt.download_dk(), *a.dk);
    give(dt.download_dv(), *a.dv);
  } else {
    give(dt.download_o(), a.o);
    give(dt.download_lse(), a.lse);
  }
}

#else

// Makes `id` the current device until the scope ends, as a caller on another device expects.
class DeviceScope {
 public:
  explicit DeviceScope(int id) {
    FS_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != id) FS_CUDA_CHECK(cudaSetDevice(id));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

// On the GPU, zero-copy: the kernels read Q, K, V (and a backward stage's O, LSE, dO) and write
// O and LSE (or dQ, dK, dV) where the caller's arrays are, enqueued on `stream` (the caller's
// current stream, from flashsteps/__init__.py), without synchronising. A stage's workspace (the
// unfused stages keep S there) is taken and given back in stream order (cudaMallocAsync /
// cudaFreeAsync).
// UNTESTED on hardware: written without a GPU (CONTRIBUTING.md, "The Python package").
void run_arrays(Arrays& a, bool causal, double scale, std::uintptr_t stream_handle,
                bool uint16_is_bf16) {
  const Problem p = checked_problem(a, causal, scale, uint16_is_bf16);
  const bool on_cuda = a.q.device_type() == nb::device::cuda::value;
  std::string why;
  const std::optional<DeviceInfo>& dev = device_info(on_cuda ? a.q.device_id() : 0, &why);
  if (!dev) cannot_run(no_device_reason(stage(), why));
  if (!on_cuda) {
    bad_problem("Q, K and V are on " + device_name(a.q.device_type(), a.q.device_id()) +
                "; the GPU build runs CUDA arrays, and nothing is copied here: move them to the "
                "GPU, or pass emulate=True to run the stage's kernels on the CPU emulator");
  }
  check_outputs(p, a.q, a.o, a.lse);
  // check_runnable() without its free-memory test: the arrays are allocated already.
  if (Support s = supports_device(stage(), *dev); !s) cannot_run(s.reason);
  if (Support s = stage().supports(p, *dev); !s) cannot_run(s.reason);

  DeviceScope scope(dev->id);
  setup_once(*dev);
  auto stream = reinterpret_cast<cudaStream_t>(stream_handle);
  AttentionArgs args;
  args.q = a.q.data();
  args.k = a.k.data();
  args.v = a.v.data();
  args.o = a.o.data();
  args.lse = static_cast<float*>(a.lse.data());
  if (a.cache_seqlens)
    args.cache_seqlens = static_cast<const std::int32_t*>(a.cache_seqlens->data());
  if (a.block_table) args.block_table = static_cast<const std::int32_t*>(a.block_table->data());
  if (a.backward()) {
    args.dout = a.dout->data();
    args.dq = a.dq->data();
    args.dk = a.dk->data();
    args.dv = a.dv->data();
  }
  const std::int64_t ws = stage().workspace_bytes(p);
  if (ws > 0) {
    if (cudaMallocAsync(&args.workspace, static_cast<std::size_t>(ws), stream) != cudaSuccess) {
      cudaGetLastError();
      cannot_run("needs " + std::to_string(ws) + " bytes of device workspace for " + p.name() +
                 ", which " + dev->name + " could not allocate now (cudaMallocAsync)");
    }
  }
  try {
    stage().launch(p, args, stream);
  } catch (...) {
    if (args.workspace) cudaFreeAsync(args.workspace, stream);
    throw;
  }
  if (args.workspace) FS_CUDA_CHECK(cudaFreeAsync(args.workspace, stream));
}

#endif

// A forward stage: Q, K, V -> O, LSE.
void run(const Input& q, const Input& k, const Input& v, Output o, Output lse,
         std::optional<Input> cache_seqlens, std::optional<Input> block_table, bool causal,
         double scale, [[maybe_unused]] std::uintptr_t stream, bool uint16_is_bf16) {
  Arrays a{q,
           k,
           v,
           o,
           lse,
           std::nullopt,
           std::nullopt,
           std::nullopt,
           std::nullopt,
           cache_seqlens,
           block_table,
           stream};
#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD
  run_arrays(a, causal, scale, uint16_is_bf16);
#else
  run_arrays(a, causal, scale, stream, uint16_is_bf16);
#endif
}

// A backward stage: Q, K, V, O, LSE, dO -> dQ, dK, dV.
void run_backward(const Input& q, const Input& k, const Input& v, Output o, Output lse,
                  const Input& dout, Output dq, Output dk, Output dv, bool causal, double scale,
                  [[maybe_unused]] std::uintptr_t stream, bool uint16_is_bf16) {
  Arrays a{q, k, v, o, lse, dout, dq, dk, dv, std::nullopt, std::nullopt, stream};
#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD
  run_arrays(a, causal, scale, uint16_is_bf16);
#else
  run_arrays(a, causal, scale, stream, uint16_is_bf16);
#endif
}

// The stage as stages() reports it: the head dims and dtypes its supports_problem() accepts
// (asked for every D up to the project's limit, causal and not), and what it needs.
nb::dict info() {
  nb::dict d;
  d["name"] = std::string(stage().name());
  d["title"] = std::string(stage().title());
  d["kind"] = std::string(to_string(stage().kind()));
  d["min_compute_capability"] = stage().min_compute_capability();
  d["gpu_requirement"] = stage().gpu_requirement();
  d["deterministic_mode"] = stage().deterministic_mode();
  std::vector<std::int64_t> dims;
  std::vector<std::string> dtypes;
  for (DType t : {DType::fp16, DType::bf16}) {
    bool any = false;
    for (std::int64_t dim = 1; dim <= kMaxHeadDim; ++dim) {
      bool ok = true;
      for (bool causal : {false, true}) {
        Problem p;
        p.head_dim = dim;
        p.dtype = t;
        p.causal = causal;
        ok = ok && validate(p).empty() && supports_problem_of(stage(), p);
      }
      any = any || ok;
      if (ok && t == DType::fp16) dims.push_back(dim);
    }
    if (any) dtypes.emplace_back(to_string(t));
  }
  d["head_dims"] = dims;
  d["dtypes"] = dtypes;
  d["emulated"] = kEmulated;
  const KvCacheSupport kv = stage().kv_cache();
  nb::dict kv_cache;
  kv_cache["grouped"] = kv.grouped;
  kv_cache["cache_seqlens"] = kv.cache_seqlens;
  kv_cache["paged"] = kv.paged;
  kv_cache["page_multiple"] = kv.page_multiple;
  d["kv_cache"] = kv_cache;
  return d;
}

// Whether a device this build can run on is there, and if not, the runners' refusal saying why.
nb::tuple device_available() {
  std::string why;
  const bool ok = device_info(0, &why).has_value();
  return nb::make_tuple(
      ok, ok ? std::string() : refusal(stage().name(), no_device_reason(stage(), why)));
}

}  // namespace

namespace flashsteps::python {

void define_stage_module(nb::module_& m) {
  m.doc() = "One flashsteps stage (private: use the flashsteps package).";
  m.def("info", &info);
  m.def("device_available", &device_available);
  m.def("run", &run, nb::arg("q").noconvert(), nb::arg("k").noconvert(), nb::arg("v").noconvert(),
        nb::arg("o").noconvert(), nb::arg("lse").noconvert(),
        nb::arg("cache_seqlens").noconvert().none(), nb::arg("block_table").noconvert().none(),
        nb::arg("causal"), nb::arg("scale"), nb::arg("stream"), nb::arg("uint16_is_bf16"));
  m.def("run_backward", &run_backward, nb::arg("q").noconvert(), nb::arg("k").noconvert(),
        nb::arg("v").noconvert(), nb::arg("o").noconvert(), nb::arg("lse").noconvert(),
        nb::arg("dout").noconvert(), nb::arg("dq").noconvert(), nb::arg("dk").noconvert(),
        nb::arg("dv").noconvert(), nb::arg("causal"), nb::arg("scale"), nb::arg("stream"),
        nb::arg("uint16_is_bf16"));
#if defined(FLASHSTEPS_EMULATED_BUILD) && FLASHSTEPS_EMULATED_BUILD
  m.def("layout", [] {
    std::ostringstream out;
    print_layout(stage(), out);
    return out.str();
  });
#endif
}

}  // namespace flashsteps::python
