/*
 * Provider options. ORT stores the options given to AppendExecutionProvider_V2 as session config
 * entries named ep.mlxexecutionprovider.<key>; they are read once, when the EP is created.
 * Environment variables exist for debugging and are read here too, so nothing else reads the
 * environment. Unknown values are errors, not silently ignored.
 *   device=cpu|gpu         (default: gpu when MLX has a GPU backend, else cpu)
 *   verbose=0|1            (also ONNXRUNTIME_EP_MLX_VERBOSE=1)
 *   report_file=PATH       (write the partition report as JSON at session creation)
 *   stats_file=PATH        (write the run record as JSON when the session ends: ep/stats.h)
 *   cpu_cache_mb=N         (CPU device: MLX keeps at least N MiB of freed buffers for reuse;
 *                           default 1024, 0 leaves MLX's own limit of 32 MiB)
 *   kernel_cache_dir=PATH  (also ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR; the option wins: the folder
 *                           MLX's CUDA backend keeps compiled kernels in, made at session
 *                           creation and given to MLX as MLX_PTX_CACHE_DIR; ~ is HOME. Unset,
 *                           the EP leaves MLX_PTX_CACHE_DIR alone)
 * Environment only (A/B switches): ONNXRUNTIME_EP_MLX_NO_COMPILE=1 runs every group eagerly;
 * ONNXRUNTIME_EP_MLX_NO_SHAPELESS=1 compiles keyed on input shapes instead of shapeless;
 * ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN=1 keeps LinearAttention on its composed path;
 * ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL=1 keeps compiled groups compiled without timing eager runs;
 * ONNXRUNTIME_EP_MLX_AVX2_KERNELS=1 opts in to MLX's run-time CPU kernels built for AVX2: it writes
 * a header into MLX's kernel cache folder, shared with every MLX process of the user
 *   (cpu/kernel_cache.c); by default nothing is written there;
 * ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM=1 hands MLX's CPU matrix products to OpenBLAS
 * (cpu/sgemm/sgemm.c); ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM=1 runs them with the portable kernels (for
 * tests); ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM=1 runs them with the AVX2 kernels alone where the
 * processor also has AVX-512 (for tests and A/B); ONNXRUNTIME_EP_MLX_NO_HOST_MATH=1 composes
 * softmax, layer norm and erf on the CPU device from MLX operations instead of running them as host
 * kernels (cpu/math.c); ONNXRUNTIME_EP_MLX_GPU_CROSSING=1 makes the CPU device take a Run's inputs
 * and a plan's constants as the GPU does, read by MLX's loader into its own memory instead of used
 * in place (mlx/host_io.cpp: so the GPU's path is tested without a GPU);
 * ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL=N makes the Nth guarded call into the MLX bridge after the
 * EP's creation fail, once (fault injection: tests walk N to prove every failure path returns an
 * OrtStatus and leaves the session usable); an EP created without it disarms it;
 * ONNXRUNTIME_EP_MLX_SLOW_FIRST_RUN_MS=N sets how long a group's first Run may take before a
 * warning through ORT's logger says where its time went (default 1000; 0 warns always, for tests).
 */
#include "ep/ep_types.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static OrtStatus *read_entry(const OrtApi *ort, const OrtSessionOptions *so, const char *key,
                             char *buf, size_t cap, bool *found) {
  char full[256];
  snprintf(full, sizeof full, "%s%s", EP_OPTION_PREFIX, key);
  int has = 0;
  *found = false;
  OrtStatus *st = ort->HasSessionConfigEntry(so, full, &has);
  if (st || !has) return st;
  size_t size = cap;
  st = ort->GetSessionConfigEntry(so, full, buf, &size);
  if (st) return st;
  *found = true;
  return NULL;
}

static bool env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

