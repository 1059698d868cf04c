/* Safetensors: a header validator that enforces every rule of the format, checkpoint sets (single file
 * or shards listed by model.safetensors.index.json) read with pread, and a streaming writer.
 *
 * Byte order: safetensors stores little-endian data and this file reinterprets it in place, so it
 * assumes a little-endian host (checked at compile time). */
#include "format/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "core/fp16.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lib/format/safetensors.c assumes a little-endian host"
#endif

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
#define ST_MAX_INDEX_BYTES (64u * 1024u * 1024u)
/* JSON numbers are doubles: integers above 2^53 are not exact, and no real file gets near that. */
#define ST_MAX_EXACT_INT 9007199254740992.0

unsigned hz_dtype_size(hz_dtype dtype) {
    switch (dtype) {
    case HZ_DTYPE_F32: return 4;
    case HZ_DTYPE_F16: return 2;
    case HZ_DTYPE_BF16: return 2;
    }
    return 0;
}

const char *hz_dtype_name(hz_dtype dtype) {
    switch (dtype) {
    case HZ_DTYPE_F32: return "F32";
    case HZ_DTYPE_F16: return "F16";
    case HZ_DTYPE_BF16: return "BF16";
    }
    return "?";
}

/* Returns 1 and sets *out for the supported dtypes; 0 for a dtype the format defines that this
 * library does not read; -1 for a string the format does not define. */
static int dtype_lookup(const char *s, hz_dtype *out) {
    static const char *const other[] = {"BOOL", "U8",      "I8",      "I16",     "U16",     "I32",
                                        "U32",  "I64",     "U64",     "F64",     "F8_E4M3", "F8_E5M2",
                                        "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",   "C64"};
    if (strcmp(s, "F32") == 0) { *out = HZ_DTYPE_F32; return 1; }
    if (strcmp(s, "F16") == 0) { *out = HZ_DTYPE_F16; return 1; }
    if (strcmp(s, "BF16") == 0) { *out = HZ_DTYPE_BF16; return 1; }
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (strcmp(s, other[i]) == 0) return 0;
    return -1;
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_EXACT_INT || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

void hz_st_tensors_free(hz_st_tensor *tensors, uint32_t n) {
    if (!tensors) return;
    for (uint32_t i = 0; i < n; i++) free(tensors[i].name);
    free(tensors);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const hz_st_tensor *)a)->name, ((const hz_st_tensor *)b)->name);
}

/* Orders by first byte, then by length, so empty tensors sit before a tensor starting at their offset. */
static int cmp_tensor_ptr_offset(const void *a, const void *b) {
    const hz_st_tensor *x = *(const hz_st_tensor *const *)a, *y = *(const hz_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static int parse_metadata(const cJSON *meta, const char *what) {
    if (!cJSON_IsObject(meta)) return hz_error(HZ_EFORMAT, "%s: __metadata__ is not an object", what);
    for (const cJSON *m = meta->child; m; m = m->next)
        if (!cJSON_IsString(m))
            return hz_error(HZ_EFORMAT, "%s: __metadata__ value of '%s' is not a string", what,
                            m->string ? m->string : "");
    return HZ_OK;
}

static int parse_entry(const cJSON *e, const char *what, uint64_t data_start, uint64_t file_size,
                       hz_st_tensor *t) {
    const char *name = t->name;
    if (!cJSON_IsObject(e)) return hz_error(HZ_EFORMAT, "%s: tensor '%s': entry is not an object", what, name);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return hz_error(HZ_EFORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", what, name);
    int known = dtype_lookup(dt->valuestring, &t->dtype);
    if (known == 0)
        return hz_error(HZ_EUNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16 only)",
                        what, name, dt->valuestring);
    if (known < 0)
        return hz_error(HZ_EFORMAT, "%s: tensor '%s': unknown dtype \"%s\"", what, name, dt->valuestring);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(shape))
        return hz_error(HZ_EFORMAT, "%s: tensor '%s': missing or non-array \"shape\"", what, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim < 0 || (unsigned)ndim > HZ_ST_MAX_DIMS)
        return hz_error(HZ_EUNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %u supported)", what, name,
                        ndim, HZ_ST_MAX_DIMS);
    t->ndim = (uint32_t)ndim;
    uint64_t numel = 1;
    int d = 0;
    for (const cJSON *v = shape->child; v; v = v->next, d++) {
        if (!json_u64(v, &t->shape[d]))
            return hz_error(HZ_EFORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", what, name, d);
        if (!hz_mul_ok(numel, t->shape[d], &numel))
            return hz_error(HZ_EFORMAT, "%s: tensor '%s': element count overflows", what, name);
    }
    t->numel = numel;
    if (!hz_mul_ok(numel, hz_dtype_size(t->dtype), &t->nbytes))
        return hz_error(HZ_EFORMAT, "%s: tensor '%s': byte length overflows", what, name);

    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_u64(offs->child, &begin) ||
        !json_u64(offs->child->next, &end))
        return hz_error(HZ_EFORMAT, "%s: tensor '%s': \"data_offsets\" is not two non-negative integers", what,
                        name);
    if (begin > end)
        return hz_error(HZ_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are not ordered", what, name,
                        (unsigned long long)begin, (unsigned long long)end);
    if (end - begin != t->nbytes)
        return hz_error(HZ_EFORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes but %llu elements of %s "
                        "need %llu",
                        what, name, (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)(end - begin), (unsigned long long)numel, hz_dtype_name(t->dtype),
                        (unsigned long long)t->nbytes);
    if (end > file_size - data_start)
        return hz_error(HZ_EFORMAT,
                        "%s: tensor '%s': data ends at byte %llu, past the end of the file (%llu bytes): "
                        "truncated file",
                        what, name, (unsigned long long)(data_start + end), (unsigned long long)file_size);
    t->offset = data_start + begin;
    return HZ_OK;
}

