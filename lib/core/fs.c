/* File helpers shared by the readers and writers (lib/core/core.h): inputs must be regular files,
 * outputs may replace only regular files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int hz_file_create_beside(const char *path, char **out_tmp, int *out_fd) {
    *out_tmp = NULL;
    *out_fd = -1;
    int st = hz_file_check_output(path);
    if (st) return st;
    size_t tl = strlen(path) + sizeof ".tmp.XXXXXX";
    char *tmp = malloc(tl);
    if (!tmp) return hz_error(HZ_ENOMEM, "%s: out of memory", path);
    snprintf(tmp, tl, "%s.tmp.XXXXXX", path);
    char eb[128];
    int fd = mkostemp(tmp, O_CLOEXEC);
    /* mkostemp creates 0600; an output is ordinary data, readable like the input it came from (umask is
     * not consulted: reading it means changing it, which races with other threads) */
    if (fd < 0 || fchmod(fd, 0644) != 0) {
        st = hz_error(HZ_EIO, "%s: cannot create: %s", tmp, strerror_r(errno, eb, sizeof eb));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return st;
    }
    *out_tmp = tmp;
    *out_fd = fd;
    return HZ_OK;
}

int hz_file_check_output(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return HZ_OK; /* absent (or unreachable: creating it will say why) */
    if (!S_ISREG(sb.st_mode))
        return hz_error(HZ_EINVAL, "%s exists and is not a regular file: refusing to replace it", path);
    return HZ_OK;
}
