/*
 * The plugin's single-precision matrix product and the cblas_sgemm entry point that serves
 * libmlx's CPU matrix products. The product is blocked the usual way for caches (B packed in
 * KC x NC blocks, A in MC x KC blocks, register kernels of MR x NR in sgemm/kernel.c) and split
 * over the pool's threads (workers.c) by columns of C, or by rows when C is narrow, so every
 * element of C is computed by one thread in the same order whatever the thread count. On this
 * project's 2-core machine it runs MiniLM's products at ORT's MLAS speed, where Debian's
 * OpenBLAS ran them at 60-80 % of it (docs/BENCHMARKS.md). Packing reads any strides, so
 * transposed operands cost no copy.
 */
#include "cpu/sgemm/sgemm.h"

#include "cpu/sgemm/internal.h"
#include "cpu/workers.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Products below this many multiply-adds (about 12 us on one core here) run on the calling
 * thread alone. Sharing one costs a wake-up, and when other threads compete for the cores (ORT's
 * own pool spins after its kernels) a part can wait for a core: PP-OCR cls, mostly small 1x1
 * convolutions, ran 7.8 ms from 2^17 up and 5.9 ms from 2^19 up, beside ORT's CPU provider in
 * one process; MiniLM's per-head attention products (exactly 2^19) still split. */
static const double PARALLEL_MIN_FMAS = 1 << 19;
/* The largest packed B split by rows (half of a core's 512 KiB level 2 here; run_split). */
static const double ROWS_SPLIT_MAX_B_BYTES = 256 * 1024;
/* The least work a part is cut to when a product is shared in more parts than threads. */
static const double PART_MIN_FMAS = 1 << 18;

static atomic_bool use_portable;
static atomic_bool use_wide = true;
static atomic_bool use_own = true;

void cpu_sgemm_use_portable(bool portable) { atomic_store(&use_portable, portable); }
void cpu_sgemm_use_avx512(bool avx512) { atomic_store(&use_wide, avx512); }

static sgemm_kernels kernels_now(void) {
  return sgemm_pick_kernels(atomic_load(&use_portable), atomic_load(&use_wide));
}

typedef struct product {
  int m, n, k;
  float alpha;
  const float *a;
  long rsa, csa;
  const float *b;
  long rsb, csb;
  float *c;
  long ldc;
  bool add; /* C holds beta * C already: add the product to it */
  sgemm_kernels kernels;
  /* B packed ahead of time (cpu_sgemm_pack) instead of b: every K block's panels, `width`
   * columns a block, this product's columns starting at column `col0` */
  const float *packed;
  long width;
  int col0;
  const float *bias; /* with packed: a row added to every row of C, or NULL */
  const cpu_sgemm_post *post; /* with packed: applied to C's finished rows, or NULL */
} product;

static int min_int(int a, int b) { return a < b ? a : b; }
static int round_up(int v, int to) { return (v + to - 1) / to * to; }
/* K's blocks: as few as KC allows, of equal depth (K = 400 as 200 + 200, not 384 + 16, whose
 * second pass would read and write all of C again for 16 products an element). */
static int k_step(int k) {
  int blocks = (k + SGEMM_KC - 1) / SGEMM_KC;
  return blocks > 1 ? (k + blocks - 1) / blocks : k;
}

/* Packing buffers, one pair per thread, kept for the thread's life. */
static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;
static void make_buffers_key(void) { pthread_key_create(&buffers_key, free); }

static float *thread_buffers(void) {
  pthread_once(&buffers_once, make_buffers_key);
  float *buf = pthread_getspecific(buffers_key);
  if (!buf) {
    size_t floats = (size_t)SGEMM_MC * SGEMM_KC + (size_t)SGEMM_KC * SGEMM_NC;
    buf = aligned_alloc(64, floats * sizeof *buf);
    if (buf && pthread_setspecific(buffers_key, buf) != 0) free(buf), buf = NULL;
  }
  return buf;
}

/* mc x kc of alpha * A into panels of MR rows, each stored k-major; the last panel is padded
 * with zeros. */
