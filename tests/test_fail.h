/* FAILF: prints "FAIL: <message>" on its own line and counts it in g_failures, the test program's
 * failure count (one per program: include this header once per translation unit that checks). */
#ifndef HZ_TESTS_TEST_FAIL_H
#define HZ_TESTS_TEST_FAIL_H

#include <stdio.h>

static int g_failures;
#define FAILF(...)                                                                                         \
    do {                                                                                                   \
        printf("FAIL: " __VA_ARGS__);                                                                      \
        printf("\n");                                                                                      \
        g_failures++;                                                                                      \
    } while (0)

#endif
