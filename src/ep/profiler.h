/*
 * The EP's part in ORT's profiler (enable_profiling, or a Run's profiling): ORT 1.25+ asks an EP
 * for an OrtEpProfilerImpl, brackets every event it times (a fused node's Compute among them) with
 * StartEvent/StopEvent on the thread that runs it, and collects the EP's events at the end. Each
 * MLX group's Run becomes one event named after the group, with its path and whether it traced.
 */
#ifndef EP_PROFILER_H
#define EP_PROFILER_H

#include "ep/ep_types.h"

#include <stdint.h>

/* The ORT API version whose OrtEp and OrtEpApi carry the profiler calls. */
#define EP_ORT_API_VERSION_PROFILER 25

/* OrtEp::CreateProfiler. */
OrtStatus *ORT_API_CALL ep_create_profiler(OrtEp *this_ptr, OrtEpProfilerImpl **out);

/* Whether a profiler is timing the ORT event running on this thread (a cheap check before
 * measuring anything). */
bool ep_profiling_now(void);
uint64_t ep_profiler_clock_ns(void);
/* Records one group Run, started at start_ns (ep_profiler_clock_ns) and lasting dur_ns, with the
 * profiler timing this thread's event; nothing when there is none. */
void ep_profiler_record(const char *group, int nodes, uint64_t start_ns, uint64_t dur_ns,
                        const char *path, bool traced);

#endif