/* Tensors must tile the data buffer exactly: sorted by offset, each starts where the previous ended,
 * the first at the buffer start and the last at the file end. */
static int check_tiling(hz_st_tensor *tensors, uint32_t n, uint64_t data_start, uint64_t file_size,
                        const char *what) {
    hz_st_tensor **order = hz_calloc(n ? n : 1, sizeof *order);
    if (!order) return HZ_ENOMEM;
    for (uint32_t i = 0; i < n; i++) order[i] = &tensors[i];
    qsort(order, n, sizeof *order, cmp_tensor_ptr_offset);
    int st = HZ_OK;
    uint64_t expect = data_start;
    const hz_st_tensor *prev = NULL;
    for (uint32_t i = 0; i < n && st == HZ_OK; i++) {
        const hz_st_tensor *t = order[i];
        if (t->offset < expect)
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'", what,
                          t->name, (unsigned long long)(t->offset - data_start),
                          (unsigned long long)(t->offset - data_start + t->nbytes), prev->name);
        else if (t->offset > expect)
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s': gap of %llu bytes before its data (after %s%s%s)", what,
                          t->name, (unsigned long long)(t->offset - expect), prev ? "tensor '" : "the buffer start",
                          prev ? prev->name : "", prev ? "'" : "");
        expect = t->offset + t->nbytes;
        prev = t;
    }
    if (st == HZ_OK && expect != file_size) {
        if (prev)
            st = hz_error(HZ_EFORMAT, "%s: %llu bytes after the last tensor '%s' belong to no tensor", what,
                          (unsigned long long)(file_size - expect), prev->name);
        else
            st = hz_error(HZ_EFORMAT, "%s: %llu data bytes but no tensors", what,
                          (unsigned long long)(file_size - expect));
    }
    free(order);
    return st;
}