static void pack_a(const float *a, long rs, long cs, int mc, int kc, float alpha, float *dst) {
  for (int i0 = 0; i0 < mc; i0 += SGEMM_MR) {
    int mr = min_int(SGEMM_MR, mc - i0);
    for (int p = 0; p < kc; p++, dst += SGEMM_MR) {
      const float *col = a + i0 * rs + p * cs;
      int r = 0;
      for (; r < mr; r++) dst[r] = alpha * col[r * rs];
      for (; r < SGEMM_MR; r++) dst[r] = 0.0f;
    }
  }
}

/* kc x nc of B into panels of NR columns, each stored k-major; the last panel is padded with
 * zeros. A row-major B is read row by row, in memory order: B is often a weight matrix just
 * fetched from memory, where a walk down 16-column strips would cost a stream per row. A B whose
 * columns lie in rows (rs == 1) goes whole panel by whole panel through the kernels' transposing
 * packer where there is one: gathered one float at a time, attention's keys cost its score
 * products (MiniLM b1, summed over both threads, two runs each way) 578 and 522 thousand cycles a
 * layer, against 481 and 498 through the transposes. */
static void pack_b(const sgemm_kernels *k, const float *b, long rs, long cs, int kc, int nc,
                   float *dst) {
  int full = nc / SGEMM_NR * SGEMM_NR, done = 0;
  if (cs == 1) {
    for (int p = 0; p < kc; p++) {
      const float *row = b + p * rs;
      for (int j0 = 0; j0 < full; j0 += SGEMM_NR)
        memcpy(dst + (long)j0 * kc + p * SGEMM_NR, row + j0, SGEMM_NR * sizeof *dst);
    }
    done = full;
  } else if (rs == 1 && k->pack_columns) {
    for (int j0 = 0; j0 < full; j0 += SGEMM_NR)
      k->pack_columns(b + j0 * cs, cs, kc, dst + (long)j0 * kc);
    done = full;
  }
  for (int j0 = done; j0 < nc; j0 += SGEMM_NR) {
    int nr = min_int(SGEMM_NR, nc - j0);
    float *panel = dst + (long)j0 * kc;
    for (int p = 0; p < kc; p++, panel += SGEMM_NR) {
      const float *row = b + p * rs + j0 * cs;
      int j = 0;
      for (; j < nr; j++) panel[j] = row[j * cs];
      for (; j < SGEMM_NR; j++) panel[j] = 0.0f;
    }
  }
}

/* How many of m rows go through the whole-block kernels: whole blocks of MR, less the last one
 * where only one or two rows would be left after it (see rows_panels). */
static int whole_block_rows(int m) {
  int whole = m / SGEMM_MR * SGEMM_MR, rest = m - whole;
  return rest > 0 && rest < 3 && whole > 0 ? whole - SGEMM_MR : whole;
}

/* C[0:m, 0:n] from m rows of A read where they lie (row stride rsa) and one packed panel of B:
 * whole register blocks of MR rows, then the rest through the tail kernels. A rest of one or two
 * rows goes with the last whole block as 4 + 3 or 4 + 4 rows: a kernel of one or two rows holds
 * too few accumulators to hide the multiply-add's latency (MiniLM's 128 rows, 21 blocks and 2
 * rows: the 2-row kernel took 3% of a Run's time for 1.6% of the work). */
static void rows_panels(const sgemm_kernels *k, int kc, const float *a, long rsa, const float *b,
                        float *c, long ldc, int m, int n, int add, const float *bias) {
  int whole = whole_block_rows(m), rest = m - whole;
  for (int ir = 0; ir < whole; ir += SGEMM_MR)
    k->rows(kc, a + ir * rsa, rsa, b, c + (long)ir * ldc, ldc, n, add, bias);
  while (rest > 0) {
    int rows = rest > SGEMM_MR ? 4 : rest;
    k->rows_tail[rows](kc, a + whole * rsa, rsa, b, c + (long)whole * ldc, ldc, n, add, bias);
    whole += rows, rest -= rows;
  }
}

