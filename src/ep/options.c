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
 * kernels (cpu/math.c); ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL=N makes the Nth guarded call into the
 * MLX bridge after the EP's creation fail, once (fault injection: tests walk N to prove every
 * failure path returns an OrtStatus and leaves the session usable); an EP created without it
 * disarms it; ONNXRUNTIME_EP_MLX_SLOW_FIRST_RUN_MS=N sets how long a group's first Run may take
 * before a warning through ORT's logger says where its time went (default 1000; 0 warns always,
 * for tests).
 */
#include "ep/ep_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  out->cpu_cache_mb = 1024;
  const char *fail = getenv("ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL");
  out->fail_bridge_call = fail ? strtol(fail, NULL, 10) : 0;
  if (!so) return NULL;
  char value[1024];
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
  st = read_entry(ort, so, "report_file", out->report_file, sizeof out->report_file, &found);
  if (st) return st;
  return read_entry(ort, so, "stats_file", out->stats_file, sizeof out->stats_file, &found);
}
