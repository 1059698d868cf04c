/* Options structs: filling a caller's struct with defaults without writing past the size its header
 * gave it (doc/abi.md, "The promise"). */
#include <stdint.h>
#include <string.h>

#include "core.h"

int hz_options_merge(void *o, size_t known, const void *opts, size_t min, const char *who) {
    if (!opts) return HZ_OK;
    uint32_t size;
    memcpy(&size, opts, sizeof size);
    if (size < sizeof(uint32_t) || size < min)
        return hz_error(HZ_EINVAL, "%s: options struct_size %u too small", who, size);
    memcpy(o, opts, size < known ? size : known);
    const uint32_t k = (uint32_t)known;
    memcpy(o, &k, sizeof k);
    return HZ_OK;
}

void hz_options_fill(void *dst, size_t size, const void *defaults, size_t known) {
    if (!dst || size < sizeof(uint32_t) || (uint64_t)size > UINT32_MAX) return;
    unsigned char *d = dst;
    size_t n = size < known ? size : known;
    memcpy(d, defaults, n);
    if (size > known) memset(d + known, 0, size - known);
    uint32_t struct_size = (uint32_t)size;
    memcpy(d, &struct_size, sizeof struct_size);
}
