/* Status names and messages (from the X-macro in horizon.h), version, and the thread-local last error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

#define HZ_STR_(x) #x
#define HZ_XSTR_(x) HZ_STR_(x)

const char *hz_version(void) {
    return HZ_XSTR_(HZ_VERSION_MAJOR) "." HZ_XSTR_(HZ_VERSION_MINOR) "." HZ_XSTR_(HZ_VERSION_PATCH);
}

unsigned hz_version_number(void) { return HZ_VERSION_NUMBER; }

const char *hz_strerror(int status) {
    switch (status) {
#define HZ_CASE_(name, value, message)                                                              \
    case value:                                                                                      \
        return message;
        HZ_STATUS_LIST(HZ_CASE_)
#undef HZ_CASE_
    default:
        return "unknown status";
    }
}

const char *hz_status_name(int status) {
    switch (status) {
#define HZ_CASE_(name, value, message)                                                              \
    case value:                                                                                      \
        return #name;
        HZ_STATUS_LIST(HZ_CASE_)
#undef HZ_CASE_
    default:
        return "HZ_UNKNOWN";
    }
}

/* One message per thread; long enough for a path, a tensor name and a CUDA error string. */
static _Thread_local char tl_message[1024];

const char *hz_last_error_message(void) { return tl_message; }

void hz_error_clear(void) { tl_message[0] = '\0'; }

int hz_verror(int status, const char *fmt, va_list ap) {
    vsnprintf(tl_message, sizeof tl_message, fmt, ap);
    return status;
}

int hz_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hz_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

int hz_error_prefix(int status, const char *fmt, ...) {
    char prefix[512];
    char old[sizeof tl_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tl_message, sizeof old);
    /* prefix + ": " + old, truncated to the buffer (truncation is acceptable for a message) */
    size_t cap = sizeof tl_message - 1, n = strlen(prefix), m = strlen(old);
    if (n > cap) n = cap;
    memcpy(tl_message, prefix, n);
    for (const char *sep = ": "; *sep && n < cap; sep++) tl_message[n++] = *sep;
    if (m > cap - n) m = cap - n;
    memcpy(tl_message + n, old, m);
    tl_message[n + m] = '\0';
    return status;
}

void hz_free(void *ptr) { free(ptr); }

void *hz_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) hz_error(HZ_ENOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *hz_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) hz_error(HZ_ENOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

const char *hz_shape_text(char *buf, size_t n, uint32_t ndim, const uint64_t *shape) {
    if (!n) return buf;
    buf[0] = '\0';
    size_t at = 0;
    for (uint32_t d = 0; d <= ndim && at < n; d++) { /* d == ndim: the closing bracket */
        int k = d < ndim ? snprintf(buf + at, n - at, "%s%llu", d ? ", " : "[", (unsigned long long)shape[d])
                         : snprintf(buf + at, n - at, "%s]", ndim ? "" : "[");
        if (k < 0) break;
        at += (size_t)k;
    }
    return buf;
}

char *hz_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = hz_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

int hz_env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out) {
    const char *env = getenv(name);
    if (!env || !*env) return 0;
    char *end = NULL;
    const unsigned long v = strtoul(env, &end, 10);
    if (*end || v < min || v > max) return 0;
    *out = (uint32_t)v;
    return 1;
}

double hz_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