/* C[0:m, 0:n] from m rows of A read where they lie and the packed panels of B for those n
 * columns (panel j at b + j * NR * kc, each after the one before), bias (when not NULL) the
 * row added for those columns: two whole panels at a time through the pair kernel where the
 * processor has one, for whole blocks of MR rows (the rest of the rows as rows_panels would cut
 * them); every other column panel by panel. */
static void rows_columns(const sgemm_kernels *k, int kc, const float *a, long rsa, const float *b,
                         float *c, long ldc, int m, int n, int add, const float *bias) {
  int jr = 0, whole = whole_block_rows(m);
  for (; k->rows_pair && whole > 0 && jr + 2 * SGEMM_NR <= n; jr += 2 * SGEMM_NR) {
    const float *pair = b + (long)jr * kc, *pair_bias = bias ? bias + jr : NULL;
    for (int ir = 0; ir < whole; ir += SGEMM_MR)
      k->rows_pair(kc, a + ir * rsa, rsa, pair, c + (long)ir * ldc + jr, ldc, add, pair_bias);
    for (int h = 0; h < 2 && whole < m; h++)
      rows_panels(k, kc, a + whole * rsa, rsa, pair + (long)h * SGEMM_NR * kc,
                  c + (long)whole * ldc + jr + h * SGEMM_NR, ldc, m - whole, SGEMM_NR, add,
                  pair_bias ? pair_bias + h * SGEMM_NR : NULL);
  }
  for (; jr < n; jr += SGEMM_NR)
    rows_panels(k, kc, a, rsa, b + (long)jr * kc, c + jr, ldc, m, min_int(SGEMM_NR, n - jr), add,
                bias ? bias + jr : NULL);
}

/* The whole of p on this thread: B block by block, then register blocks with B's panel held in
 * level 1 while A's rows stream past it. A row-major A (with alpha 1) is read where it lies, a
 * last partial panel of rows through the tail kernel of its height; any other is packed block
 * by block. */
static void product_on_thread(const product *p, float *buffers) {
  float *pa = buffers, *pb = buffers + (size_t)SGEMM_MC * SGEMM_KC;
  bool rows_in_place = p->csa == 1 && p->alpha == 1.0f;
  for (int jc = 0; jc < p->n; jc += SGEMM_NC) {
    int nc = min_int(SGEMM_NC, p->n - jc);
    for (int pc = 0, step = k_step(p->k); pc < p->k; pc += step) {
      int kc = min_int(step, p->k - pc);
      pack_b(&p->kernels, p->b + pc * p->rsb + jc * p->csb, p->rsb, p->csb, kc, nc, pb);
      int add = pc > 0 || p->add;
      for (int ic = 0; ic < p->m; ic += SGEMM_MC) {
        int mc = min_int(SGEMM_MC, p->m - ic);
        const float *a = p->a + ic * p->rsa + pc * p->csa;
        if (!rows_in_place) pack_a(a, p->rsa, p->csa, mc, kc, p->alpha, pa);
        float *c = p->c + (long)ic * p->ldc + jc;
        if (rows_in_place) {
          rows_columns(&p->kernels, kc, a, p->rsa, pb, c, p->ldc, mc, nc, add, NULL);
          continue;
        }
        for (int jr = 0; jr < nc; jr += SGEMM_NR)
          for (int ir = 0; ir < mc; ir += SGEMM_MR)
            p->kernels.packed(kc, pa + ir * kc, pb + jr * kc, c + (long)ir * p->ldc + jr,
                              p->ldc, min_int(SGEMM_MR, mc - ir), min_int(SGEMM_NR, nc - jr),
                              add, NULL);
      }
    }
  }
}

/* post over rows [0, rows) of C, n columns each */
static void post_rows(const product *p, float *c, int rows) {
  for (int i = 0; i < rows; i++) p->post->fn(p->post->params, c + (long)i * p->ldc, p->n);
}

