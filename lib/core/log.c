/* The process-wide log callback. The library prints nothing unless a callback is installed. */
#include <stdio.h>

#include "core.h"

static hz_log_fn g_log_fn;
static void *g_log_user;
static int g_log_max = HZ_LOG_WARN;

void hz_set_log_callback(hz_log_fn fn, void *user, int max_level) {
    g_log_fn = fn;
    g_log_user = user;
    g_log_max = max_level;
}

void hz_log(int level, const char *fmt, ...) {
    hz_log_fn fn = g_log_fn;
    if (!fn || level > g_log_max) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(g_log_user, level, line);
}
