/*
 * ep/profiler.h's OrtEpProfilerImpl. ORT calls StartEvent and StopEvent around each event it
 * times, on the thread that runs it (the fused node's Compute runs in between on that thread), so
 * a thread-local pointer says which profiler a group Run belongs to: with session profiling there
 * is one, with Run profiling one per profiled Run, and concurrent Runs stay apart. Events are kept
 * under the profiler's mutex and handed to ORT at EndProfiling, timestamped on ORT's timeline
 * with the offset StartProfiling gave.
 */
#include "ep/profiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct prof_event {
  char name[160];
  char path[16];
  int nodes;
  int32_t tid; /* the thread that ran it: viewers draw it under ORT's node event */
  bool traced;
  uint64_t start_ns, dur_ns;
} prof_event;

typedef struct ep_profiler {
  OrtEpProfilerImpl base; /* first: ORT hands us &base */
  const mlx_ep *ep;
  uint64_t start_ns;   /* our clock at StartProfiling */
  int64_t offset_ns;   /* ORT's: its profiling start to StartProfiling */
  pthread_mutex_t mu;  /* events may come from several threads (session profiling) */
  prof_event *events;
  size_t n, cap;
} ep_profiler;

static _Thread_local ep_profiler *current;
static _Thread_local int depth;

uint64_t ep_profiler_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool ep_profiling_now(void) { return current != NULL; }

void ep_profiler_record(const char *group, int nodes, uint64_t start_ns, uint64_t dur_ns,
                        const char *path, bool traced) {
  ep_profiler *p = current;
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 64;
    prof_event *grown = realloc(p->events, cap * sizeof *grown);
    if (!grown) { /* a lost event, not a failed Run */
      pthread_mutex_unlock(&p->mu);
      return;
    }
    p->events = grown;
    p->cap = cap;
  }
  prof_event *e = &p->events[p->n++];
  snprintf(e->name, sizeof e->name, "%s", group);
  snprintf(e->path, sizeof e->path, "%s", path);
  e->nodes = nodes;
  e->tid = (int32_t)gettid();
  e->traced = traced;
  e->start_ns = start_ns;
  e->dur_ns = dur_ns;
  pthread_mutex_unlock(&p->mu);
}

static ep_profiler *self(OrtEpProfilerImpl *b) { return (ep_profiler *)b; }

static void ORT_API_CALL release(OrtEpProfilerImpl *b) {
  ep_profiler *p = self(b);
  if (!p) return;
  if (current == p) current = NULL, depth = 0;
  pthread_mutex_destroy(&p->mu);
  free(p->events);
  free(p);
}

static OrtStatus *ORT_API_CALL start_profiling(OrtEpProfilerImpl *b, int64_t offset_ns) {
  ep_profiler *p = self(b);
  pthread_mutex_lock(&p->mu);
  p->start_ns = ep_profiler_clock_ns();
  p->offset_ns = offset_ns;
  p->n = 0;
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static OrtStatus *ORT_API_CALL start_event(OrtEpProfilerImpl *b, uint64_t id) {
  (void)id;
  current = self(b);
  depth++;
  return NULL;
}

static OrtStatus *ORT_API_CALL stop_event(OrtEpProfilerImpl *b, uint64_t id,
                                          const OrtProfilingEvent *ev) {
  (void)b, (void)id, (void)ev;
  if (--depth <= 0) current = NULL, depth = 0;
  return NULL;
}

static OrtStatus *ORT_API_CALL end_profiling(OrtEpProfilerImpl *b,
                                             OrtProfilingEventsContainer *container) {
  ep_profiler *p = self(b);
  const OrtEpApi *api = p->ep->factory->ep_api;
  OrtStatus *st = NULL;
  pthread_mutex_lock(&p->mu);
  OrtProfilingEvent **made = calloc(p->n + 1, sizeof *made);
  size_t n_made = 0;
  if (!made) st = ep_status(p->ep->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
  for (size_t i = 0; !st && i < p->n; i++) {
    const prof_event *e = &p->events[i];
    char nodes[16];
    snprintf(nodes, sizeof nodes, "%d", e->nodes);
    const char *keys[] = {"ep", "path", "traced", "nodes"};
    const char *values[] = {EP_NAME, e->path, e->traced ? "true" : "false", nodes};
    int64_t ts = (p->offset_ns + (int64_t)(e->start_ns - p->start_ns)) / 1000;
    st = api->CreateProfilingEvent(OrtProfilingEventCategory_KERNEL, (int32_t)getpid(), e->tid,
                                   e->name, ts, (int64_t)(e->dur_ns / 1000), keys, values, 4,
                                   &made[n_made]);
    if (!st) n_made++;
  }
  if (!st && n_made)
    st = api->ProfilingEventsContainer_AddEvents(container, (const OrtProfilingEvent *const *)made,
                                                 n_made);
  for (size_t i = 0; i < n_made; i++) api->ReleaseProfilingEvent(made[i]);
  free(made);
  p->n = 0;
  pthread_mutex_unlock(&p->mu);
  return st;
}

OrtStatus *ORT_API_CALL ep_create_profiler(OrtEp *this_ptr, OrtEpProfilerImpl **out) {
  mlx_ep *ep = (mlx_ep *)this_ptr;
  *out = NULL;
  ep_profiler *p = calloc(1, sizeof *p);
  if (!p) return ep_status(ep->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
  p->ep = ep;
  pthread_mutex_init(&p->mu, NULL);
  p->start_ns = ep_profiler_clock_ns();
  OrtEpProfilerImpl *b = &p->base;
  b->ort_version_supported = EP_ORT_API_VERSION_PROFILER;
  b->Release = release;
  b->StartProfiling = start_profiling;
  b->StartEvent = start_event;
  b->StopEvent = stop_event;
  b->EndProfiling = end_profiling;
  *out = b;
  return NULL;
}