int hz_st_parse_header(const uint8_t *buf, uint64_t len, uint64_t file_size, const char *what,
                       uint32_t file_index, hz_st_tensor **out, uint32_t *out_n) {
    if (!what) what = "safetensors";
    if (out) *out = NULL;
    if (out_n) *out_n = 0;
    if (!buf || !out || !out_n) return hz_error(HZ_EINVAL, "%s: NULL argument", what);
    if (len < 8 || file_size < 8)
        return hz_error(HZ_EFORMAT, "%s: file of %llu bytes is shorter than the 8-byte header length", what,
                        (unsigned long long)file_size);
    uint64_t n_header = le64(buf);
    if (n_header > HZ_ST_MAX_HEADER)
        return hz_error(HZ_EFORMAT, "%s: header length %llu exceeds the bound of %u bytes", what,
                        (unsigned long long)n_header, HZ_ST_MAX_HEADER);
    if (n_header > file_size - 8)
        return hz_error(HZ_EFORMAT, "%s: header length %llu runs past the end of the file (%llu bytes)", what,
                        (unsigned long long)n_header, (unsigned long long)file_size);
    if (n_header > len - 8)
        return hz_error(HZ_EINVAL, "%s: buffer holds %llu bytes, the header needs %llu", what,
                        (unsigned long long)len, (unsigned long long)(n_header + 8));
    if (n_header < 2 || buf[8] != '{')
        return hz_error(HZ_EFORMAT, "%s: header does not start with a JSON object", what);

    /* A private NUL-terminated copy keeps the JSON parser inside memory we own whatever the bytes. */
    char *text = hz_malloc((size_t)n_header + 1);
    if (!text) return HZ_ENOMEM;
    memcpy(text, buf + 8, (size_t)n_header);
    text[n_header] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)n_header, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - text) : 0;
        free(text);
        return hz_error(HZ_EFORMAT, "%s: header is not valid JSON (near byte %zu of %llu)", what, at,
                        (unsigned long long)n_header);
    }
    for (const char *p = end; p < text + n_header; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            size_t at = (size_t)(p - text);
            free(text);
            cJSON_Delete(root);
            return hz_error(HZ_EFORMAT, "%s: header has trailing bytes after the JSON object (byte %zu)", what,
                            at);
        }
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return hz_error(HZ_EFORMAT, "%s: header is not a JSON object", what);
    }

    uint64_t data_start = 8 + n_header;
    uint32_t n = 0, n_meta = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0)
            n_meta++;
        else
            n++;
    }
    int st = HZ_OK;
    hz_st_tensor *tensors = NULL;
    uint32_t filled = 0;
    if (n_meta > 1) {
        st = hz_error(HZ_EFORMAT, "%s: duplicate key '__metadata__'", what);
        goto done;
    }
    tensors = hz_calloc(n ? n : 1, sizeof *tensors);
    if (!tensors) {
        st = HZ_ENOMEM;
        goto done;
    }
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            st = parse_metadata(c, what);
            if (st != HZ_OK) goto done;
            continue;
        }
        hz_st_tensor *t = &tensors[filled];
        t->name = hz_strdup(c->string);
        if (!t->name) {
            st = HZ_ENOMEM;
            goto done;
        }
        filled++;
        t->file = file_index;
        st = parse_entry(c, what, data_start, file_size, t);
        if (st != HZ_OK) goto done;
    }
    qsort(tensors, n, sizeof *tensors, cmp_tensor_name);
    for (uint32_t i = 1; i < n; i++) {
        if (strcmp(tensors[i - 1].name, tensors[i].name) == 0) {
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s' is declared more than once", what, tensors[i].name);
            goto done;
        }
    }
    st = check_tiling(tensors, n, data_start, file_size, what);

done:
    cJSON_Delete(root);
    if (st != HZ_OK) {
        hz_st_tensors_free(tensors, filled);
        return st;
    }
    *out = tensors;
    *out_n = n;
    return HZ_OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* Checkpoint sets                                                                                   */

/* The public struct plus the open descriptors, so every read is one pread on a file opened once. */
typedef struct st_set_impl {
    hz_st_set pub;
    int *fds;
} st_set_impl;

static const char *errno_text(int err, char *buf, size_t cap) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(err, buf, cap);
#else
    if (strerror_r(err, buf, cap) != 0) snprintf(buf, cap, "errno %d", err);
    return buf;
#endif
}

static int pread_full(int fd, void *dst, uint64_t bytes, uint64_t offset, const char *path) {
    uint8_t *p = dst;
    while (bytes > 0) {
        size_t chunk = bytes > (1u << 30) ? (size_t)1 << 30 : (size_t)bytes;
        ssize_t got = pread(fd, p, chunk, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR) continue;
            char eb[128];
            return hz_error(HZ_EIO, "%s: read of %zu bytes at offset %llu failed: %s", path, chunk,
                            (unsigned long long)offset, errno_text(errno, eb, sizeof eb));
        }
        if (got == 0)
            return hz_error(HZ_EIO, "%s: unexpected end of file at offset %llu (file shrank?)", path,
                            (unsigned long long)offset);
        p += got;
        bytes -= (uint64_t)got;
        offset += (uint64_t)got;
    }
    return HZ_OK;
}

