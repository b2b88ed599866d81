/*
 * Which library serves MLX's matrix products in this process. The plugin exports its own
 * cblas_sgemm (cpu/sgemm/sgemm.c), and libmlx's binds to it, but that holds only when the plugin
 * loads libmlx: a process that imported MLX first (Python's `import mlx.core` binds every symbol at
 * load) keeps the reference BLAS bundled with the wheel for MLX's own products, much slower
 * (the host kernels call the plugin's product directly either way). This file reads the address
 * libmlx's relocation slot for cblas_sgemm holds (through the loader's program headers and libmlx's
 * dynamic relocations, without calling MLX), names the library it lies in, and compares it with the
 * cblas_sgemm the plugin's own dependency order finds. It only looks: nothing is rebound.
 */
#include "cpu/blas_binding.h"

#include <stdio.h>

#if defined(__linux__) && defined(__LP64__)
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#define SGEMM "cblas_sgemm"

typedef struct slot_search {
  void *bound;     /* what libmlx's slot holds; NULL when not found */
  uintptr_t base;  /* libmlx's load address */
} slot_search;

/* The loader stores most dynamic-table addresses relocated already; some platforms keep them as
 * offsets from the load base. */
static uintptr_t dyn_address(uintptr_t base, uintptr_t value) {
  return value < base ? base + value : value;
}

static void *slot_in_table(uintptr_t base, const ElfW(Rela) *rel, size_t bytes,
                           const ElfW(Sym) *syms, const char *names) {
  for (size_t i = 0; i < bytes / sizeof *rel; i++) {
    const ElfW(Sym) *s = &syms[ELF64_R_SYM(rel[i].r_info)];
    if (ELF64_R_SYM(rel[i].r_info) != 0 && strcmp(names + s->st_name, SGEMM) == 0)
      return *(void **)(base + rel[i].r_offset);
  }
  return NULL;
}

static int find_mlx_slot(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  slot_search *search = data;
  const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  if (!name || strcmp(name, "/libmlx.so") != 0) return 0;
  uintptr_t base = info->dlpi_addr;
  search->base = base;
  for (int p = 0; p < info->dlpi_phnum; p++) {
    if (info->dlpi_phdr[p].p_type != PT_DYNAMIC) continue;
    const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(base + info->dlpi_phdr[p].p_vaddr);
    const ElfW(Sym) *syms = NULL;
    const char *names = NULL;
    const ElfW(Rela) *plt = NULL, *rela = NULL;
    size_t plt_bytes = 0, rela_bytes = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
      uintptr_t v = dyn->d_un.d_ptr;
      switch (dyn->d_tag) {
      case DT_SYMTAB: syms = (const ElfW(Sym) *)dyn_address(base, v); break;
      case DT_STRTAB: names = (const char *)dyn_address(base, v); break;
      case DT_JMPREL: plt = (const ElfW(Rela) *)dyn_address(base, v); break;
      case DT_PLTRELSZ: plt_bytes = dyn->d_un.d_val; break;
      case DT_RELA: rela = (const ElfW(Rela) *)dyn_address(base, v); break;
      case DT_RELASZ: rela_bytes = dyn->d_un.d_val; break;
      default: break;
      }
    }
    if (!syms || !names) return 1;
    void *bound = plt ? slot_in_table(base, plt, plt_bytes, syms, names) : NULL;
    if (!bound && rela) bound = slot_in_table(base, rela, rela_bytes, syms, names);
    search->bound = bound;
  }
  return 1;
}

/* The cblas_sgemm this plugin's lookup scope finds: the plugin's own. */
static void *plugin_sgemm(void) {
  Dl_info self;
  if (!dladdr((void *)&cpu_blas_binding_check, &self) || !self.dli_fname) return NULL;
  void *handle = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return NULL;
  void *f = dlsym(handle, SGEMM);
  dlclose(handle);
  return f;
}

static const char *library_of(void *address) {
  Dl_info info;
  return address && dladdr(address, &info) && info.dli_fname ? info.dli_fname : "(unknown)";
}

bool cpu_blas_binding_check(char *note, size_t note_size) {
  slot_search search = {0};
  dl_iterate_phdr(find_mlx_slot, &search);
  void *intended = plugin_sgemm();
  if (!search.bound) {
    snprintf(note, note_size, "libmlx's %s slot not found; not checked", SGEMM);
    return true;
  }
  Dl_info at;
  if (dladdr(search.bound, &at) && (uintptr_t)at.dli_fbase == search.base) {
    snprintf(note, note_size, "libmlx's %s is not bound yet (lazy binding); not checked", SGEMM);
    return true;
  }
  const char *serving = library_of(search.bound);
  if (!intended || search.bound == intended) {
    snprintf(note, note_size, "MLX's matrix products use %s", serving);
    return true;
  }
  snprintf(note, note_size,
           "MLX's matrix products use %s, not %s: MLX was loaded before this plugin (e.g. "
           "`import mlx.core` ran first) and bound its BLAS then, which makes MLX's own "
           "products much slower. Load the plugin first (import onnxruntime_ep_mlx before mlx), "
           "set ONNXRUNTIME_EP_MLX_PRELOAD=1 (installed from the wheel), or start the process "
           "with LD_PRELOAD=%s",
           serving, library_of(intended), library_of(intended));
  return false;
}

#else

bool cpu_blas_binding_check(char *note, size_t note_size) {
  snprintf(note, note_size, "BLAS binding not checked on this platform");
  return true;
}

#endif
