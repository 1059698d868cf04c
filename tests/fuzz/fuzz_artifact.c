/* libFuzzer target for the artifact header + manifest parser (no I/O).
 *
 * Input: a "meta image", the header page followed by the manifest bytes. Each input is parsed twice:
 * as given, and re-sealed (manifest size, manifest checksum, file size and header checksum recomputed
 * to match the input) so that mutations reach the JSON schema and layout rules instead of stopping at
 * the checksums. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "format/artifact.h"
#include "fuzz.h"

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hz_artifact *a = NULL;
    if (hz_artifact_parse_meta_image(data, size, "fuzz", &a) == HZ_OK) hz_artifact_free(a);
    if (size < HZ_ARTIFACT_HEADER_BYTES) return 0;

    uint8_t *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    uint64_t mlen = size - HZ_ARTIFACT_HEADER_BYTES;
    put64(copy + HZ_AH_MANIFEST_BYTES, mlen);
    put64(copy + HZ_AH_MANIFEST_XXH3, XXH3_64bits(copy + HZ_ARTIFACT_HEADER_BYTES, (size_t)mlen));
    put64(copy + HZ_AH_FILE_BYTES, get64(copy + HZ_AH_MANIFEST_OFFSET) + mlen);
    put64(copy + HZ_AH_HEADER_XXH3, XXH3_64bits(copy, HZ_AH_HEADER_XXH3));
    a = NULL;
    if (hz_artifact_parse_meta_image(copy, size, "fuzz", &a) == HZ_OK) hz_artifact_free(a);
    free(copy);
    return 0;
}
