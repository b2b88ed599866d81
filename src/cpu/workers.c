/*
 * The fork-join pool behind the plugin's matrix product and host kernels. Threads start at the
 * first job, one per core the process may run on (the caller is one of them), and live as long
 * as the process. A job bumps a generation counter; an idle thread spins on it for a short while
 * (matrix products come in bursts, between elementwise kernels), or for as long as a Run holds
 * the pool (cpu_workers_hold), yielding its core to any other runnable thread as it does, and then
 * sleeps on a condition variable. A large job comes in a few parts a thread; each part is
 * claimed by whoever comes first, the caller included (an exchange on the part's flag, so
 * exactly one runs it), so neither a thread slow to wake nor one on a slowed core holds the job
 * up: the others run the parts it has not claimed. Thread i starts at the i-th share of the
 * parts, so one job's rows and the next's mostly stay on one core. One job at a time: a second
 * caller that finds the pool busy runs its parts itself, so concurrent sessions never wait on
 * each other. Participants publish the processor they run on; a pool thread that finds itself on
 * another participant's processor moves to a free one (see spread_out).
 */
#include "cpu/workers.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

enum { MAX_THREADS = 16, MAX_PARTS = 128 };
/* Parts a large job is cut into per thread: the threads share a job's parts first come, first
 * served, so a thread on a slower processor (this machine's neighbours share its cores: one of
 * the two ran MiniLM's halves at half the other's speed for milliseconds at a time) leaves more
 * of them to the other instead of making it wait. With one part per thread the fast thread
 * finished, spun its 200 us and slept, and the next job ran on the slow one alone. Eight rather
 * than four: this machine's processors also vanish for up to 4 ms at a time (a probe thread per
 * processor, 5 s: 1-1.5 % of the time lost in gaps over 20 us, the longest 4.2 ms), and a part
 * claimed just before holds the job up; two builds alternated in one process, MiniLM b1 ran
 * 1.00x-1.12x faster with eight (six rounds), b8 1.00x and 1.07x, PP-OCRv4 rec 1.00x. */
enum { PARTS_PER_THREAD = 8 };
_Static_assert(MAX_THREADS * PARTS_PER_THREAD <= MAX_PARTS, "cpu_workers_parts() fits a job");
/* How long an idle thread spins before it sleeps: long enough to cover the elementwise kernels
 * between two products of one graph, short enough to give the core back between Runs. */
static const long SPIN_NS = 200 * 1000;
static const long MOVE_EVERY_NS = 1000 * 1000; /* spread_out's bound */

