/*
 * The fork-join pool behind the plugin's matrix product. Threads start at the first job, one per
 * core the process may run on (the caller is one of them), and live as long as the process. A
 * job bumps a generation counter; an idle thread spins on it for a short while (matrix products
 * come in bursts, between elementwise kernels) and then sleeps on a condition variable. One job at
 * a time: a second caller that finds the pool busy runs its parts itself, so concurrent sessions
 * never wait on each other.
 */
#include "blas/workers.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

enum { MAX_THREADS = 16 };
/* How long an idle thread spins before it sleeps: long enough to cover the elementwise kernels
 * between two products of one graph, short enough to give the core back between Runs. */
static const long SPIN_NS = 200 * 1000;

static struct {
  pthread_once_t once;
  int threads;                    /* including the caller; 1 when no thread started */
  pthread_mutex_t busy;           /* held by the thread whose job is running */
  pthread_mutex_t lock;           /* guards sleeping and the condition variable */
  pthread_cond_t wake;
  int sleeping;
  atomic_ulong generation;        /* bumped per job */
  atomic_int unfinished;          /* pool threads that have not finished the current job */
  workers_fn fn;
  void *arg;
  int parts;
} pool = {PTHREAD_ONCE_INIT, 1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static unsigned long wait_for_job(unsigned long seen) {
  long start = now_ns();
  for (int i = 1;; i++) {
    unsigned long g = atomic_load_explicit(&pool.generation, memory_order_acquire);
    if (g != seen) return g;
    cpu_relax();
    if (i % 64 == 0 && now_ns() - start > SPIN_NS) break;
  }
  pthread_mutex_lock(&pool.lock);
  pool.sleeping++;
  unsigned long g;
  while ((g = atomic_load_explicit(&pool.generation, memory_order_acquire)) == seen)
    pthread_cond_wait(&pool.wake, &pool.lock);
  pool.sleeping--;
  pthread_mutex_unlock(&pool.lock);
  return g;
}

static void *pool_thread(void *index) {
  int part = (int)(long)index;
  unsigned long seen = 0;
  for (;;) {
    seen = wait_for_job(seen);
    if (part < pool.parts) pool.fn(pool.arg, part);
    atomic_fetch_sub_explicit(&pool.unfinished, 1, memory_order_acq_rel);
  }
  return NULL;
}

/* A forked child has none of the pool's threads: it runs every part itself. */
static void forget_threads(void) { pool.threads = 1; }

static void start_threads(void) {
  pthread_atfork(NULL, NULL, forget_threads);
  cpu_set_t cpus;
  int want = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  if (want > MAX_THREADS) want = MAX_THREADS;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int started = 1;
  for (; started < want; started++) {
    pthread_t t;
    if (pthread_create(&t, &attr, pool_thread, (void *)(long)started) != 0) break;
  }
  pthread_attr_destroy(&attr);
  pool.threads = started;
}

int workers_available(void) {
  pthread_once(&pool.once, start_threads);
  return pool.threads;
}

void workers_run(workers_fn fn, void *arg, int parts) {
  if (parts > 1 && workers_available() > 1 && pthread_mutex_trylock(&pool.busy) == 0) {
    pool.fn = fn, pool.arg = arg, pool.parts = parts;
    atomic_store_explicit(&pool.unfinished, pool.threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_acq_rel);
    pthread_mutex_lock(&pool.lock);
    if (pool.sleeping) pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    fn(arg, 0);
    while (atomic_load_explicit(&pool.unfinished, memory_order_acquire) != 0) cpu_relax();
    pthread_mutex_unlock(&pool.busy);
    return;
  }
  for (int part = 0; part < parts; part++) fn(arg, part);
}