/* Opens one .safetensors file and validates its header; the descriptor stays open in *out_fd. */
static int open_shard(const char *path, uint32_t index, int *out_fd, uint64_t *out_size,
                      hz_st_tensor **out_t, uint32_t *out_n) {
    int fd;
    uint64_t size;
    int st = hz_file_open_regular(path, &fd, &size);
    if (st != HZ_OK) return st;
    uint8_t head[8] = {0};
    uint64_t need = size < 8 ? size : 8;
    st = pread_full(fd, head, need, 0, path);
    if (st != HZ_OK) goto fail;
    if (size >= 8) {
        uint64_t n_header = le64(head);
        if (n_header <= HZ_ST_MAX_HEADER && n_header <= size - 8) need = 8 + n_header;
    }
    uint8_t *buf = hz_malloc((size_t)need);
    if (!buf) {
        st = HZ_ENOMEM;
        goto fail;
    }
    st = pread_full(fd, buf, need, 0, path);
    if (st == HZ_OK) st = hz_st_parse_header(buf, need, size, path, index, out_t, out_n);
    free(buf);
    if (st != HZ_OK) goto fail;
    *out_fd = fd;
    *out_size = size;
    return HZ_OK;
fail:
    close(fd);
    return st;
}

void hz_st_close(hz_st_set *set) {
    if (!set) return;
    st_set_impl *impl = (st_set_impl *)set;
    for (uint32_t i = 0; i < set->n_files; i++) {
        if (impl->fds && impl->fds[i] >= 0) close(impl->fds[i]);
        if (set->paths) free(set->paths[i]);
    }
    free(impl->fds);
    free(set->paths);
    free(set->file_sizes);
    hz_st_tensors_free(set->tensors, set->n_tensors);
    free(impl);
}

static st_set_impl *set_alloc(uint32_t n_files) {
    st_set_impl *impl = hz_calloc(1, sizeof *impl);
    if (!impl) return NULL;
    impl->fds = hz_calloc(n_files, sizeof *impl->fds);
    impl->pub.paths = hz_calloc(n_files, sizeof *impl->pub.paths);
    impl->pub.file_sizes = hz_calloc(n_files, sizeof *impl->pub.file_sizes);
    if (!impl->fds || !impl->pub.paths || !impl->pub.file_sizes) {
        free(impl->fds);
        free(impl->pub.paths);
        free(impl->pub.file_sizes);
        free(impl);
        return NULL;
    }
    for (uint32_t i = 0; i < n_files; i++) impl->fds[i] = -1;
    impl->pub.n_files = n_files;
    return impl;
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = hz_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t at = a;
    if (a == 0 || dir[a - 1] != '/') p[at++] = '/';
    memcpy(p + at, name, b + 1);
    return p;
}

static int open_single(const char *path, hz_st_set **out) {
    st_set_impl *impl = set_alloc(1);
    if (!impl) return HZ_ENOMEM;
    hz_st_set *set = &impl->pub;
    set->paths[0] = hz_strdup(path);
    if (!set->paths[0]) {
        hz_st_close(set);
        return HZ_ENOMEM;
    }
    int st = open_shard(path, 0, &impl->fds[0], &set->file_sizes[0], &set->tensors, &set->n_tensors);
    if (st != HZ_OK) {
        hz_st_close(set);
        return st;
    }
    *out = set;
    return HZ_OK;
}

typedef struct index_entry {
    const char *name; /* owned by the cJSON tree */
    uint32_t shard;
} index_entry;

static int cmp_index_entry(const void *a, const void *b) {
    return strcmp(((const index_entry *)a)->name, ((const index_entry *)b)->name);
}

static int read_small_file(const char *path, uint64_t limit, char **out, size_t *out_len) {
    int fd;
    uint64_t size;
    int st = hz_file_open_regular(path, &fd, &size);
    if (st != HZ_OK) return st;
    if (size > limit) {
        close(fd);
        return hz_error(HZ_EFORMAT, "%s: %llu bytes, larger than the %llu-byte limit", path,
                        (unsigned long long)size, (unsigned long long)limit);
    }
    char *buf = hz_malloc((size_t)size + 1);
    if (!buf) {
        close(fd);
        return HZ_ENOMEM;
    }
    st = pread_full(fd, buf, size, 0, path);
    close(fd);
    if (st != HZ_OK) {
        free(buf);
        return st;
    }
    buf[size] = '\0';
    *out = buf;
    *out_len = (size_t)size;
    return HZ_OK;
}

