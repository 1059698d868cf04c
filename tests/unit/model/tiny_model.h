/* Test support: writes a small random-weight artifact of either architecture with the artifact writer
 * (lib/format/artifact.h), so model tests need no checkpoint and no tool binaries. */
#ifndef HZ_TEST_TINY_MODEL_H
#define HZ_TEST_TINY_MODEL_H

#include <stdint.h>

#include "format/hfconfig.h"

/* Writes `path` for the "tiny" preset of `arch` with weights drawn from `seed`. Returns an hz status. */
int tiny_model_write(const char *path, hz_arch arch, uint64_t seed);

/* A fresh temporary directory path (mkdtemp) in *out (caller frees with free and removes). */
int tiny_tmpdir(char **out);

/* Removes a directory and the files directly in it. */
void tiny_rmdir(const char *dir);

#endif
