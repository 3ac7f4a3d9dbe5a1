/* The CUPTI observer: opens libcupti at run time (never linked) and counts the kernel launches the
 * driver reports through its API callbacks, so that the statistics can compare what the hooks saw with
 * what really reached the driver. Declarations live in shim/internal.h (group cupti/observer.c).
 * Locking: started once under a pthread_once; the counter is one relaxed atomic. */
#ifndef AG_CUPTI_OBSERVER_H
#define AG_CUPTI_OBSERVER_H
#include "internal.h"
#endif