OrtStatus *ep_options_parse(const OrtApi *ort, const OrtSessionOptions *so, ep_options *out) {
  memset(out, 0, sizeof *out);
  out->device = mx_device_available(MX_DEVICE_GPU) ? MX_DEVICE_GPU : MX_DEVICE_CPU;
  out->verbose = env_flag("ONNXRUNTIME_EP_MLX_VERBOSE");
  const char *slow = getenv("ONNXRUNTIME_EP_MLX_SLOW_FIRST_RUN_MS");
  out->slow_first_run_ms = slow && *slow ? strtol(slow, NULL, 10) : 1000;
  out->compile = !env_flag("ONNXRUNTIME_EP_MLX_NO_COMPILE");
  out->shapeless = !env_flag("ONNXRUNTIME_EP_MLX_NO_SHAPELESS");
  out->fast_kernels = !env_flag("ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN");
  out->path_trial = !env_flag("ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL");
  out->avx2_kernels = env_flag("ONNXRUNTIME_EP_MLX_AVX2_KERNELS");
  out->own_sgemm = !env_flag("ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM");
  out->portable_sgemm = env_flag("ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM");
  out->avx512_sgemm = !env_flag("ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM");
  out->host_math = !env_flag("ONNXRUNTIME_EP_MLX_NO_HOST_MATH");
  out->gpu_crossing = env_flag("ONNXRUNTIME_EP_MLX_GPU_CROSSING");
  out->cpu_cache_mb = 1024;
  const char *fail = getenv("ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL");
  out->fail_bridge_call = fail ? strtol(fail, NULL, 10) : 0;
  const char *cache_dir = getenv("ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR");
  if (cache_dir && *cache_dir) {
    if (strlen(cache_dir) >= sizeof out->kernel_cache_dir)
      return ep_status(ort, ORT_INVALID_ARGUMENT,
                       "%s: ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR is longer than %zu bytes", EP_NAME,
                       sizeof out->kernel_cache_dir - 1);
    snprintf(out->kernel_cache_dir, sizeof out->kernel_cache_dir, "%s", cache_dir);
    out->kernel_cache_dir_from = "env ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR";
  }
  if (!so) return NULL;
  char value[4096];
  bool found;
  OrtStatus *st = read_entry(ort, so, "device", value, sizeof value, &found);
  if (st) return st;
  if (found) {
    if (strcmp(value, "cpu") == 0) out->device = MX_DEVICE_CPU;
    else if (strcmp(value, "gpu") == 0) out->device = MX_DEVICE_GPU;
    else
      return ep_status(ort, ORT_INVALID_ARGUMENT,
                       "%s: provider option device='%s' is not one of cpu, gpu", EP_NAME, value);
    if (out->device == MX_DEVICE_GPU && !mx_device_available(MX_DEVICE_GPU))
      return ep_status(ort, ORT_INVALID_ARGUMENT,
                       "%s: device=gpu asked for, but this MLX build has no GPU backend", EP_NAME);
  }
  st = read_entry(ort, so, "verbose", value, sizeof value, &found);
  if (st) return st;
  if (found) {
    if (strcmp(value, "0") && strcmp(value, "1"))
      return ep_status(ort, ORT_INVALID_ARGUMENT, "%s: provider option verbose='%s' is not 0 or 1",
                       EP_NAME, value);
    out->verbose = out->verbose || value[0] == '1';
  }
  st = read_entry(ort, so, "cpu_cache_mb", value, sizeof value, &found);
  if (st) return st;
  if (found) {
    char *end = NULL;
    long mb = strtol(value, &end, 10);
    if (!value[0] || *end || mb < 0 || mb > (1L << 20))
      return ep_status(ort, ORT_INVALID_ARGUMENT,
                       "%s: provider option cpu_cache_mb='%s' is not a whole number of MiB from 0 "
                       "to 1048576", EP_NAME, value);
    out->cpu_cache_mb = mb;
  }
  st = read_entry(ort, so, "kernel_cache_dir", value, sizeof value, &found);
  if (st) return st;
  if (found) {
    if (!value[0])
      return ep_status(ort, ORT_INVALID_ARGUMENT,
                       "%s: provider option kernel_cache_dir is empty: give a folder", EP_NAME);
    snprintf(out->kernel_cache_dir, sizeof out->kernel_cache_dir, "%s", value);
    out->kernel_cache_dir_from = "option";
  }
  st = read_entry(ort, so, "report_file", out->report_file, sizeof out->report_file, &found);
  if (st) return st;
  return read_entry(ort, so, "stats_file", out->stats_file, sizeof out->stats_file, &found);
}

/* --- MLX's kernel cache folder ------------------------------------------------------------- */
/* MLX's CUDA backend reads MLX_PTX_CACHE_DIR once per process, at its first kernel compile, and
 * offers no other way to choose the folder; so the opt-in sets it, process-wide. What an EP
 * session set it to, and from which source, is kept here: a later session asking for another
 * folder cannot move MLX, and is told so in its run record. Read and written under the MLX
 * lock, which every MLX evaluation of the EP holds too. */
static char set_by_ep[4096];
static const char *set_by_ep_from;