static int valid_shard_name(const char *s) {
    return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int open_sharded(const char *dir, const char *index_path, hz_st_set **out) {
    char *text = NULL;
    size_t text_len = 0;
    int st = read_small_file(index_path, ST_MAX_INDEX_BYTES, &text, &text_len);
    if (st != HZ_OK) return st;
    cJSON *root = cJSON_ParseWithLength(text, text_len);
    free(text);
    index_entry *entries = NULL;
    const char **shards = NULL;
    st_set_impl *impl = NULL;
    hz_st_tensor **parts = NULL;
    uint32_t *part_n = NULL;
    uint32_t n_entries = 0, n_shards = 0;

    if (!root) {
        st = hz_error(HZ_EFORMAT, "%s: not valid JSON", index_path);
        goto done;
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
        st = hz_error(HZ_EFORMAT, "%s: missing \"weight_map\" object", index_path);
        goto done;
    }
    int count = cJSON_GetArraySize(wm);
    entries = hz_calloc(count > 0 ? (size_t)count : 1, sizeof *entries);
    shards = hz_calloc(count > 0 ? (size_t)count : 1, sizeof *shards);
    if (!entries || !shards) {
        st = HZ_ENOMEM;
        goto done;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring || !valid_shard_name(e->valuestring)) {
            st = hz_error(HZ_EFORMAT, "%s: weight_map entry for tensor '%s' is not a shard file name in %s",
                          index_path, e->string, dir);
            goto done;
        }
        uint32_t s = 0;
        while (s < n_shards && strcmp(shards[s], e->valuestring) != 0) s++;
        if (s == n_shards) shards[n_shards++] = e->valuestring;
        entries[n_entries].name = e->string;
        entries[n_entries].shard = s;
        n_entries++;
    }
    qsort(entries, n_entries, sizeof *entries, cmp_index_entry);
    for (uint32_t i = 1; i < n_entries; i++) {
        if (strcmp(entries[i - 1].name, entries[i].name) == 0) {
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s' is listed twice in weight_map", index_path,
                          entries[i].name);
            goto done;
        }
    }

    impl = set_alloc(n_shards ? n_shards : 1);
    parts = hz_calloc(n_shards ? n_shards : 1, sizeof *parts);
    part_n = hz_calloc(n_shards ? n_shards : 1, sizeof *part_n);
    if (!impl || !parts || !part_n) {
        st = HZ_ENOMEM;
        goto done;
    }
    impl->pub.n_files = n_shards;
    uint64_t total = 0;
    for (uint32_t s = 0; s < n_shards; s++) {
        impl->pub.paths[s] = path_join(dir, shards[s]);
        if (!impl->pub.paths[s]) {
            st = HZ_ENOMEM;
            goto done;
        }
        st = open_shard(impl->pub.paths[s], s, &impl->fds[s], &impl->pub.file_sizes[s], &parts[s], &part_n[s]);
        if (st != HZ_OK) goto done;
        total += part_n[s];
    }
    if (total > UINT32_MAX) {
        st = hz_error(HZ_EFORMAT, "%s: too many tensors", index_path);
        goto done;
    }
    hz_st_tensor *all = hz_calloc(total ? (size_t)total : 1, sizeof *all);
    if (!all) {
        st = HZ_ENOMEM;
        goto done;
    }
    uint32_t at = 0;
    for (uint32_t s = 0; s < n_shards; s++) {
        memcpy(all + at, parts[s], (size_t)part_n[s] * sizeof *all);
        at += part_n[s];
        free(parts[s]); /* names now belong to `all` */
        parts[s] = NULL;
        part_n[s] = 0;
    }
    impl->pub.tensors = all;
    impl->pub.n_tensors = at;
    qsort(all, at, sizeof *all, cmp_tensor_name);
    for (uint32_t i = 1; i < at; i++) {
        if (strcmp(all[i - 1].name, all[i].name) == 0) {
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s' is stored in both %s and %s", dir, all[i].name,
                          shards[all[i - 1].file], shards[all[i].file]);
            goto done;
        }
    }
    /* Both lists are sorted by name: walk them together. */
    uint32_t i = 0, j = 0;
    while (i < at || j < n_entries) {
        int c = i == at ? 1 : j == n_entries ? -1 : strcmp(all[i].name, entries[j].name);
        if (c < 0) {
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s' in shard %s is not listed in %s", dir, all[i].name,
                          shards[all[i].file], ST_INDEX_NAME);
            goto done;
        }
        if (c > 0) {
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s' listed in %s is missing from shard %s", dir,
                          entries[j].name, ST_INDEX_NAME, shards[entries[j].shard]);
            goto done;
        }
        if (all[i].file != entries[j].shard) {
            st = hz_error(HZ_EFORMAT, "%s: tensor '%s' is in shard %s but %s lists shard %s", dir, all[i].name,
                          shards[all[i].file], ST_INDEX_NAME, shards[entries[j].shard]);
            goto done;
        }
        i++;
        j++;
    }
    st = HZ_OK;