static struct {
  pthread_once_t once;
  atomic_int threads;             /* including the caller; 1 when no thread started (read by
                                   * the threads as they start) */
  pthread_mutex_t busy;           /* held by the thread whose job is running */
  pthread_mutex_t lock;           /* guards sleeping and the condition variable */
  pthread_cond_t wake;
  int sleeping;
  unsigned long holds_begun;      /* bumped by cpu_workers_hold; guarded by lock */
  atomic_int holds;               /* holds not yet released: threads spin, never sleep */
  atomic_ulong generation;        /* bumped per job */
  /* the current job: written before its parts' flags are cleared, read only by a thread that
   * holds a claim (the job cannot finish before that claim's part has) */
  cpu_workers_fn fn;
  void *arg;
  cpu_set_t allowed;              /* the processors the process could use at start */
  atomic_int cpu[MAX_THREADS];    /* per participant (0: the caller): its processor, or -1 */
  atomic_int parts;               /* the current job's (read before a claim: any job's will do) */
  atomic_bool taken[MAX_PARTS];   /* per part: claimed (parts beyond the job's stay set) */
  atomic_int done;                /* parts finished */
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

/* Linux wakes a sleeping thread onto a processor chosen at its wake-up and leaves it there while
 * it is "cache hot", even when the processor next to it falls idle: after a pause between Runs
 * (the benchmark's 250 ms settle), MLX's thread and the pool's thread woke onto the same
 * processor and took turns on it for the first 10 ms of MiniLM's Run while the other processor
 * idled (scheduler trace). So a participant that finds another on its processor moves itself to
 * one that none uses: its affinity narrowed to that processor (which moves it at once), then
 * widened back, so the scheduler stays free to place it afterwards. */
static void spread_out(int me) {
  int here = sched_getcpu();
  if (here < 0) return;
  atomic_store_explicit(&pool.cpu[me], here, memory_order_relaxed);
  bool crowded = false;
  int threads = atomic_load_explicit(&pool.threads, memory_order_relaxed);
  for (int j = 0; j < threads; j++)
    crowded |= j != me && atomic_load_explicit(&pool.cpu[j], memory_order_relaxed) == here;
  /* at most one move a millisecond: where the scheduler keeps putting it back, the thread would
   * otherwise spend its spin on affinity calls */
  static _Thread_local long moved_at;
  if (!crowded || now_ns() - moved_at < MOVE_EVERY_NS) return;
  moved_at = now_ns();
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &pool.allowed)) continue;
    bool taken = false;
    for (int j = 0; j < threads; j++)
      taken |= atomic_load_explicit(&pool.cpu[j], memory_order_relaxed) == cpu;
    if (taken) continue;
    cpu_set_t one, mask;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) != 0 || !CPU_ISSET(cpu, &mask))
      return; /* the host narrowed this thread's processors since: leave it be */
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0) {
      atomic_store_explicit(&pool.cpu[me], cpu, memory_order_relaxed);
      pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);
    }
    return;
  }
}

/* Spins for the next job, then sleeps until one comes; a hold (cpu_workers_hold) keeps it spinning,
 * and one begun while it sleeps wakes it. Thread `me` looks for a free processor as it spins. */
static unsigned long wait_for_job(unsigned long seen, int me) {
  for (;;) {
    long start = now_ns();
    for (int i = 1;; i++) {
      unsigned long g = atomic_load_explicit(&pool.generation, memory_order_acquire);
      if (g != seen) return g;
      cpu_relax();
      if (i % 64 == 0) {
        bool held = atomic_load_explicit(&pool.holds, memory_order_relaxed) > 0;
        if (!held && now_ns() - start > SPIN_NS) break;
        spread_out(me);
        sched_yield(); /* a spinning thread must not hold a core another thread waits for */
      }
    }
    atomic_store_explicit(&pool.cpu[me], -1, memory_order_relaxed); /* asleep: uses none */
    pthread_mutex_lock(&pool.lock);
    pool.sleeping++;
    unsigned long g, begun = pool.holds_begun;
    while ((g = atomic_load_explicit(&pool.generation, memory_order_acquire)) == seen &&
           pool.holds_begun == begun)
      pthread_cond_wait(&pool.wake, &pool.lock);
    pool.sleeping--;
    pthread_mutex_unlock(&pool.lock);
    if (g != seen) return g;
  }
}

static _Thread_local int inside_job; /* parts of a pool job this thread is running */

bool cpu_workers_inside_job(void) { return inside_job > 0; }

/* Claims and runs whatever parts of the current job are still unclaimed, thread `me` starting
 * from the first part of its share (parts are shared out in order, thread i's share the i-th
 * run of them, so the rows a thread writes in one job are the rows it reads in the next, in its
 * own cache) and going on past it to whatever the others have not reached. */
static void run_claimed_parts(int me) {
  int parts = atomic_load_explicit(&pool.parts, memory_order_relaxed);
  int first = (int)((long)me * parts / atomic_load_explicit(&pool.threads, memory_order_relaxed));
  for (int i = 0; i < parts; i++) {
    int part = (first + i) % parts;
    if (atomic_exchange_explicit(&pool.taken[part], true, memory_order_acq_rel)) continue;
    inside_job++;
    pool.fn(pool.arg, part);
    inside_job--;
    atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
  }
}

