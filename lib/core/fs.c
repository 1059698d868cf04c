/* File helpers shared by the readers and writers (lib/core/core.h): inputs must be regular files,
 * outputs may replace only regular files and are given their name only when complete. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

int hz_file_open_regular(const char *path, int *out_fd, uint64_t *out_size) {
    *out_fd = -1;
    if (out_size) *out_size = 0;
    char eb[128];
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer before the check below
     * could refuse it. It is cleared again: regular files ignore it, but the descriptor is handed on. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return hz_error(HZ_EIO, "%s: cannot open: %s", path, strerror_r(errno, eb, sizeof eb));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return hz_error(HZ_EIO, "%s: cannot stat: %s", path, strerror_r(err, eb, sizeof eb));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return hz_error(HZ_EIO, "%s: not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return hz_error(HZ_EIO, "%s: fcntl failed: %s", path, strerror_r(err, eb, sizeof eb));
    }
    *out_fd = fd;
    if (out_size) *out_size = (uint64_t)sb.st_size;
    return HZ_OK;
}

/* The temporary's name beside `path` (same directory, so the rename is atomic), caller frees. */
static char *tmp_template(const char *path) {
    size_t n = strlen(path) + sizeof ".tmp.XXXXXX";
    char *tmp = malloc(n);
    if (tmp) snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    return tmp;
}

/* Frees what `f` holds and marks it empty: abort and commit are then no-ops. */
static void outfile_release(hz_outfile *f) {
    free(f->path);
    free(f->tmp);
    free(f->label);
    *f = (hz_outfile){.fd = -1};
}

/* The named form: path.tmp.XXXXXX, which a process killed while writing leaves behind. */
static int create_named(const char *path, hz_outfile *out) {
    char eb[128];
    out->path = hz_strdup(path);
    out->tmp = tmp_template(path);
    if (!out->path || !out->tmp) {
        outfile_release(out);
        return hz_error(HZ_ENOMEM, "%s: out of memory", path);
    }
    int fd = mkostemp(out->tmp, O_CLOEXEC);
    /* mkostemp creates 0600; an output is ordinary data, readable like the input it came from (umask is
     * not consulted: reading it means changing it, which races with other threads) */
    if (fd < 0 || fchmod(fd, 0644) != 0) {
        int st = hz_error(HZ_EIO, "%s: cannot create: %s", out->tmp, strerror_r(errno, eb, sizeof eb));
        if (fd >= 0) {
            close(fd);
            unlink(out->tmp);
        }
        outfile_release(out);
        return st;
    }
    out->fd = fd;
    return HZ_OK;
}

#ifdef O_TMPFILE
/* The directory an output is created in: what precedes the last slash, "." without one. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return hz_strdup(".");
    if (slash == path) return hz_strdup("/");
    size_t n = (size_t)(slash - path);
    char *dir = hz_malloc(n + 1);
    if (dir) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    return dir;
}

/* What open(O_TMPFILE) answers where the kernel (EISDIR, EINVAL, ENOENT on old kernels) or the
 * filesystem (EOPNOTSUPP) lacks it: the named form is used instead. */
static int tmpfile_unsupported(int err) {
    return err == EOPNOTSUPP || err == EISDIR || err == EINVAL || err == ENOENT;
}

/* The unnamed form: a file in path's directory that has no name until commit links it, so a process
 * killed while writing leaves nothing. *unsupported = 1 (nothing reported) where it cannot be had. */
static int create_unnamed(const char *path, hz_outfile *out, int *unsupported) {
    char eb[128];
    *unsupported = 0;
    char *dir = dir_of(path);
    if (!dir) return hz_error(HZ_ENOMEM, "%s: out of memory", path);
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0 && tmpfile_unsupported(errno)) {
        free(dir);
        *unsupported = 1;
        return HZ_OK;
    }
    /* 0644 & ~umask so far; fchmod makes it 0644 as in the named form (umask is not read, see there) */
    if (fd < 0 || fchmod(fd, 0644) != 0) {
        int st = hz_error(HZ_EIO, "%s: cannot create a temporary file in %s: %s", path, dir,
                          strerror_r(errno, eb, sizeof eb));
        if (fd >= 0) close(fd);
        free(dir);
        return st;
    }
    free(dir);
    static const char unnamed[] = " (unnamed temporary)";
    out->path = hz_strdup(path);
    out->label = hz_malloc(strlen(path) + sizeof unnamed);
    if (!out->path || !out->label) {
        close(fd);
        outfile_release(out);
        return hz_error(HZ_ENOMEM, "%s: out of memory", path);
    }
    snprintf(out->label, strlen(path) + sizeof unnamed, "%s%s", path, unnamed);
    out->fd = fd;
    return HZ_OK;
}
#endif

int hz_outfile_create_named(const char *path, hz_outfile *out) {
    *out = (hz_outfile){.fd = -1};
    int st = hz_file_check_output(path);
    return st ? st : create_named(path, out);
}