/* path with a leading ~ or ~/ taken from HOME into out; NULL, or why not. */
static const char *expand_home(const char *path, char *out, size_t cap) {
  if (path[0] != '~') return (size_t)snprintf(out, cap, "%s", path) < cap ? NULL : "too long";
  if (path[1] && path[1] != '/') return "only ~ and ~/... are expanded (from HOME)";
  const char *home = getenv("HOME");
  if (!home || !*home) return "HOME is not set, so ~ cannot be expanded";
  return (size_t)snprintf(out, cap, "%s%s", home, path + 1) < cap ? NULL : "too long";
}

/* mkdir -p, then resolves the folder to an absolute path (MLX reads it relative to whatever the
 * working folder is at its first compile). NULL, or why not; errno's text in why. */
static const char *make_folder(char *path, char *resolved, char *why, size_t cap) {
  for (char *p = path + 1;; p++) {
    if (*p && *p != '/') continue;
    char c = *p;
    *p = 0;
    int rc = mkdir(path, 0777);
    int err = errno;
    struct stat sb;
    bool exists = rc != 0 && err == EEXIST && stat(path, &sb) == 0;
    if (rc != 0 && !(exists && S_ISDIR(sb.st_mode))) {
      if (exists) snprintf(why, cap, "'%s' is not a folder", path);
      else snprintf(why, cap, "cannot create '%s': %s", path, strerror(err));
      *p = c;
      return why;
    }
    *p = c;
    if (!c) break;
  }
  if (access(path, W_OK | X_OK) != 0) {
    snprintf(why, cap, "the folder is not writable: %s", strerror(errno));
    return why;
  }
  if (!realpath(path, resolved)) {
    snprintf(why, cap, "cannot resolve it: %s", strerror(errno));
    return why;
  }
  return NULL;
}

/* Whether two paths name the same existing folder. */
static bool same_folder(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

OrtStatus *ep_kernel_cache_setup(const OrtApi *ort, const ep_options *o, ep_kernel_cache *out) {
  memset(out, 0, sizeof *out);
  out->files_before = out->files_after = -1;
  const char *current = getenv("MLX_PTX_CACHE_DIR");
  bool ours = current && set_by_ep[0] && strcmp(current, set_by_ep) == 0;
  if (o->kernel_cache_dir[0]) {
    char wanted[4096], resolved[PATH_MAX], why[4400];
    const char *fail = expand_home(o->kernel_cache_dir, wanted, sizeof wanted);
    if (!fail && !current) fail = make_folder(wanted, resolved, why, sizeof why);
    if (!fail && !current && setenv("MLX_PTX_CACHE_DIR", resolved, 1) != 0)
      fail = strerror(errno);
    bool option = strcmp(o->kernel_cache_dir_from, "option") == 0;
    if (fail)
      return ep_status(ort, ORT_INVALID_ARGUMENT, "%s: %s='%s': %s", EP_NAME,
                       option ? "provider option kernel_cache_dir"
                              : "ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR",
                       o->kernel_cache_dir, fail);
    if (!current) {
      snprintf(set_by_ep, sizeof set_by_ep, "%s", resolved);
      set_by_ep_from = o->kernel_cache_dir_from;
      current = getenv("MLX_PTX_CACHE_DIR");
      ours = true;
    } else if (!same_folder(wanted, current)) {
      snprintf(out->not_applied, sizeof out->not_applied,
               ours ? "an earlier session of this process set MLX_PTX_CACHE_DIR to '%.300s', "
                      "and MLX reads it once per process"
                    : "MLX_PTX_CACHE_DIR was set before the EP, to '%.300s': it stays",
               current);
    }
  }
  if (current) {
    snprintf(out->ptx_folder, sizeof out->ptx_folder, "%s", current);
    out->ptx_source = ours ? set_by_ep_from : "MLX_PTX_CACHE_DIR";
  } else {
    if (!mx_kernel_cache_default_dir(MX_DEVICE_GPU, out->ptx_folder, sizeof out->ptx_folder))
      out->ptx_folder[0] = 0;
    out->ptx_source = "mlx default";
  }
  if (o->device == MX_DEVICE_GPU)
    memcpy(out->device_folder, out->ptx_folder, sizeof out->device_folder);
  else if (!mx_kernel_cache_default_dir(MX_DEVICE_CPU, out->device_folder,
                                        sizeof out->device_folder))
    out->device_folder[0] = 0;
  return NULL;
}
