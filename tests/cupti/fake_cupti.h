/* fake_cupti.h: TEST DOUBLE. The three test-only entry points of the stand-in libcupti (fake_cupti.c)
 * through which fakecuda, the stand-in libcuda, reports what the real driver reports to CUPTI. fakecuda
 * looks them up at run time (it never links the stand-in), so only their types are shared here. */
#ifndef FAKE_CUPTI_H
#define FAKE_CUPTI_H

#include <stdint.h>

/* A driver API call of callback id cbid (CUPTI_DRIVER_TRACE_CBID_*) named name (a string that lives as
 * long as the process) at site 0 (entry) or 1 (exit): calls the subscriber's callback when that id is
 * enabled. Called outside any driver lock, as the subscriber's callback may call the driver. Returns the
 * call's correlation id, the one the callback sees, the same at entry and at exit (0: none, as for an
 * exit with no entry, or past the stand-in's nesting depth), so that the caller can stamp it on the
 * kernels the call enqueues, as the driver does for CUPTI's activity records. */
typedef uint32_t fakecupti_api_fn(uint32_t cbid, const char *name, int site);

/* A kernel ran from start_ns to end_ns (the clock of cuptiGetTimestamp): one activity record when
 * CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (or KERNEL) is enabled, whose correlationId is correlation: the
 * id fakecupti_api gave the driver call that launched it (for a graph's kernel, the cuGraphLaunch), 0
 * when no traced call did. Never calls back into the client. */
typedef void fakecupti_kernel_fn(uint64_t start_ns, uint64_t end_ns, uint32_t correlation);

/* A graph exec is launched (before its nodes are enqueued). One launched while kernel activity is on is
 * remembered; launched again while a cuptiFinalize runs it is counted as faulted (fake_cupti.c). */
typedef void fakecupti_graph_fn(const void *exec);

#endif