int hz_outfile_create(const char *path, hz_outfile *out) {
    *out = (hz_outfile){.fd = -1};
    int st = hz_file_check_output(path);
    if (st) return st;
    int unsupported = 1;
#ifdef O_TMPFILE
    st = create_unnamed(path, out, &unsupported);
#endif
    return st || !unsupported ? st : create_named(path, out);
}

const char *hz_outfile_name(const hz_outfile *f) { return f->tmp ? f->tmp : f->label; }

int hz_outfile_write(hz_outfile *f, const void *data, uint64_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        const size_t step = n > (1u << 30) ? (size_t)1 << 30 : (size_t)n;
        const ssize_t r = write(f->fd, p, step);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            char eb[128];
            return hz_error(HZ_EIO, "%s: write failed: %s", hz_outfile_name(f),
                            r < 0 ? strerror_r(errno, eb, sizeof eb) : "nothing written");
        }
        p += r;
        n -= (uint64_t)r;
    }
    return HZ_OK;
}

int hz_outfile_sync(hz_outfile *f) {
    char eb[128];
    if (fsync(f->fd) != 0)
        return hz_error(HZ_EIO, "%s: fsync failed: %s", hz_outfile_name(f), strerror_r(errno, eb, sizeof eb));
    return HZ_OK;
}

/* Six characters for a fresh name beside the output. Random where getrandom answers, else from the
 * clock; a name that is taken only costs a retry (linkat fails with EEXIST, it never replaces). */
static void fresh_suffix(char x[6]) {
    static _Atomic uint64_t counter;
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12);
    }
    r ^= atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 6; i++, r /= 62) x[i] = set[r % 62];
}

/* Gives the unnamed file open as `fd` the name `name`: through /proc/self/fd, which any process may link
 * from, else with AT_EMPTY_PATH (which older kernels allow only with CAP_DAC_READ_SEARCH). 0, or -1
 * with errno from the last attempt and *proc_err from the /proc one. */
static int link_unnamed(int fd, const char *name, int *proc_err) {
    char from[40];
    snprintf(from, sizeof from, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, from, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0) return 0;
    *proc_err = errno;
    if (errno == EEXIST) return -1;
#ifdef AT_EMPTY_PATH
    return linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH);
#else
    return -1;
#endif
}

enum { LINK_TRIES = 16 };

/* Names an unnamed file path.tmp.XXXXXX; commit renames it over path from there, as for the named
 * form (linkat cannot replace what is at path). Sets f->tmp. */
static int name_unnamed(hz_outfile *f) {
    char eb[128], eb2[128];
    char *tmp = tmp_template(f->path);
    if (!tmp) return hz_error(HZ_ENOMEM, "%s: out of memory", f->path);
    int proc_err = 0, err = EEXIST;
    for (int i = 0; i < LINK_TRIES && err == EEXIST; i++) {
        fresh_suffix(tmp + strlen(tmp) - 6);
        if (link_unnamed(f->fd, tmp, &proc_err) == 0) {
            f->tmp = tmp;
            return HZ_OK;
        }
        err = errno;
    }
    int st = err == EEXIST
                 ? hz_error(HZ_EIO, "%s: linkat: no free temporary name beside it in %d tries", f->path,
                            LINK_TRIES)
                 : hz_error(HZ_EIO, "%s: cannot link it as %s: through /proc/self/fd: %s%s; with "
                                    "AT_EMPTY_PATH: %s",
                            f->label, tmp, strerror_r(proc_err, eb, sizeof eb),
                            proc_err == ENOENT ? " (is /proc mounted?)" : "",
                            strerror_r(err, eb2, sizeof eb2));
    free(tmp);
    return st;
}

int hz_outfile_commit(hz_outfile *f) {
    if (!f || !f->path) return hz_error(HZ_EINVAL, "hz_outfile_commit: no file");
    int st = f->tmp ? HZ_OK : name_unnamed(f);
    char eb[128];
    /* closed before the rename, so that an error close reports (a deferred write on NFS) leaves what
     * was at path; an unnamed file is linked first, as closing it would discard it */
    if (!st) {
        int fd = f->fd;
        f->fd = -1;
        if (close(fd) != 0)
            st = hz_error(HZ_EIO, "%s: close failed: %s", f->tmp, strerror_r(errno, eb, sizeof eb));
    }
    if (!st && rename(f->tmp, f->path) != 0)
        st = hz_error(HZ_EIO, "rename %s -> %s failed: %s", f->tmp, f->path,
                      strerror_r(errno, eb, sizeof eb));
    if (st) {
        hz_outfile_abort(f);
        return st;
    }
    outfile_release(f);
    return HZ_OK;
}

void hz_outfile_abort(hz_outfile *f) {
    if (!f || !f->path) return; /* never created, or committed or aborted already */
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp); /* never f->path: whatever was there stays */
    outfile_release(f);
}

int hz_file_check_output(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return HZ_OK; /* absent (or unreachable: creating it will say why) */
    if (!S_ISREG(sb.st_mode))
        return hz_error(HZ_EINVAL, "%s exists and is not a regular file: refusing to replace it", path);
    return HZ_OK;
}
