/* Run-time knobs for A/B runs on the device machine (HZ_... environment variables that switch a kernel
 * path off or on), each read once per process. Host code only; internal to each translation unit. */
#ifndef HZ_CUDA_KNOB_CUH
#define HZ_CUDA_KNOB_CUH

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

/* `when` if the environment variable `name` is `value`, else `otherwise` (both >= 0); `cache` (a
 * function-local static initialised to -1) keeps the answer. Two threads racing here read the same
 * environment and store the same value. */
inline int knob_once(std::atomic<int> &cache, const char *name, const char *value, int when, int otherwise) {
    int v = cache.load(std::memory_order_relaxed);
    if (v < 0) {
        const char *env = getenv(name);
        v = env && strcmp(env, value) == 0 ? when : otherwise;
        cache.store(v, std::memory_order_relaxed);
    }
    return v;
}

} // namespace

#endif
