/* libFuzzer target: arbitrary bytes as a whole safetensors file through the header validator. Every
 * input must end in HZ_OK or an error status, never a crash, leak or out-of-bounds read. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hz_st_tensor *tensors = NULL;
    uint32_t n = 0;
    int st = hz_st_parse_header(data, size, size, "fuzz.safetensors", 0, &tensors, &n);
    if (st == HZ_OK) {
        /* A valid result must describe bytes inside the input. */
        for (uint32_t i = 0; i < n; i++) {
            if (tensors[i].offset > size || tensors[i].nbytes > size - tensors[i].offset) __builtin_trap();
            if (i > 0 && strcmp(tensors[i - 1].name, tensors[i].name) >= 0) __builtin_trap();
        }
    } else if (tensors != NULL || n != 0 || hz_last_error_message()[0] == '\0') {
        __builtin_trap();
    }
    hz_st_tensors_free(tensors, n);
    return 0;
}
