/* Test fixtures for the artifact and backing tests: tiny artifacts written through the real writer. */
#ifndef HZ_TEST_FIXTURE_H
#define HZ_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "format/artifact.h"

/* Writes a tiny artifact of `arch` (preset "tiny") to a fresh temporary path (caller frees and
 * unlinks). Non-routed tensors hold small deterministic FP16 values, blobs deterministic bytes from
 * `seed`. Copies the identity the writer reported. Fails the test on error. */
char *fixture_write_artifact(hz_arch arch, uint64_t seed, char identity[HZ_IDENTITY_HEX_BYTES]);

/* The deterministic contents the fixture writes, so tests can compare what they read back. */
uint16_t fixture_tensor_value(const char *name, uint64_t i);
uint8_t fixture_blob_byte(uint64_t seed, uint32_t layer, uint32_t expert, uint64_t i);

/* Whole-file helpers. */
uint8_t *fixture_read_file(const char *path, size_t *len);
void fixture_write_file(const char *path, const uint8_t *data, size_t len);
char *fixture_temp_path(const char *suffix);

#endif