done:
    if (parts) {
        for (uint32_t s = 0; s < n_shards; s++) hz_st_tensors_free(parts[s], part_n[s]);
    }
    free(parts);
    free(part_n);
    free(entries);
    free(shards);
    cJSON_Delete(root);
    if (st != HZ_OK) {
        if (impl) hz_st_close(&impl->pub);
        return st;
    }
    *out = &impl->pub;
    return HZ_OK;
}

int hz_st_open(const char *path, hz_st_set **out) {
    if (out) *out = NULL;
    if (!path || !out) return hz_error(HZ_EINVAL, "hz_st_open: NULL argument");
    struct stat sb;
    char eb[128];
    if (stat(path, &sb) != 0) return hz_error(HZ_EIO, "%s: %s", path, errno_text(errno, eb, sizeof eb));
    if (!S_ISDIR(sb.st_mode)) return open_single(path, out);

    char *index = path_join(path, ST_INDEX_NAME);
    if (!index) return HZ_ENOMEM;
    int st;
    if (stat(index, &sb) == 0) {
        st = open_sharded(path, index, out);
    } else {
        char *single = path_join(path, ST_SINGLE_NAME);
        if (!single) {
            free(index);
            return HZ_ENOMEM;
        }
        if (stat(single, &sb) == 0)
            st = open_single(single, out);
        else
            st = hz_error(HZ_EIO, "%s: neither %s nor %s found", path, ST_INDEX_NAME, ST_SINGLE_NAME);
        free(single);
    }
    free(index);
    return st;
}

const hz_st_tensor *hz_st_find(const hz_st_set *set, const char *name) {
    if (!set || !name) return NULL;
    size_t lo = 0, hi = set->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, set->tensors[mid].name);
        if (c == 0) return &set->tensors[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int hz_st_read_raw(const hz_st_set *set, const hz_st_tensor *t, void *dst) {
    if (!set || !t || (!dst && t->nbytes)) return hz_error(HZ_EINVAL, "hz_st_read_raw: NULL argument");
    if (t->file >= set->n_files)
        return hz_error(HZ_EINVAL, "tensor '%s': file index %u out of range", t->name, t->file);
    const st_set_impl *impl = (const st_set_impl *)set;
    int st = pread_full(impl->fds[t->file], dst, t->nbytes, t->offset, set->paths[t->file]);
    if (st != HZ_OK) return hz_error_prefix(st, "tensor '%s'", t->name);
    return HZ_OK;
}

int hz_st_read_f32(const hz_st_set *set, const hz_st_tensor *t, float *dst) {
    if (!set || !t || (!dst && t->numel)) return hz_error(HZ_EINVAL, "hz_st_read_f32: NULL argument");
    if (t->dtype == HZ_DTYPE_F32) return hz_st_read_raw(set, t, dst);
    /* 16-bit data goes into the upper half of dst and widens in place front to back: element i is
     * loaded before its 4-byte result is stored, and that store only reaches 16-bit elements < i. */
    uint64_t n = t->numel;
    uint8_t *raw = (uint8_t *)dst + n * 2u;
    int st = hz_st_read_raw(set, t, raw);
    if (st != HZ_OK) return st;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2u * i, 2);
        float f = t->dtype == HZ_DTYPE_BF16 ? hz_bf16_to_f32(h) : hz_f16_to_f32(h);
        memcpy((uint8_t *)dst + 4u * i, &f, 4);
    }
    return HZ_OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* Streaming writer                                                                                  */

