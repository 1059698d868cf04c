/* The Horizon qpacked artifact (.hzq): writer, validating reader, and the tensor inventory each
 * architecture needs. doc/format.md is the normative description; this header follows it.
 *
 *   [0, 4096)          header page: fixed little-endian fields, rest zero
 *   [4096, M)          data region: non-routed FP16 tensors, then the routed-expert region (one blob
 *                      per (layer, expert), layer-major, each at a 4096-aligned stride); every item
 *                      starts at a multiple of 4096
 *   [M, M + manifest)  JSON manifest (UTF-8, no terminator)
 *
 * identity = XXH3-128 over every byte after the header page (data region, then manifest). */
#ifndef HZ_ARTIFACT_H
#define HZ_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "format/hfconfig.h"
#include "format/qpack.h"

#define HZ_ARTIFACT_MAGIC "HZQPACK1"
#define HZ_ARTIFACT_VERSION 1u
#define HZ_ARTIFACT_HEADER_BYTES 4096u
#define HZ_ARTIFACT_ALIGN 4096u
#define HZ_ARTIFACT_FORMAT_NAME "horizon-qpack"
/* Upper bound on the manifest, so a corrupt size cannot make a reader allocate gigabytes. The largest
 * supported model needs well under 1 MiB. */
#define HZ_ARTIFACT_MAX_MANIFEST (64u * 1024u * 1024u)
/* 32 hex digits + NUL */
#define HZ_IDENTITY_HEX_BYTES 33u

/* Byte offsets of the header fields (all little-endian). */
enum {
    HZ_AH_MAGIC = 0,            /* 8 bytes "HZQPACK1" */
    HZ_AH_VERSION = 8,          /* u32 format version */
    HZ_AH_HEADER_BYTES = 12,    /* u32 size of the header page (4096) */
    HZ_AH_DATA_OFFSET = 16,     /* u64 */
    HZ_AH_DATA_BYTES = 24,      /* u64 */
    HZ_AH_MANIFEST_OFFSET = 32, /* u64 = data offset + data bytes */
    HZ_AH_MANIFEST_BYTES = 40,  /* u64 */
    HZ_AH_MANIFEST_XXH3 = 48,   /* u64 XXH3-64 of the manifest bytes */
    HZ_AH_IDENTITY_HI = 56,     /* u64 high half of the XXH3-128 identity */
    HZ_AH_IDENTITY_LO = 64,     /* u64 low half */
    HZ_AH_FILE_BYTES = 72,      /* u64 total file size */
    HZ_AH_HEADER_XXH3 = 80,     /* u64 XXH3-64 of header bytes [0, 80) */
    HZ_AH_USED = 88             /* bytes [88, 4096) are zero */
};

typedef struct hz_artifact_header {
    uint32_t version;
    uint32_t header_bytes;
    uint64_t data_offset;
    uint64_t data_bytes;
    uint64_t manifest_offset;
    uint64_t manifest_bytes;
    uint64_t manifest_xxh3;
    uint64_t identity_hi;
    uint64_t identity_lo;
    uint64_t file_bytes;
} hz_artifact_header;

/* A non-routed FP16 tensor of the inventory. */
typedef struct hz_artifact_tensor {
    char *name;
    uint32_t ndim;
    uint64_t shape[4];
    uint64_t numel;
    uint64_t offset; /* absolute file offset */
    uint64_t bytes;  /* numel * 2 */
    uint64_t xxh3;
} hz_artifact_tensor;

/* One routed (layer, expert) blob. */
typedef struct hz_artifact_blob {
    uint64_t offset; /* absolute file offset */
    uint64_t bytes;  /* layout.blob_bytes */
    uint64_t xxh3;
} hz_artifact_blob;

/* The validated header + manifest. */
typedef struct hz_artifact {
    hz_artifact_header header;
    hz_model_config cfg;
    char source_dtype[8];                          /* "bf16", "f16", "f32" */
    char source_identity[HZ_IDENTITY_HEX_BYTES];   /* 32 hex digits */
    hz_expert_layout layout;
    uint64_t routed_offset; /* absolute offset of blob (0, 0) */
    uint64_t routed_bytes;  /* n_blobs * blob_stride */
    uint64_t blob_stride;   /* align_up(layout.blob_bytes, 4096) */
    uint64_t n_blobs;       /* layers * experts, layer-major */
    uint32_t n_tensors;
    hz_artifact_tensor *tensors; /* sorted by offset */
    hz_artifact_blob *blobs;
    char *config_json; /* the manifest's "config" object as text */
    char *manifest;    /* the manifest bytes (hashed into the identity by hz_artifact_load) */
    uint64_t manifest_len;
} hz_artifact;

void hz_artifact_free(hz_artifact *art);

/* Serializes / parses the header page. parse checks magic (HZ_EFORMAT "not a Horizon artifact"),
 * version, header size, field consistency and the header checksum (HZ_EIDENTITY). `len` bytes of
 * `page` are available (a shorter buffer than the header page is a truncated file). */
void hz_artifact_header_write(const hz_artifact_header *h, uint8_t page[HZ_ARTIFACT_HEADER_BYTES]);
int hz_artifact_header_parse(const uint8_t *page, size_t len, const char *what,
                             hz_artifact_header *out);

/* Validates the manifest against an already parsed header: checksum (HZ_EIDENTITY), JSON schema,
 * config, precision, inventory (every tensor the architecture needs, shapes from the config), every
 * offset and size in bounds, aligned and non-overlapping, blob sizes equal to the layout. No I/O; never
 * crashes on any input. */