/* The whole of p, whose B was packed ahead of time, on this thread, K block by K block: the
 * first overwrites C, adding the bias rows as it stores (no pass of its own over C), the others
 * add to it; A's rows are read in place (alpha is 1, A row-major), a last partial panel through
 * the tail kernel of its height. The last K block hands each block of rows to post as soon as
 * all its columns are done. */
static void prepacked_on_thread(const product *p) {
  for (int pc = 0, step = k_step(p->k); pc < p->k; pc += step) {
    int kc = min_int(step, p->k - pc), add = pc > 0;
    bool last = pc + kc >= p->k;
    const float *block = p->packed + (long)pc * p->width + (long)p->col0 * kc;
    for (int ic = 0; ic < p->m; ic += SGEMM_MC) {
      int mc = min_int(SGEMM_MC, p->m - ic);
      const float *a = p->a + (long)ic * p->rsa + pc;
      float *c = p->c + (long)ic * p->ldc;
      rows_columns(&p->kernels, kc, a, p->rsa, block, c, p->ldc, mc, p->n, add,
                   add ? NULL : p->bias);
      if (last && p->post) post_rows(p, c, mc);
    }
  }
}

/* Without packing buffers (their allocation failed) the product still comes out right, one
 * dot product per element. */
static void product_unblocked(const product *p) {
  for (int i = 0; i < p->m; i++)
    for (int j = 0; j < p->n; j++) {
      float sum = 0.0f;
      for (int q = 0; q < p->k; q++)
        sum += p->alpha * p->a[i * p->rsa + q * p->csa] * p->b[q * p->rsb + j * p->csb];
      float *out = p->c + (long)i * p->ldc + j;
      *out = p->add ? *out + sum : sum;
    }
}

/* The most pieces of rows a column block is cut into, and the least work a piece is cut to. */
enum { MAX_ROW_CHUNKS = 4 };
static const double CHUNK_MIN_FMAS = 1 << 21; /* about 45 us on one core here */

typedef struct split {
  const product *whole;
  int parts;
  bool by_columns;
  int blocks; /* register blocks of columns (or rows), cut by cpu_workers_tapered_range */
  int chunks; /* by columns: pieces of rows a column block is cut into */
} split;

/* Rows [r0, r1) by columns [c0, c1) of the product, on this thread. */
static void run_rect(const split *s, int r0, int r1, int c0, int c1) {
  product p = *s->whole;
  if (r0 >= r1 || c0 >= c1) return;
  p.m = r1 - r0, p.n = c1 - c0;
  p.a += r0 * p.rsa, p.c += (long)r0 * p.ldc + c0;
  p.b += c0 * p.csb, p.col0 += c0;
  if (p.bias) p.bias += c0;
  if (p.packed) {
    prepacked_on_thread(&p);
    return;
  }
  float *buffers = thread_buffers();
  if (buffers) product_on_thread(&p, buffers);
  else product_unblocked(&p);
}

/* Part `part` of the split, from cpu_workers_tapered_range: each share's parts largest first and
 * tapering to one item, an item a column block (by columns) or a block of rows (by rows). A job
 * ends when its last part does: with equal parts (MiniLM's feed-forward products: 96 columns, or
 * 32 columns 1536 deep) the thread that finished first waited at every product for most of one
 * of the other's, where the taper leaves it a block or two to take over. MiniLM b1 with the
 * benchmark's pause between Runs: the calling thread waited 0.95-0.99 ms a Run at the ends of the
 * pool's jobs (all kinds), 0.46-0.54 ms with the taper, 0.24 ms of it at products. Where one
 * column block is itself a lot of work (MiniLM b8: 1024 rows, 135-540 us a block), an item is a
 * piece of a block's rows, taken in order down each block: a part then starts and ends with a
 * piece, whole blocks between going through in one call. */
