/* A minimal test harness for the CPU unit tests: CHECK records a failure with its line and goes on;
 * CHECK_DONE prints "N passed, N failed" (the closing line CTest logs keep) and gives the exit code. */
#ifndef AG_CHECK_H
#define AG_CHECK_H
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (cond) {                                                                                   \
            check_passed++;                                                                           \
        } else {                                                                                      \
            check_failed++;                                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                  \
        }                                                                                             \
    } while (0)

#define CHECK_DONE()                                                                                  \
    (printf("%d passed, %d failed\n", check_passed, check_failed), check_failed ? 1 : 0)

#endif