int hz_artifact_parse_manifest(const hz_artifact_header *h, const char *manifest, size_t len,
                               const char *what, hz_artifact **out);

/* The fuzzing entry: `buf` = header page followed by the manifest bytes (a file's first 4096 bytes
 * and its last manifest_bytes bytes). The file size is taken from the header. */
int hz_artifact_parse_meta_image(const uint8_t *buf, size_t len, const char *what, hz_artifact **out);

/* Reads and validates header + manifest of an open file (checks the file size against the header:
 * a short file is HZ_EFORMAT naming both sizes). */
int hz_artifact_read_meta(int fd, const char *what, hz_artifact **out);

#define HZ_ARTIFACT_SKIP_ITEM_CHECKSUMS 0x1u

/* Streams the data region through the identity hash (and the per-item checksums unless skipped),
 * copying it to `dst` (header.data_bytes bytes) when dst is not NULL. Errors: HZ_EIO, HZ_EFORMAT
 * (short read), HZ_EIDENTITY naming the first bad tensor or "layer L expert E", or the identity. */
int hz_artifact_load(int fd, const char *what, const hz_artifact *art, uint8_t *dst, uint32_t flags);

/* The identity as 32 lowercase hex digits (high half first, like XXH128's canonical form). */
void hz_artifact_identity_hex(const hz_artifact_header *h, char out[HZ_IDENTITY_HEX_BYTES]);

/* ---------------------------------------------------------------------------------------------------
 * Architecture inventory
 * ------------------------------------------------------------------------------------------------- */

#define HZ_TENSOR_NAME_MAX 96u

typedef struct hz_tensor_spec {
    char name[HZ_TENSOR_NAME_MAX];
    uint32_t ndim;
    uint64_t shape[2];
} hz_tensor_spec;

/* The non-routed tensors of `cfg`'s architecture with their Hugging Face names and shapes, in
 * checkpoint order (embeddings, layers, final norm, lm_head). Caller frees *out with free(). */
int hz_arch_nonrouted_tensors(const hz_model_config *cfg, hz_tensor_spec **out, uint32_t *out_n);

/* Routed expert projections: 0 gate_proj, 1 up_proj, 2 down_proj. */
void hz_expert_tensor_name(char out[HZ_TENSOR_NAME_MAX], uint32_t layer, uint32_t expert, int proj);

/* XXH3-128 over the checkpoint's safetensors headers, in file-name order: for each file its base name,
 * a NUL, its size (u64 LE) and its first 8 + N bytes (the length prefix and JSON header). */
int hz_source_identity(const hz_st_set *set, char out[HZ_IDENTITY_HEX_BYTES]);

/* ---------------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------------- */

typedef struct hz_artifact_writer hz_artifact_writer;

struct cJSON;
/* Adds the "precision" object (source dtype, INT4 routed rows in HZ_QBLOCK blocks with FP16 scales,
 * FP16 activations and non-routed weights) to `root`: the declaration the manifest carries and the
 * backing's describe repeats. Clears *ok on failure (core/json.h). */
void hz_json_precision(struct cJSON *root, const char *source_dtype, int *ok);

/* Starts writing `path` through a file in the same directory that gets the name `path` only on finish
 * (hz_outfile: unnamed until then where the filesystem allows it), so a reader never sees a partial
 * artifact and a killed pack leaves nothing behind. `source_dtype` is "bf16", "f16" or "f32". */
int hz_artifact_writer_create(const char *path, const hz_model_config *cfg, const char *source_dtype,
                              const char *source_identity, hz_artifact_writer **out);
/* Non-routed tensors, in any order, before the first expert: begin, write numel * 2 bytes of FP16 in
 * any split, end. */
int hz_artifact_writer_begin_tensor(hz_artifact_writer *w, const char *name, uint32_t ndim,
                                    const uint64_t *shape);
int hz_artifact_writer_write(hz_artifact_writer *w, const void *data, uint64_t bytes);
int hz_artifact_writer_end_tensor(hz_artifact_writer *w);
/* Routed blobs in layer-major order (layer 0 experts 0..E-1, layer 1, ...), blob_bytes each. */
int hz_artifact_writer_add_expert(hz_artifact_writer *w, uint32_t layer, uint32_t expert,
                                  const uint8_t *blob);
/* Checks that every blob and every required tensor was written, writes the manifest and header,
 * syncs and renames. Frees the writer in every case. On success copies the identity to `identity`
 * when it is not NULL. */
int hz_artifact_writer_finish(hz_artifact_writer *w, char identity[HZ_IDENTITY_HEX_BYTES]);
/* finish without the last step: the complete, synced file is handed to *out (hz_outfile_commit gives it
 * the name, hz_outfile_abort discards it), so that a tool writing several outputs renames them all at the
 * end, once every one is complete. Frees the writer in every case; *out is empty on failure. */
int hz_artifact_writer_finish_pending(hz_artifact_writer *w, char identity[HZ_IDENTITY_HEX_BYTES],
                                      hz_outfile *out);
/* Discards the file being written (never `path`) and frees. NULL allowed. */
void hz_artifact_writer_abort(hz_artifact_writer *w);
/* Bytes written so far (for progress). */
uint64_t hz_artifact_writer_bytes(const hz_artifact_writer *w);

#endif
