// emu/src/access.cpp — the observers of fsemu/access.hpp, and naming the code that made an access.
#include "fsemu/access.hpp"

#include <dlfcn.h>
#include <link.h>      // ElfW
#include <sys/auxv.h>  // getauxval

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

namespace fsemu::access {
namespace detail {
Observer g_observers[kMaxObservers] = {};
int g_count = 0;
int g_read_count = 0;
int g_readers[kMaxObservers] = {};
int g_next_handle = 0;
bool g_instrumented = false;
bool g_dispatching = false;
}  // namespace detail

namespace {
// g_readers from g_observers, after any change to either.
void list_readers() {
  detail::g_read_count = 0;
  for (int i = 0; i < detail::g_count; ++i)
    if (detail::g_observers[i].plain_reads) detail::g_readers[detail::g_read_count++] = i;
}
}  // namespace

int attach(Callback fn, void* context) {
  if (detail::g_count == kMaxObservers) {
    std::fprintf(stderr, "fsemu: more than %d access observers attached\n", kMaxObservers);
    std::abort();
  }
  const int handle = detail::g_next_handle++;
  detail::g_observers[detail::g_count++] = {fn, context, handle};
  list_readers();
  return handle;
}

void detach(int handle) {
  // Observers keep the order they were attached in; detaching one moves those after it down.
  int at = 0;
  while (at < detail::g_count && detail::g_observers[at].handle != handle)
    ++at;
  if (at == detail::g_count) return;
  for (int i = at; i + 1 < detail::g_count; ++i)
    detail::g_observers[i] = detail::g_observers[i + 1];
  --detail::g_count;
  list_readers();
}

void skip_reads(int handle, int slot, const void* begin, std::size_t bytes) {
  for (int i = 0; i < detail::g_count; ++i)
    if (detail::g_observers[i].handle == handle) {
      detail::g_observers[i].skip_begin[slot] = reinterpret_cast<std::uintptr_t>(begin);
      detail::g_observers[i].skip_bytes[slot] = bytes;
    }
}

void filter(int handle, const void* only, std::size_t only_bytes, const void* ignore,
            std::size_t ignore_bytes) {
  for (int i = 0; i < detail::g_count; ++i)
    if (detail::g_observers[i].handle == handle) {
      detail::g_observers[i].only_begin = reinterpret_cast<std::uintptr_t>(only);
      detail::g_observers[i].only_bytes = only_bytes;
      detail::g_observers[i].ignore_begin = reinterpret_cast<std::uintptr_t>(ignore);
      detail::g_observers[i].ignore_bytes = ignore_bytes;
    }
}

void plain_reads(int handle, bool wanted) {
  for (int i = 0; i < detail::g_count; ++i)
    if (detail::g_observers[i].handle == handle) detail::g_observers[i].plain_reads = wanted;
  list_readers();
}

namespace detail {
void dispatch_from(int first, void* addr, std::uint32_t size, bool write, bool atomic,
                   const void* pc) {
  struct Scope {  // an observer may end the launch by throwing (fsemu::fault)
    Scope() { g_dispatching = true; }
    ~Scope() { g_dispatching = false; }
  } scope;
  const Access a{addr, size, write, atomic, pc};
  g_observers[first].fn(g_observers[first].context, a);
  for (int i = first + 1; i < g_count; ++i)
    if (!skips(g_observers[i], addr, size, write, atomic))
      g_observers[i].fn(g_observers[i].context, a);
}
}  // namespace detail

bool instrumented() {
  return detail::g_instrumented;
}

namespace {

struct Frame {
  std::string function, line;  // line: "file:line", or "" when unknown
};

// addr2line on the object holding `code`: the function and line there, then (-i) the functions
// it is inlined into, innermost first.
std::vector<Frame> frames(const void* code) {
  Dl_info info{};
  if (!code || !dladdr(code, &info) || !info.dli_fname) return {};
  // The main program's dli_fname is the argv[0] it was started with, which may name another file
  // (a runner's --emulate execs its emulated build under its own argv[0]): read the program
  // itself (the target of this process's /proc/self/exe) when `code` lies in it, the object
  // that holds its program headers.
  std::string file = info.dli_fname;
  Dl_info program{};
  std::error_code ec;
  if (dladdr(reinterpret_cast<const void*>(getauxval(AT_PHDR)), &program) &&
      program.dli_fbase == info.dli_fbase) {
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) file = self.string();
  }
  // addr2line takes an offset into a position-independent object, an absolute address into a
  // fixed-position executable.
  auto addr = reinterpret_cast<std::uintptr_t>(code);
  const auto* ehdr = static_cast<const ElfW(Ehdr)*>(info.dli_fbase);
  if (ehdr && ehdr->e_type == ET_DYN) addr -= reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  std::ostringstream cmd;
  cmd << "addr2line -C -f -i -e '" << file << "' 0x" << std::hex << addr << " 2>/dev/null";
  std::vector<Frame> out;
  if (FILE* p = popen(cmd.str().c_str(), "r")) {
    char f[8192], l[4096];
    while (std::fgets(f, sizeof f, p) && std::fgets(l, sizeof l, p)) {
      Frame fr{f, l};
      for (std::string* s : {&fr.function, &fr.line})
        while (!s->empty() && (s->back() == '\n' || s->back() == '\r'))
          s->pop_back();
      if (const auto disc = fr.line.find(" (discriminator"); disc != std::string::npos)
        fr.line.erase(disc);
      if (fr.line.rfind("??", 0) == 0) fr.line.clear();
      if (fr.function == "??") fr.function = info.dli_sname ? info.dli_sname : "";
      out.push_back(fr);
    }
    pclose(p);
  }
  return out;
}

}  // namespace

// The name without its return type ("void " of a template) and parameter list: cut at the first
// '(' outside template arguments and lambda names that does not open "(anonymous namespace)".
std::string without_signature(std::string f) {
  if (f.rfind("void ", 0) == 0) f.erase(0, 5);
  int depth = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '<' || c == '{') ++depth;
    if (c == '>' || c == '}') --depth;
    if (c == '(' && i >= 8 && f.compare(i - 8, 10, "operator()") == 0) {  // a lambda's call
      ++i;
      continue;
    }
    if (c == '(' && depth == 0 && f.compare(i, 21, "(anonymous namespace)") != 0) {
      f.erase(i);
      break;
    }
  }
  return f;
}

std::string describe_pc(const void* pc) {
  if (!pc) return "an unknown code address";
  // The call instruction is just before the return address.
  const std::vector<Frame> fs = frames(static_cast<const char*>(pc) - 1);
  if (fs.empty()) return "an unknown code address";
  std::string s;
  for (std::size_t i = 0; i < fs.size() && i < 3; ++i) {
    if (i > 0) s += ", inlined into ";
    s += without_signature(fs[i].function);
    s += fs[i].line.empty() ? " (no line information)" : " (" + fs[i].line + ")";
  }
  return s;
}

std::string function_name(const void* code) {
  const std::vector<Frame> fs = frames(code);
  return fs.empty() ? std::string() : without_signature(fs.back().function);
}

}  // namespace fsemu::access
