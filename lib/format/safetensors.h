/* Safetensors reader (validating every rule of the format) and a streaming writer.
 *
 * A file is: 8-byte little-endian header length N, N bytes of JSON header, then the data buffer. Each
 * header entry "name": {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
 * buffer); optional "__metadata__" maps strings to strings. Rules checked: N within the bound and the
 * file, valid JSON object, known dtype, shape of non-negative integers, end - begin == numel x dtype
 * size, entries contiguous and non-overlapping and covering the buffer exactly, no duplicate names,
 * data inside the file. */
#ifndef HZ_SAFETENSORS_H
#define HZ_SAFETENSORS_H

#include <stdint.h>

#include "core/core.h"

typedef enum hz_dtype { HZ_DTYPE_F32 = 0, HZ_DTYPE_F16 = 1, HZ_DTYPE_BF16 = 2 } hz_dtype;

/* Bytes per element. */
unsigned hz_dtype_size(hz_dtype dtype);
/* Safetensors spelling: "F32", "F16", "BF16". */
const char *hz_dtype_name(hz_dtype dtype);

#define HZ_ST_MAX_DIMS 8u
#define HZ_ST_MAX_HEADER (100u * 1024u * 1024u) /* the bound the reference implementation uses */

typedef struct hz_st_tensor {
    char *name;
    hz_dtype dtype;
    uint32_t ndim;
    uint64_t shape[HZ_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t offset; /* absolute offset of the first byte in its file */
    uint64_t nbytes;
    uint32_t file; /* index into hz_st_set.paths */
} hz_st_tensor;

/* Parses and validates a header. `buf` holds the first `len` bytes of a file of `file_size` bytes
 * (at least 8 + N). `what` names the file in messages. On success *out holds *out_n tensors sorted by
 * name (caller frees with hz_st_tensors_free) with .file = file_index.
 * Errors: HZ_EFORMAT with a message naming the file and tensor (HZ_EIO never: no I/O here). */
int hz_st_parse_header(const uint8_t *buf, uint64_t len, uint64_t file_size, const char *what,
                       uint32_t file_index, hz_st_tensor **out, uint32_t *out_n);
void hz_st_tensors_free(hz_st_tensor *tensors, uint32_t n);

/* A checkpoint: one .safetensors file, or shards listed by model.safetensors.index.json. */
typedef struct hz_st_set {
    uint32_t n_files;
    char **paths;
    uint64_t *file_sizes;
    uint32_t n_tensors;
    hz_st_tensor *tensors; /* sorted by name */
} hz_st_set;

/* Opens `path`: a .safetensors file, or a directory holding model.safetensors.index.json (sharded),
 * or model.safetensors. The index's weight_map must name exactly the tensors its shards hold.
 * Errors: HZ_EIO, HZ_EFORMAT (naming file and tensor), HZ_ENOMEM. */
int hz_st_open(const char *path, hz_st_set **out);
void hz_st_close(hz_st_set *set);
const hz_st_tensor *hz_st_find(const hz_st_set *set, const char *name);
/* Reads a tensor's raw bytes (t->nbytes) into dst. */
int hz_st_read_raw(const hz_st_set *set, const hz_st_tensor *t, void *dst);
/* Reads and converts to FP32 (t->numel values). */
int hz_st_read_f32(const hz_st_set *set, const hz_st_tensor *t, float *dst);

/* Streaming writer: declare every tensor up front (the header is written first), then append each
 * tensor's bytes in declaration order. */
typedef struct hz_st_decl {
    const char *name;
    hz_dtype dtype;
    uint32_t ndim;
    uint64_t shape[HZ_ST_MAX_DIMS];
} hz_st_decl;

typedef struct hz_st_writer hz_st_writer;

/* Writes to a file in path's directory that has no name until finish gives it `path` (hz_outfile: where
 * the filesystem lacks O_TMPFILE, a temporary named path.tmp.XXXXXX): until then whatever is at `path`
 * is untouched, a failure or abort leaves it as it was, and a killed process leaves no unnamed file
 * behind. HZ_EINVAL when `path` exists and is not a regular file. */
int hz_st_writer_create(const char *path, const hz_st_decl *decls, uint32_t n, hz_st_writer **out);
/* Appends bytes (any split of the declared tensors' data, in order). HZ_EINVAL past the end. */
int hz_st_writer_write(hz_st_writer *w, const void *data, uint64_t bytes);
/* Checks that every declared byte was written, closes, renames the file to its path and frees. */
int hz_st_writer_finish(hz_st_writer *w);
/* hz_st_writer_finish without the commit: the complete, synced file goes to *out (as
 * hz_artifact_writer_finish_pending). Frees the writer in every case. */
int hz_st_writer_finish_pending(hz_st_writer *w, hz_outfile *out);
/* Closes, removes the temporary file (not `path`), frees. NULL allowed. */
void hz_st_writer_abort(hz_st_writer *w);

#endif
