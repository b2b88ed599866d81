/*
 * Measures MLX's own floor for one tiny evaluation through the bridge, with no ONNX Runtime and
 * no Python in the way: wrap two 1x1 inputs without copying, add them, evaluate, copy the result
 * out, free the arena. The benchmark prints it beside the one-node graph so the per-Run overhead
 * of the EP can be split into what MLX costs and what the EP and ORT add.
 */
#include "mlx/mx.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 5000;
  if (iters < 1) iters = 1;
  double *times = malloc(sizeof(double) * (size_t)iters);
  float a = 1, b = 2, c = 0;
  int shape[2] = {1, 1};
  for (int i = -200; i < iters; i++) { /* 200 warm-up iterations */
    double t0 = now_us();
    mx_ctx ctx = {.arena = mx_arena_new(), .device = MX_DEVICE_CPU};
    mx_array x, y, z;
    if (mx_wrap_data(&ctx, &x, &a, shape, 2, MX_FLOAT32) || mx_wrap_data(&ctx, &y, &b, shape, 2,
        MX_FLOAT32) || mx_binary(&ctx, &z, MX_ADD, x, y) || mx_eval(&ctx, &z, 1) ||
        mx_copy_to_host(&ctx, z, &c, sizeof c)) {
      fprintf(stderr, "mlx_floor: %s\n", ctx.error);
      return 1;
    }
    mx_arena_free(ctx.arena);
    if (i >= 0) times[i] = now_us() - t0;
  }
  qsort(times, (size_t)iters, sizeof *times, cmp);
  printf("%.2f\n", times[iters / 2]);
  free(times);
  return c == 3 ? 0 : 1;
}