static void run_part(void *arg, int part) {
  const split *s = arg;
  const product *p = s->whole;
  long first, last;
  cpu_workers_tapered_range((long)s->blocks * s->chunks, s->parts, part, &first, &last);
  if (!s->by_columns) {
    run_rect(s, (int)first * SGEMM_MR, min_int((int)last * SGEMM_MR, p->m), 0, p->n);
    return;
  }
  int chunk_rows = round_up((p->m + s->chunks - 1) / s->chunks, SGEMM_MR);
  while (first < last) {
    int block = (int)(first / s->chunks), piece = (int)(first % s->chunks);
    long whole_to = last / s->chunks; /* blocks [block, whole_to) are whole when piece is 0 */
    if (piece == 0 && whole_to > block) {
      run_rect(s, 0, p->m, block * SGEMM_NR, min_int((int)whole_to * SGEMM_NR, p->n));
      first = whole_to * s->chunks;
      continue;
    }
    long to = last < (long)(block + 1) * s->chunks ? last : (long)(block + 1) * s->chunks;
    int r0 = min_int(piece * chunk_rows, p->m);
    int r1 = min_int((int)(to - (long)block * s->chunks) * chunk_rows, p->m);
    run_rect(s, r0, r1, block * SGEMM_NR, min_int((block + 1) * SGEMM_NR, p->n));
    first = to;
  }
}

/* Runs p over the pool's threads: by columns of C in whole register blocks, or by rows when C
 * has too few column blocks to share; small products on the calling thread alone. A product
 * with B packed ahead of time, more rows than columns and a B that stays in a core's cache (a
 * pointwise convolution over many positions) goes by rows: each thread then reads only its rows
 * of A, which the kernel before wrote from that thread when it too split by rows (a depthwise
 * convolution, another such product), where by columns each read all of A, half of it from the
 * other core's cache (PP-OCRv4 rec's 240-channel depthwise layers ran 0.66-0.76 ms after such
 * products, 0.36-0.46 after them split by rows). Each thread then reads all of B once per block
 * of rows, hence the bound on B. A product run inside a part of a pool job (attention's per-head
 * products) takes the whole of itself on that thread: cut into parts it ran them one after
 * another, each packing its own copy of B (MiniLM b1's attention kernel, calls alternated in one
 * process: 370 -> 367 and 385 -> 378 us). */
static void run_split(const product *p) {
  double fmas = (double)p->m * p->n * p->k;
  int threads = fmas < PARALLEL_MIN_FMAS || cpu_workers_inside_job() ? 1 : cpu_workers_available();
  int col_blocks = (p->n + SGEMM_NR - 1) / SGEMM_NR;
  split s = {p, 1, true, col_blocks, 1};
  if (threads > 1) {
    int parts = cpu_workers_parts(); /* a few a thread (workers.h), none under PART_MIN_FMAS */
    if (fmas / PART_MIN_FMAS < parts) parts = (int)(fmas / PART_MIN_FMAS);
    int row_blocks = (p->m + SGEMM_MR - 1) / SGEMM_MR;
    bool by_rows = p->packed && p->m > p->n && row_blocks >= 2 * threads &&
                   (double)p->k * p->n * sizeof(float) <= ROWS_SPLIT_MAX_B_BYTES;
    s.by_columns = !by_rows && (col_blocks >= 2 * threads || col_blocks >= row_blocks);
    s.blocks = s.by_columns ? col_blocks : row_blocks;
    s.parts = min_int(parts, s.blocks) / threads * threads; /* whole shares */
    if (s.parts < threads) s.parts = threads;
    double block_fmas = (double)p->m * SGEMM_NR * p->k;
    while (s.by_columns && s.chunks < MAX_ROW_CHUNKS && s.chunks * SGEMM_MR * 2 <= p->m &&
           block_fmas / (s.chunks * 2) >= CHUNK_MIN_FMAS)
      s.chunks *= 2;
  }
  cpu_workers_run(run_part, &s, s.parts);
}

/* C = beta * C, where the product itself adds nothing (k == 0 or alpha == 0). */
static void scale_c(int m, int n, float beta, float *c, long ldc) {
  for (int i = 0; i < m && beta != 1.0f; i++) {
    float *row = c + (long)i * ldc;
    if (beta == 0.0f) memset(row, 0, (size_t)n * sizeof *row);
    else
      for (int j = 0; j < n; j++) row[j] *= beta;
  }
}

