// Symbolizer: return addresses of a (possibly finished) process to functions, files and lines,
// through elfutils libdw, from the binaries on disk and the process's module list.
#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_map>

#include "profiler/record/stacks.h"

namespace tidemark::record {

namespace {

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;  // a C name, or not a mangled one
  std::string s(out);
  std::free(out);
  return s;
}

// "f(int) [clone .constprop.0]", "f(int) [clone .cold]": gcc's copies of f are f.
void strip_clone_suffix(std::string& name) {
  size_t at = name.find(" [clone ");
  if (at != std::string::npos) name.resize(at);
}

// Symbol table names may carry a version ("__libc_start_main@@GLIBC_2.34"); mangled names
// never hold '@'.
std::string demangled_symbol(const char* name) {
  if (name == nullptr) return {};
  std::string s = demangle(std::string(name, std::strcspn(name, "@")).c_str());
  strip_clone_suffix(s);
  return s;
}

// DWARF spells base types as gcc does ("long unsigned int"), the demangler otherwise.
const char* demangler_spelling(const char* base_type) {
  static const std::pair<const char*, const char*> kSpellings[] = {
      {"long int", "long"},           {"long unsigned int", "unsigned long"},
      {"short int", "short"},         {"short unsigned int", "unsigned short"},
      {"long long int", "long long"}, {"long long unsigned int", "unsigned long long"},
  };
  for (auto [dwarf, demangler] : kSpellings)
    if (std::strcmp(base_type, dwarf) == 0) return demangler;
  return base_type;
}

Dwarf_Die* follow(Dwarf_Die* die, int at, Dwarf_Die* out) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, at, &attr) != nullptr ? dwarf_formref_die(&attr, out) : nullptr;
}

// Note [Function names from DWARF]
// A DIE's demangled DW_AT_linkage_name is the name the symbol table gives its out-of-line
// copy: `ns::f(int)`. gcc omits the linkage name for functions of internal linkage (anonymous
// namespaces, static), so for those the name is built from the DIE tree in the demangler's
// style: enclosing namespaces and classes, then the parameter types, so that an inlined frame
// reads like the out-of-line frame of the same function.
class DwarfNames {
 public:
  static std::string linkage_name(Dwarf_Die* die) {
    Dwarf_Attribute attr;
    for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
      if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
        if (const char* s = dwarf_formstring(&attr)) return demangled_symbol(s);
      }
    }
    return {};
  }

  std::string function(Dwarf_Die* die) {
    if (std::string name = linkage_name(die); !name.empty()) return name;
    // The declaration: an inlined instance's abstract origin, a definition's specification.
    Dwarf_Die origin_mem, spec_mem;
    Dwarf_Die* decl = die;
    if (Dwarf_Die* origin = follow(decl, DW_AT_abstract_origin, &origin_mem)) decl = origin;
    if (Dwarf_Die* spec = follow(decl, DW_AT_specification, &spec_mem)) decl = spec;
    const char* name = dwarf_diename(decl);
    if (name == nullptr) return {};
    auto [it, inserted] = functions_.try_emplace(dwarf_dieoffset(decl));
    if (inserted) it->second = qualifier(decl) + name + parameters(decl);
    return it->second;
  }

 private:
  // "ns::Class::" for a DIE inside namespace ns, class Class.
  std::string qualifier(Dwarf_Die* die) {
    Dwarf_Die* scopes = nullptr;
    int n = dwarf_getscopes_die(die, &scopes);
    std::string q;
    for (int i = n - 1; i >= 1; --i) {  // [0] is the DIE itself, [n - 1] its CU
      int tag = dwarf_tag(&scopes[i]);
      const char* name = dwarf_diename(&scopes[i]);
      if (tag == DW_TAG_namespace) {
        q += name != nullptr ? name : "(anonymous namespace)";
        q += "::";
      } else if (tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
                 tag == DW_TAG_union_type) {
        q += name != nullptr ? name : "{unnamed type}";
        q += "::";
      }
    }
    std::free(scopes);
    return q;
  }

  std::string parameters(Dwarf_Die* decl) {
    std::string params = "(";
    bool first = true, const_method = false;
    Dwarf_Die child;
    if (dwarf_child(decl, &child) == 0) {
      do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_formal_parameter && dwarf_hasattr(&child, DW_AT_artificial)) {
          // `this`: a pointer to a const class makes a const method.
          Dwarf_Die ptr, pointee;
          const_method = follow(&child, DW_AT_type, &ptr) != nullptr &&
                         follow(&ptr, DW_AT_type, &pointee) != nullptr &&
                         dwarf_tag(&pointee) == DW_TAG_const_type;
          continue;
        }
        if (tag != DW_TAG_formal_parameter && tag != DW_TAG_unspecified_parameters) continue;
        if (!first) params += ", ";
        first = false;
        Dwarf_Die type;
        params += tag == DW_TAG_unspecified_parameters           ? "..."
                  : follow(&child, DW_AT_type, &type) != nullptr ? type_name(&type, 0)
                                                                 : "void";
      } while (dwarf_siblingof(&child, &child) == 0);
    }
    params += ")";
    if (const_method) params += " const";
    return params;
  }

  // In the demangler's spelling: typedefs resolved, "int const*", "ns::T&".
  std::string type_name(Dwarf_Die* type, int depth) {
    if (depth > 16) return "?";
    Dwarf_Die inner_mem;
    Dwarf_Die* inner = follow(type, DW_AT_type, &inner_mem);
    auto wrap = [&](const char* suffix) {
      return (inner != nullptr ? type_name(inner, depth + 1) : std::string("void")) + suffix;
    };
    switch (dwarf_tag(type)) {
      case DW_TAG_pointer_type:
        return wrap("*");
      case DW_TAG_reference_type:
        return wrap("&");
      case DW_TAG_rvalue_reference_type:
        return wrap("&&");
      case DW_TAG_const_type:
        return wrap(" const");
      case DW_TAG_volatile_type:
        return wrap(" volatile");
      case DW_TAG_typedef:
        return inner != nullptr ? type_name(inner, depth + 1) : "?";
      case DW_TAG_base_type: {
        const char* name = dwarf_diename(type);
        return name != nullptr ? demangler_spelling(name) : "?";
      }
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
      case DW_TAG_union_type:
      case DW_TAG_enumeration_type: {
        auto [it, inserted] = types_.try_emplace(dwarf_dieoffset(type));
        if (inserted) {
          const char* name = dwarf_diename(type);
          it->second = name != nullptr ? qualifier(type) + name : "{unnamed type}";
        }
        return it->second;
      }
      default:
        return "?";  // arrays, function and member pointers: rare as parameters
    }
  }

  // By DIE offset, which is unique within one module's DWARF (Impl keeps one per module).
  std::unordered_map<Dwarf_Off, std::string> functions_, types_;
};

