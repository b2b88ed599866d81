/*
 * The EP's own objects behind ORT's function tables: the factory, the EP (one per session), the
 * options parsed for it, and the last partition report. Shared by the files of src/ep/, the only
 * files that include ORT's headers besides the IR snapshot.
 */
#ifndef EP_TYPES_H
#define EP_TYPES_H

#include "mlx/mx.h"

#include <onnxruntime_c_api.h>
#include <stdbool.h>

/* The ORT API version the plugin needs: the compile-based EP ABI exists since 1.23. Version 24
 * is used when present, only for TensorTypeAndShape_HasShape (unknown shapes vs scalars). */
#define EP_ORT_API_VERSION 23
#define EP_ORT_API_VERSION_SHAPES 24
#define EP_NAME "MLXExecutionProvider"
#define EP_VENDOR "onnxruntime-ep-mlx"
#define EP_VERSION "0.1.0"
#define EP_OPTION_PREFIX "ep.mlxexecutionprovider."

typedef struct ep_options {
  mx_device device;
  bool verbose;           /* ONNXRUNTIME_EP_MLX_VERBOSE or option verbose=1 */
  char report_file[1024]; /* option report_file: JSON partition report written here */
  char stats_file[1024];  /* option stats_file: JSON run record written when the session ends */
  bool compile;           /* off with ONNXRUNTIME_EP_MLX_NO_COMPILE=1 */
  bool shapeless;         /* off with ONNXRUNTIME_EP_MLX_NO_SHAPELESS=1 */
  bool fast_kernels;      /* off with ONNXRUNTIME_EP_MLX_NO_LINEAR_ATTENTION_SCAN=1 */
  bool path_trial;        /* off with ONNXRUNTIME_EP_MLX_NO_PATH_TRIAL=1 */
  bool avx2_kernels;      /* opt-in, ONNXRUNTIME_EP_MLX_AVX2_KERNELS=1 (cpu/kernel_cache.c) */
  bool own_sgemm;         /* off with ONNXRUNTIME_EP_MLX_NO_OWN_SGEMM=1 (cpu/sgemm/sgemm.c) */
  bool host_math;         /* off with ONNXRUNTIME_EP_MLX_NO_HOST_MATH=1 (cpu/math.c) */
  bool portable_sgemm;    /* on with ONNXRUNTIME_EP_MLX_PORTABLE_SGEMM=1 (cpu/sgemm/kernel.c) */
  bool avx512_sgemm;      /* off with ONNXRUNTIME_EP_MLX_NO_AVX512_SGEMM=1 (cpu/sgemm/kernel.c) */
  bool gpu_crossing;      /* on with ONNXRUNTIME_EP_MLX_GPU_CROSSING=1 (mlx/host_io.cpp) */
  long slow_first_run_ms; /* ONNXRUNTIME_EP_MLX_SLOW_FIRST_RUN_MS: a slower first Run of a group
                           * is a warning through ORT's logger (default 1000) */
  long cpu_cache_mb;      /* option cpu_cache_mb: MLX's CPU buffer cache at least this (0: MLX's) */
  long fail_bridge_call;  /* ONNXRUNTIME_EP_MLX_FAIL_BRIDGE_CALL=N: the Nth guarded bridge call
                           * after the EP's creation fails (fault injection, for tests; 0: off) */
  char kernel_cache_dir[4096]; /* option kernel_cache_dir, else
                                * ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR, as given; "": neither */
  const char *kernel_cache_dir_from; /* which of the two: the run record's source names */
} ep_options;

/* MLX's kernel caches as this session found them or set them up (options.c: ep_kernel_cache_setup),
 * and the kernel files of the folder this session's device compiles into, counted around the
 * first Run when a run record is asked for (stats.c). */
typedef struct ep_kernel_cache {
  char ptx_folder[4096];  /* MLX's CUDA kernel cache folder for this process ("": unknown) */
  const char *ptx_source; /* "option", "env ONNXRUNTIME_EP_MLX_KERNEL_CACHE_DIR",
                           * "MLX_PTX_CACHE_DIR" (set before the EP) or "mlx default" */
  char not_applied[512];  /* why this session's kernel_cache_dir did not take effect, or "" */
  char device_folder[4096]; /* where this session's device compiles kernels ("": unknown) */
  long long files_before, files_after; /* device_folder's files around the first Run; -1: not
                                        * counted or unreadable */
  int first_runs_begun, first_runs_ended; /* groups whose first Run began / ended */
} ep_kernel_cache;

typedef struct ep_factory {
  OrtEpFactory base; /* first: ORT hands us &base */
  const OrtApi *ort;
  int ort_version; /* EP_ORT_API_VERSION, or higher when ORT offers an optional newer call */
  const OrtEpApi *ep_api;
  const OrtLogger *logger;
  bool profiling; /* ORT offers API version 25: the EP can take part in ORT's profiler */
  char registered_name[128];
} ep_factory;

typedef struct mlx_ep {
  OrtEp base; /* first: ORT hands us &base */
  ep_factory *factory;
  const OrtApi *ort;
  ep_options options;
  const OrtLogger *logger;
  bool own_sgemm;      /* the plugin's own product serves MLX's CPU matrix products */
  const char *blas;    /* CPU device: which library serves them, in words (cpu/cpu.h); else NULL */
  bool blas_as_built;  /* that library is the one the build chose (not a BLAS bound before us) */
  bool host_kernels;   /* CPU device: the CPU room's host kernels are on (cpu/cpu.h) */
  size_t cache_limit_mib; /* MLX's buffer cache limit as this EP left it (0: not touched) */
  ep_kernel_cache kernel_cache;
  struct plan **plans; /* every plan compiled for this session; the EP owns them */
  int n_plans, cap_plans;
} mlx_ep;

/* The process-wide lock around MLX graph building, evaluation and freeing (compile.c). */
void ep_mlx_lock(void);
void ep_mlx_unlock(void);

/* Turns an internal code and message into an ORT status (the only place statuses are made). */
OrtStatus *ep_status(const OrtApi *ort, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

OrtStatus *ep_options_parse(const OrtApi *ort, const OrtSessionOptions *so, ep_options *out);
/* Applies kernel_cache_dir (the user's opt-in: the folder made, MLX_PTX_CACHE_DIR set to it) and
 * finds the kernel cache folders. Call under the MLX lock, before the session's first MLX work. */
OrtStatus *ep_kernel_cache_setup(const OrtApi *ort, const ep_options *o, ep_kernel_cache *out);
OrtStatus *ep_create(ep_factory *factory, const OrtSessionOptions *so, const OrtLogger *logger,
                     OrtEp **out);
void ep_destroy(OrtEp *ep);

/* The three OrtEp callbacks that do the work, each in its own file. */
OrtStatus *ORT_API_CALL ep_get_capability(OrtEp *this_ptr, const OrtGraph *graph,
                                          OrtEpGraphSupportInfo *info);
OrtStatus *ORT_API_CALL ep_compile(OrtEp *this_ptr, const OrtGraph **graphs,
                                   const OrtNode **fused_nodes, size_t count,
                                   OrtNodeComputeInfo **infos, OrtNode **ep_context_nodes);
void ORT_API_CALL ep_release_compute_infos(OrtEp *this_ptr, OrtNodeComputeInfo **infos,
                                           size_t count);

#endif