void cpu_sgemm(int m, int n, int k, float alpha, const float *a, long rsa, long csa,
              const float *b, long rsb, long csb, float beta, float *c, long ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  /* beta == 0: the kernels overwrite C on their first pass over K, without reading it. */
  if (beta != 0.0f) scale_c(m, n, beta, c, ldc);
  product p = {m, n, k, alpha, a, rsa, csa, b, rsb, csb, c, ldc, beta != 0.0f,
               kernels_now()};
  run_split(&p);
}

size_t cpu_sgemm_packed_floats(int k, int n) {
  return k > 0 && n > 0 ? (size_t)k * (size_t)round_up(n, SGEMM_NR) : 0;
}

void cpu_sgemm_pack(int k, int n, const float *b, long rsb, long csb, float *packed) {
  long width = round_up(n, SGEMM_NR);
  sgemm_kernels kernels = kernels_now();
  for (int pc = 0, step = k_step(k); pc < k; pc += step)
    pack_b(&kernels, b + pc * rsb, rsb, csb, min_int(step, k - pc), n, packed + pc * width);
}

void cpu_sgemm_prepacked(int m, int n, int k, const float *a, long lda, const float *packed,
                        const float *bias, const cpu_sgemm_post *post, float *c, long ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int i = 0; i < m; i++) {
      float *row = c + (long)i * ldc;
      if (bias) memcpy(row, bias, (size_t)n * sizeof *row);
      else memset(row, 0, (size_t)n * sizeof *row);
      if (post) post->fn(post->params, row, n);
    }
    return;
  }
  product p = {m, n, k, 1.0f, a, lda, 1, NULL, 0, 0, c, ldc, false,
               kernels_now(), packed, round_up(n, SGEMM_NR), 0,
               bias, post};
  run_split(&p);
}

/* CBLAS's enumerations, by value. */
enum { ROW_MAJOR = 101, COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112, CONJ_TRANS = 113 };

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);

/* OpenBLAS's cblas_sgemm, when the plugin was built with it, for the A/B switch. */
static cblas_sgemm_fn openblas_sgemm;
static pthread_once_t openblas_once = PTHREAD_ONCE_INIT;
static void find_openblas(void) {
  void *handle = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
  if (handle) openblas_sgemm = (cblas_sgemm_fn)dlsym(handle, "cblas_sgemm");
}

bool cpu_sgemm_use_own(bool own) {
  pthread_once(&openblas_once, find_openblas);
  bool own_serves = own || !openblas_sgemm;
  atomic_store(&use_own, own_serves);
  return own_serves;
}

bool cpu_sgemm_own_serves(void) { return atomic_load(&use_own); }

static bool valid_trans(int t) { return t == NO_TRANS || t == TRANS || t == CONJ_TRANS; }

/* libmlx's matrix products land here (exported; src/ep/exports.map). Arguments CBLAS would
 * reject (it reports them through xerbla and returns) leave C untouched. */
__attribute__((visibility("default"))) void
cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
            const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  if (!atomic_load(&use_own)) { /* set only once openblas_sgemm was found */
    openblas_sgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if ((order != ROW_MAJOR && order != COL_MAJOR) || !valid_trans(trans_a) ||
      !valid_trans(trans_b) || m < 0 || n < 0 || k < 0)
    return;
  if (order == COL_MAJOR) { /* C^T = op(B)^T op(A)^T, C^T row-major */
    int t = trans_a;
    trans_a = trans_b, trans_b = t;
    t = m, m = n, n = t;
    const float *x = a;
    a = b, b = x;
    t = lda, lda = ldb, ldb = t;
  }
  bool ta = trans_a != NO_TRANS, tb = trans_b != NO_TRANS;
  /* each leading dimension must span its matrix's rows (row-major terms, after the swap) */
  if (lda < (ta ? m : k) || lda < 1 || ldb < (tb ? k : n) || ldb < 1 || ldc < n || ldc < 1)
    return;
  cpu_sgemm(m, n, k, alpha, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb, tb ? ldb : 1, beta,
           c, ldc);
}