// Where an inlined_subroutine was called from: a line of the function it was inlined into.
void call_site(Dwarf_Die* inlined, Dwarf_Die* cu, std::string& file, int& line) {
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  file.clear();
  line = 0;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &value) == 0)
    line = static_cast<int>(value);
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &value) == 0 &&
      dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && value < nfiles) {
    if (const char* s = dwarf_filesrc(files, value, nullptr, nullptr)) file = s;
  }
}

// The load bias of `m`'s file: the difference between run-time and link-time addresses. The
// mapping [start, end) shows file bytes from file_offset on; the PT_LOAD segment holding those
// bytes says at which link-time address they belong.
bool load_bias(Elf* elf, const store::ModuleInfo& m, uint64_t& bias) {
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf, &ehdr) == nullptr) return false;
  bias = 0;
  if (ehdr.e_type == ET_EXEC) return true;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return false;
  bool found = false;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    uint64_t size = m.end - m.start;
    bool overlaps = m.file_offset < ph.p_offset + ph.p_filesz && ph.p_offset < m.file_offset + size;
    if (!overlaps || (found && !(ph.p_flags & PF_X))) continue;  // prefer the executable one
    // address(offset x) = bias + p_vaddr + (x - p_offset), and address(file_offset) = start.
    bias = m.start - ph.p_vaddr + ph.p_offset - m.file_offset;
    found = true;
  }
  return found;
}

// Offline callbacks: modules are reported by file, never by attaching to a process.
char* g_debuginfo_path = nullptr;  // libdw's default search path (/usr/lib/debug, .debug)
const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

}  // namespace

struct Symbolizer::Impl {
  Dwfl* dwfl = nullptr;
  std::vector<store::ModuleInfo> modules;  // sorted by start
  std::unordered_map<uint64_t, std::vector<store::ResolvedFrame>> cache;
  std::unordered_map<Dwfl_Module*, DwarfNames> names;

