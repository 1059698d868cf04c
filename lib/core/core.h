/* lib/core: status and thread-local error detail, logging, memory and small helpers shared by every
 * module. Internal: nothing here is installed. */
#ifndef HZ_CORE_H
#define HZ_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "horizon/horizon.h"

#if defined(__GNUC__)
#define HZ_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define HZ_EXPORT __attribute__((visibility("default")))
#else
#define HZ_PRINTF(fmt_idx, arg_idx)
#define HZ_EXPORT
#endif

/* Stores a formatted detail message for `status` in the calling thread's last-error buffer and returns
 * `status`, so a failing path reads `return hz_error(HZ_EFORMAT, "...", ...);`. */
int hz_error(int status, const char *fmt, ...) HZ_PRINTF(2, 3);
int hz_verror(int status, const char *fmt, va_list ap);
/* Prefixes the current last-error message with "prefix: " (keeps the status). Returns status. */
int hz_error_prefix(int status, const char *fmt, ...) HZ_PRINTF(2, 3);
/* Clears the calling thread's last-error message. */
void hz_error_clear(void);

/* Opens `path` read-only (close-on-exec) only if it is a regular file: a FIFO, device or directory is
 * refused with HZ_EIO instead of blocking or being read as data. *out_size (may be NULL) is its size. */
int hz_file_open_regular(const char *path, int *out_fd, uint64_t *out_size);
/* HZ_OK when `path` is absent or a regular file; HZ_EINVAL (naming it) when something else is there,
 * which an output written as a temporary file and renamed over it would silently replace. */
int hz_file_check_output(const char *path);
/* An output being written: created by hz_outfile_create, then either hz_outfile_commit (which gives it
 * the name `path`, replacing what was there at once) or hz_outfile_abort (which leaves what was there).
 * Where the kernel and filesystem allow it (O_TMPFILE), the file has no name at all until commit, so a
 * process killed while writing leaves nothing behind; elsewhere it is written as path.tmp.XXXXXX
 * beside `path`. Either way it is in path's directory (so the final rename is atomic), mode 0644
 * whatever the umask, close-on-exec. A zeroed struct is a valid "none" for hz_outfile_abort. */
typedef struct hz_outfile {
    int fd;      /* write here; -1 once committed or aborted */
    char *path;  /* the name it gets on commit */
    char *tmp;   /* its temporary name: NULL while it has none */
    char *label; /* "<path> (unnamed temporary)", which names it in messages while it has none */
} hz_outfile;

/* Checks `path` with hz_file_check_output, then creates the file (*out is empty on failure, with
 * nothing left behind). Unnamed where possible, else named (hz_outfile_create_named). */
int hz_outfile_create(const char *path, hz_outfile *out);
/* Always the named form, path.tmp.XXXXXX: the fallback of hz_outfile_create, callable so that tests
 * exercise it where the unnamed form is available. */
int hz_outfile_create_named(const char *path, hz_outfile *out);
/* The name for messages about the file: its temporary name, or its label while it has none. */
const char *hz_outfile_name(const hz_outfile *f);
/* Appends n bytes at the file's offset (short writes and EINTR retried); HZ_EIO naming the file. */
int hz_outfile_write(hz_outfile *f, const void *data, uint64_t n);
/* fsync, so that commit renames only data that is on disk; HZ_EIO naming the file. */
int hz_outfile_sync(hz_outfile *f);
/* Names an unnamed file path.tmp.XXXXXX (linkat), closes it, renames it over `path`. Does not fsync:
 * a caller that wants the data on disk first calls fsync(f->fd). On failure nothing is left beside
 * `path` and what was at `path` stays. Empties *f in every case. */
int hz_outfile_commit(hz_outfile *f);
/* Closes and discards the file (unlinks a named one; never `path`), empties *f. NULL, a zeroed struct
 * and a committed or aborted one are allowed: nothing happens. */
void hz_outfile_abort(hz_outfile *f);

/* Logging through the installed callback (no-op without one). */
void hz_log(int level, const char *fmt, ...) HZ_PRINTF(2, 3);

/* A shape for a message: "[d0]", "[d0, d1]", ... ("[]" for ndim 0), truncated to fit n bytes. Returns
 * buf. */
const char *hz_shape_text(char *buf, size_t n, uint32_t ndim, const uint64_t *shape);

/* Allocation helpers: set HZ_ENOMEM detail on failure. */
void *hz_malloc(size_t n);
void *hz_calloc(size_t count, size_t size);
char *hz_strdup(const char *s);
/* Overflow-checked size arithmetic: return 0 on overflow, 1 otherwise. */
static inline int hz_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int hz_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline uint64_t hz_align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
/* A tuning knob from the environment: 1 with *out = its value when `name` holds a decimal number in
 * [min, max]; 0 otherwise, *out untouched (the caller's default stands). */
int hz_env_u32(const char *name, uint32_t min, uint32_t max, uint32_t *out);

/* The body of every public hz_*_init_sized: `defaults` is the complete default struct as this library
 * knows it (`known` bytes, starting with the uint32_t struct_size). Copies its first min(size, known)
 * bytes to `dst`, zeroes dst's bytes from `known` up to `size` (fields of a newer header that this
 * library does not know: zero is their old behaviour) and stores `size` in dst's struct_size. Never
 * writes past dst + size. Does nothing when dst is NULL or size is below sizeof(uint32_t) (the
 * struct_size field itself) or above UINT32_MAX (struct_size could not hold it). */
void hz_options_fill(void *dst, size_t size, const void *defaults, size_t known);

/* The caller's options over the defaults already in `o` (`known` bytes, starting with the uint32_t
 * struct_size): copies the first min(opts->struct_size, known) bytes of opts, then sets o's struct_size
 * to `known`. opts NULL: o stays as it is. HZ_EINVAL, with "<who>: options struct_size N too small",
 * when the caller's struct_size is below `min` (at least the struct_size field itself). */
int hz_options_merge(void *o, size_t known, const void *opts, size_t min, const char *who);

/* Monotonic clock in seconds. */
double hz_now_seconds(void);

#endif