static void *pool_thread(void *index) {
  unsigned long seen = 0;
  for (;;) {
    int me = (int)(intptr_t)index;
    seen = wait_for_job(seen, me);
    spread_out(me);
    run_claimed_parts(me);
  }
  return NULL;
}

/* A forked child has none of the pool's threads: it runs every part itself. */
static void forget_threads(void) { atomic_store(&pool.threads, 1); }

static void start_threads(void) {
  pthread_atfork(NULL, NULL, forget_threads);
  for (int i = 0; i < MAX_PARTS; i++) atomic_store(&pool.taken[i], true); /* no job yet */
  for (int i = 0; i < MAX_THREADS; i++) atomic_store(&pool.cpu[i], -1);
  int want = sched_getaffinity(0, sizeof pool.allowed, &pool.allowed) == 0
                 ? CPU_COUNT(&pool.allowed)
                 : 1;
  if (want > MAX_THREADS) want = MAX_THREADS;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int started = 1;
  for (; started < want; started++) {
    pthread_t t;
    if (pthread_create(&t, &attr, pool_thread, (void *)(intptr_t)started) != 0) break;
  }
  pthread_attr_destroy(&attr);
  atomic_store(&pool.threads, started);
}

void cpu_workers_hold(void) {
  if (cpu_workers_available() < 2) return;
  atomic_fetch_add_explicit(&pool.holds, 1, memory_order_relaxed);
  pthread_mutex_lock(&pool.lock);
  pool.holds_begun++;
  if (pool.sleeping) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
}

void cpu_workers_release(void) {
  if (cpu_workers_available() < 2) return;
  atomic_fetch_sub_explicit(&pool.holds, 1, memory_order_relaxed);
}

int cpu_workers_available(void) {
  pthread_once(&pool.once, start_threads);
  return atomic_load_explicit(&pool.threads, memory_order_relaxed);
}

int cpu_workers_parts(void) {
  int threads = cpu_workers_available();
  return threads > 1 ? threads * PARTS_PER_THREAD : 1;
}

void cpu_workers_run(cpu_workers_fn fn, void *arg, int parts) {
  if (parts > 1 && parts <= MAX_PARTS && cpu_workers_available() > 1 &&
      pthread_mutex_trylock(&pool.busy) == 0) {
    atomic_store_explicit(&pool.cpu[0], sched_getcpu(), memory_order_relaxed);
    pool.fn = fn, pool.arg = arg;
    atomic_store_explicit(&pool.parts, parts, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    for (int part = 0; part < parts; part++)
      atomic_store_explicit(&pool.taken[part], false, memory_order_release);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_acq_rel);
    pthread_mutex_lock(&pool.lock);
    if (pool.sleeping) pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    run_claimed_parts(0);
    while (atomic_load_explicit(&pool.done, memory_order_acquire) != parts) cpu_relax();
    pthread_mutex_unlock(&pool.busy);
    return;
  }
  for (int part = 0; part < parts; part++) fn(arg, part);
}

void cpu_workers_tapered_range(long total, int parts, int part, long *first, long *last) {
  int threads = cpu_workers_available();
  /* a share with no more items than parts: one item a part, as cpu_workers_range cuts it */
  if (parts < threads || parts % threads != 0 || total <= parts) {
    cpu_workers_range(total, parts, part, first, last);
    return;
  }
  int per_share = parts / threads, share = part / per_share;
  long at = total * share / threads, left = total * (share + 1) / threads - at, size = 0;
  for (int q = per_share, i = 0; i <= part % per_share; q--, i++) {
    at += size, left -= size;
    size = (2 * left + q) / (q + 1); /* ceil(2 left / (q + 1)): all that is left when q is 1 */
    if (size > left) size = left;
  }
  *first = at, *last = at + size;
}