  const store::ModuleInfo* module_at(uint64_t addr) const {
    auto it = std::upper_bound(modules.begin(), modules.end(), addr,
                               [](uint64_t a, const store::ModuleInfo& m) { return a < m.start; });
    if (it == modules.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  }

  void report_modules() {
    dwfl_report_begin(dwfl);
    // A file has several executable mappings at times (and all its mappings share one bias):
    // report each (file, bias) once.
    std::set<std::pair<std::string, uint64_t>> reported;
    for (const store::ModuleInfo& m : modules) {
      int fd = open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;  // gone since recording: its frames keep only the module path
      Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
      uint64_t bias = 0;
      bool known = elf != nullptr && load_bias(elf, m, bias);
      if (elf != nullptr) elf_end(elf);
      close(fd);
      if (!known || !reported.emplace(m.path, bias).second) continue;
      // With add_p_vaddr, `base` is the bias; libdwfl opens the file itself (fd -1).
      dwfl_report_elf(dwfl, m.path.c_str(), m.path.c_str(), -1, bias, true);
    }
    dwfl_report_end(dwfl, nullptr, nullptr);
  }

  std::vector<store::ResolvedFrame> resolve(uint64_t addr);
};

// Note [Inlined frames]
// dwarf_getscopes finds the innermost scope at an address; past an inlined_subroutine it
// continues with the scopes around the inlined function's abstract definition, not around its
// caller. So it serves only to find the innermost function DIE; dwarf_getscopes_die then walks
// the concrete DIE tree outwards: each inlined_subroutine up to the physical subprogram is a
// frame, and its DW_AT_call_file/call_line is the location in the next frame out (the
// approach of eu-addr2line -i). The innermost frame's location comes from the line table.
std::vector<store::ResolvedFrame> Symbolizer::Impl::resolve(uint64_t addr) {
  const store::ModuleInfo* info = module_at(addr);
  Dwfl_Module* mod = dwfl != nullptr ? dwfl_addrmodule(dwfl, addr) : nullptr;
  if (mod == nullptr) {
    if (info == nullptr) return {};
    return {store::ResolvedFrame{{}, {}, 0, false, info->path}};
  }
  std::string module;
  if (info != nullptr) {
    module = info->path;
  } else if (const char* name = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                 nullptr, nullptr)) {
    module = name;
  }

  std::string file;
  int line = 0;
  if (Dwfl_Line* l = dwfl_module_getsrc(mod, addr)) {
    if (const char* f = dwfl_lineinfo(l, nullptr, &line, nullptr, nullptr, nullptr)) file = f;
  }

  std::vector<store::ResolvedFrame> frames;
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(mod, addr, &bias);
  Dwarf_Die* scopes = nullptr;
  int nscopes = cu != nullptr ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
  Dwarf_Die* innermost = nullptr;
  for (int i = 0; i < nscopes && innermost == nullptr; ++i) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) innermost = &scopes[i];
  }
  Dwarf_Die* chain = nullptr;
  int nchain = innermost != nullptr ? dwarf_getscopes_die(innermost, &chain) : 0;
  DwarfNames& module_names = names[mod];
  GElf_Off offset = 0;
  GElf_Sym sym;
  bool physical = false;
  for (int i = 0; i < nchain && !physical; ++i) {
    int tag = dwarf_tag(&chain[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
    physical = tag == DW_TAG_subprogram;
    std::string function;
    if (physical) {
      // The symbol table spells the physical function's name best when DWARF has no
      // linkage name (Note [Function names from DWARF]).
      function = DwarfNames::linkage_name(&chain[i]);
      if (function.empty())
        function = demangled_symbol(
            dwfl_module_addrinfo(mod, addr, &offset, &sym, nullptr, nullptr, nullptr));
    }
    if (function.empty()) function = module_names.function(&chain[i]);
    frames.push_back(store::ResolvedFrame{std::move(function), file, line, !physical, module});
    if (!physical) call_site(&chain[i], cu, file, line);
  }
  std::free(chain);
  std::free(scopes);

  // No DWARF here (a stripped library): the symbol table still names the function.
  if (!physical) {
    const char* name = dwfl_module_addrinfo(mod, addr, &offset, &sym, nullptr, nullptr, nullptr);
    frames.push_back(store::ResolvedFrame{demangled_symbol(name), file, line, false, module});
  }
  return frames;
}

Symbolizer::Symbolizer(std::vector<store::ModuleInfo> modules) : impl_(std::make_unique<Impl>()) {
  impl_->modules = std::move(modules);
  std::sort(
      impl_->modules.begin(), impl_->modules.end(),
      [](const store::ModuleInfo& a, const store::ModuleInfo& b) { return a.start < b.start; });
  elf_version(EV_CURRENT);
  impl_->dwfl = dwfl_begin(&kCallbacks);
  if (impl_->dwfl != nullptr) impl_->report_modules();
}

Symbolizer::~Symbolizer() {
  if (impl_->dwfl != nullptr) dwfl_end(impl_->dwfl);
}

std::vector<store::ResolvedFrame> Symbolizer::resolve(uint64_t ip) {
  auto it = impl_->cache.find(ip);
  if (it != impl_->cache.end()) return it->second;
  // A return address points after the call instruction; ip - 1 lies inside it.
  std::vector<store::ResolvedFrame> frames = ip != 0 ? impl_->resolve(ip - 1) : decltype(frames){};
  impl_->cache.emplace(ip, frames);
  return frames;
}

}  // namespace tidemark::record