struct hz_st_writer {
    char *path;
    hz_outfile out; /* written here, given path's name by finish: a failure never leaves a partial file
                     * at path nor removes what was there */
    uint64_t total;   /* declared data bytes */
    uint64_t written; /* data bytes appended so far */
    uint32_t n;
    char **names;   /* to name the tensor a short write stopped in */
    uint64_t *ends; /* cumulative data end of each declared tensor */
};

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(sbuf *b, uint64_t v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sb_put(b, tmp, (size_t)n);
}

static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            sb_put(b, esc, 2);
        } else if (*p < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static int cmp_cstr_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void writer_free(hz_st_writer *w) {
    if (!w) return;
    hz_outfile_abort(&w->out); /* nothing left to discard once finish committed it */
    if (w->names)
        for (uint32_t i = 0; i < w->n; i++) free(w->names[i]);
    free(w->names);
    free(w->ends);
    free(w->path);
    free(w);
}

static int check_decls(const char *path, const hz_st_decl *decls, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        const hz_st_decl *d = &decls[i];
        if (!d->name || !d->name[0]) return hz_error(HZ_EINVAL, "%s: declaration %u has no name", path, i);
        if (strcmp(d->name, "__metadata__") == 0)
            return hz_error(HZ_EINVAL, "%s: '__metadata__' is reserved, not a tensor name", path);
        if (hz_dtype_size(d->dtype) == 0)
            return hz_error(HZ_EINVAL, "%s: tensor '%s': unknown dtype %d", path, d->name, (int)d->dtype);
        if (d->ndim > HZ_ST_MAX_DIMS)
            return hz_error(HZ_EINVAL, "%s: tensor '%s': %u dimensions (at most %u)", path, d->name, d->ndim,
                            HZ_ST_MAX_DIMS);
    }
    const char **sorted = hz_calloc(n ? n : 1, sizeof *sorted);
    if (!sorted) return HZ_ENOMEM;
    for (uint32_t i = 0; i < n; i++) sorted[i] = decls[i].name;
    qsort(sorted, n, sizeof *sorted, cmp_cstr_ptr);
    int st = HZ_OK;
    for (uint32_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            st = hz_error(HZ_EINVAL, "%s: tensor '%s' declared twice", path, sorted[i]);
            break;
        }
    }
    free(sorted);
    return st;
}

