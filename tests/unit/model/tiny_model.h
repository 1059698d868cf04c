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

/* The pair of tiny models the GPU model tests run: a fresh temporary directory in *dir holding
 * path[0] = OLMoE (seed 1) and path[1] = Qwen2-MoE (seed 2). On failure nothing is left behind, *dir
 * is NULL and the status is returned (the message says which step failed). The caller removes the
 * directory with tiny_rmdir and frees *dir. */
#define TINY_PATH_MAX 4096
int tiny_model_pair(char **dir, char path[2][TINY_PATH_MAX]);

/* The pair as a group fixture of a test framework that passes a void ** state (cmocka's group setup and
 * teardown): setup writes it (tiny_model_pair) into a new tiny_world in *state and returns 0, or -1
 * with the reason on stderr; teardown removes the directory and frees the world. */
typedef struct tiny_world {
    char *dir;
    char path[2][TINY_PATH_MAX]; /* [0] olmoe, [1] qwen2moe */
} tiny_world;
int tiny_world_setup(void **state);
int tiny_world_teardown(void **state);

#endif
