/*
 * MLX's fused CPU kernels built for this CPU, an opt-in (ONNXRUNTIME_EP_MLX_AVX2_KERNELS=1). MLX
 * compiles each fused kernel with g++ at run time and passes -mavx2 -mfma only when libmlx itself
 * was built for AVX2, which the PyPI wheel is not, so on x86 every fused kernel is SSE2 code. A
 * kernel's source includes "mlx/backend/cpu/compiled_preamble.h", and a quoted include is looked
 * up first beside the source, in MLX's kernel cache folder (the temporary folder, then
 * mlx/<version>/cpu). On a CPU with AVX2, FMA and F16C, this file puts a header there that turns
 * those instructions on for the rest of the kernel and includes MLX's own preamble. Contraction
 * of a*b+c into fma stays off, so results keep the bits of the SSE2 build; FP operations are
 * declared not to trap and math functions not to set errno (neither changes a value). Kernels
 * the cache holds from before the header was written are removed, so MLX builds them again.
 * That folder is shared with every MLX process of the user (and survives this one, and is
 * shared by machines that share TMPDIR), which is why it is never written unless the user asks:
 * MLX offers no per-process kernel folder or compiler flags, so there is no private way.
 */
#include "cpu/kernel_cache.h"

#include "mlx/mx.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREAMBLE "mlx/backend/cpu/compiled_preamble.h"

/* mkdir -p for the folders above path's last component. */
static bool make_parents(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int rc = mkdir(path, 0755);
    *p = '/';
    if (rc != 0 && errno != EEXIST) return false;
  }
  return true;
}

/* Whether the file at path holds text (whole) or starts with it (prefix). */
static bool holds_text(const char *path, const char *text, bool prefix) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return prefix ? strncmp(buf, text, strlen(text)) == 0 : strcmp(buf, text) == 0;
}

/* Kernels in the cache were built without the header just written (none, or an older one):
 * removed, so MLX builds them again with it. A process that has one loaded keeps its copy. */
static void forget_kernels(const char *header) {
  char dir[4096];
  size_t cut = strlen(header) - strlen(PREAMBLE);
  if (cut >= sizeof dir) return;
  memcpy(dir, header, cut);
  dir[cut] = 0;
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    bool lib = n > 6 && !strncmp(e->d_name, "lib", 3) && !strcmp(e->d_name + n - 3, ".so");
    bool src = n > 4 && !strcmp(e->d_name + n - 4, ".cpp");
    if (!lib && !src) continue;
    char path[4096 + 256];
    snprintf(path, sizeof path, "%s%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
}

const char *cpu_kernel_cache_use_avx2(void) {
#if defined(__x86_64__) && defined(__linux__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !__builtin_cpu_supports("f16c"))
    return "the CPU lacks AVX2, FMA or F16C";
  char own[4096], shim[4096], tmp[4200], text[4608];
  const char *lib = mx_library_dir(), *tmpdir = NULL;
  /* where std::filesystem::temp_directory_path, which MLX uses, looks */
  const char *vars[] = {"TMPDIR", "TMP", "TEMP", "TEMPDIR"};
  for (int i = 0; i < 4 && !(tmpdir && *tmpdir); i++) tmpdir = getenv(vars[i]);
  if (!lib[0]) return "libmlx's folder is unknown";
  snprintf(own, sizeof own, "%s/../include/" PREAMBLE, lib);
  if (access(own, R_OK) != 0) return "MLX's headers are not installed";
  snprintf(shim, sizeof shim, "%s/mlx/%s/cpu/" PREAMBLE, tmpdir && *tmpdir ? tmpdir : "/tmp",
           mx_version());
  /* The flags: kernels built under other flags are rebuilt; under these same flags from another
   * install of the same MLX (another environment, its own include path), they are kept. */
  static const char flags[] =
      "// Written by onnxruntime-ep-mlx (src/mlx/cpu_kernels.c): MLX's kernels for this CPU.\n"
      "#pragma GCC target(\"avx2,fma,f16c\")\n"
      "#pragma GCC optimize(\"fp-contract=off\", \"no-trapping-math\", \"no-math-errno\")\n";
  snprintf(text, sizeof text, "%s#include \"%s\"\n", flags, own);
  if (holds_text(shim, text, false)) return NULL;
  bool stale = !holds_text(shim, flags, true);
  snprintf(tmp, sizeof tmp, "%s.%ld", shim, (long)getpid());
  if (!make_parents(shim)) return "the kernel cache folder cannot be made";
  FILE *f = fopen(tmp, "w");
  if (!f) return "the kernel cache folder is not writable";
  bool ok = fputs(text, f) >= 0;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, shim) != 0) { /* another process may have won the race: fine */
    unlink(tmp);
    return holds_text(shim, text, false) ? NULL : "the header could not be written";
  }
  if (stale) forget_kernels(shim);
  return NULL;
#else
  return "not an x86-64 Linux build";
#endif
}