int hz_st_writer_create(const char *path, const hz_st_decl *decls, uint32_t n, hz_st_writer **out) {
    if (out) *out = NULL;
    if (!path || !out || (!decls && n)) return hz_error(HZ_EINVAL, "hz_st_writer_create: NULL argument");
    int st = check_decls(path, decls, n);
    if (st != HZ_OK) return st;

    hz_st_writer *w = hz_calloc(1, sizeof *w);
    if (!w) return HZ_ENOMEM;
    w->path = hz_strdup(path);
    w->names = hz_calloc(n ? n : 1, sizeof *w->names);
    w->ends = hz_calloc(n ? n : 1, sizeof *w->ends);
    if (!w->path || !w->names || !w->ends) {
        writer_free(w);
        return HZ_ENOMEM;
    }
    w->n = n;

    sbuf hb = {0};
    sb_str(&hb, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        const hz_st_decl *d = &decls[i];
        uint64_t nbytes = hz_dtype_size(d->dtype), end;
        for (uint32_t k = 0; k < d->ndim; k++) {
            if (!hz_mul_ok(nbytes, d->shape[k], &nbytes) || d->shape[k] > (uint64_t)ST_MAX_EXACT_INT) {
                free(hb.p);
                writer_free(w);
                return hz_error(HZ_ERANGE, "%s: tensor '%s': byte length overflows", path, d->name);
            }
        }
        if (!hz_add_ok(at, nbytes, &end) || end > (uint64_t)ST_MAX_EXACT_INT) {
            free(hb.p);
            writer_free(w);
            return hz_error(HZ_ERANGE, "%s: tensor '%s': data offsets overflow", path, d->name);
        }
        w->names[i] = hz_strdup(d->name);
        if (!w->names[i]) {
            free(hb.p);
            writer_free(w);
            return HZ_ENOMEM;
        }
        w->ends[i] = end;
        sb_put(&hb, ",", 1);
        sb_json_string(&hb, d->name);
        sb_str(&hb, ":{\"dtype\":\"");
        sb_str(&hb, hz_dtype_name(d->dtype));
        sb_str(&hb, "\",\"shape\":[");
        for (uint32_t k = 0; k < d->ndim; k++) {
            if (k) sb_put(&hb, ",", 1);
            sb_u64(&hb, d->shape[k]);
        }
        sb_str(&hb, "],\"data_offsets\":[");
        sb_u64(&hb, at);
        sb_put(&hb, ",", 1);
        sb_u64(&hb, end);
        sb_str(&hb, "]}");
        at = end;
    }
    sb_put(&hb, "}", 1);
    /* The data buffer starts 8-byte aligned, as the reference writer arranges, by padding with spaces. */
    while (!hb.oom && hb.len % 8u != 0) sb_put(&hb, " ", 1);
    if (hb.oom) {
        free(hb.p);
        writer_free(w);
        return hz_error(HZ_ENOMEM, "%s: out of memory building the header", path);
    }
    if (hb.len > HZ_ST_MAX_HEADER) {
        free(hb.p);
        writer_free(w);
        return hz_error(HZ_ERANGE, "%s: header of %zu bytes exceeds the bound of %u", path, hb.len,
                        HZ_ST_MAX_HEADER);
    }
    w->total = at;

    st = hz_outfile_create(path, &w->out);
    if (st != HZ_OK) {
        free(hb.p);
        writer_free(w);
        return st;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hb.len >> (8 * i));
    st = hz_outfile_write(&w->out, len8, 8);
    if (st == HZ_OK) st = hz_outfile_write(&w->out, hb.p, hb.len);
    free(hb.p);
    if (st != HZ_OK) {
        hz_st_writer_abort(w);
        return st;
    }
    *out = w;
    return HZ_OK;
}

int hz_st_writer_write(hz_st_writer *w, const void *data, uint64_t bytes) {
    if (!w || (!data && bytes)) return hz_error(HZ_EINVAL, "hz_st_writer_write: NULL argument");
    if (bytes > w->total - w->written)
        return hz_error(HZ_EINVAL, "%s: write of %llu bytes at %llu runs past the %llu declared data bytes",
                        w->path, (unsigned long long)bytes, (unsigned long long)w->written,
                        (unsigned long long)w->total);
    int st = hz_outfile_write(&w->out, data, bytes);
    if (st != HZ_OK) return st;
    w->written += bytes;
    return HZ_OK;
}

int hz_st_writer_finish(hz_st_writer *w) {
    hz_outfile done = {.fd = -1};
    int st = hz_st_writer_finish_pending(w, &done);
    return st ? st : hz_outfile_commit(&done); /* closes before the rename: a close error leaves path as it was */
}

int hz_st_writer_finish_pending(hz_st_writer *w, hz_outfile *out) {
    *out = (hz_outfile){.fd = -1};
    if (!w) return hz_error(HZ_EINVAL, "hz_st_writer_finish: NULL writer");
    if (w->written != w->total) {
        uint32_t i = 0;
        while (i < w->n && w->ends[i] <= w->written) i++;
        int st = hz_error(HZ_EINVAL, "%s: only %llu of %llu data bytes written: tensor '%s' is incomplete",
                          w->path, (unsigned long long)w->written, (unsigned long long)w->total,
                          i < w->n ? w->names[i] : "?");
        hz_st_writer_abort(w);
        return st;
    }
    /* synced here, as the artifact is: the commit that follows renames only complete data into place */
    int st = hz_outfile_sync(&w->out);
    if (st) {
        hz_st_writer_abort(w);
        return st;
    }
    *out = w->out; /* the caller commits it */
    w->out = (hz_outfile){.fd = -1};
    writer_free(w);
    return HZ_OK;
}

void hz_st_writer_abort(hz_st_writer *w) {
    writer_free(w); /* discards the output file, never w->path: whatever was there stays */
}
