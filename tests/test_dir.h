/* What a writer leaves in a directory, for the cmocka tests that check it (include after <cmocka.h>):
 * output files are unnamed until complete where the filesystem allows it (lib/core/fs.c). */
#ifndef HZ_TESTS_TEST_DIR_H
#define HZ_TESTS_TEST_DIR_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Entries of `dir` other than . and ..; the first one's name is copied to `first` (may be NULL). */
static inline int hz_test_count_entries(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n++ == 0 && first) snprintf(first, cap, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

/* Whether this filesystem gives unnamed (O_TMPFILE) files, asked directly rather than through the code
 * under test: where it does not, the writers fall back to a named temporary (which a killed process
 * leaves behind), and only that form can be checked there. */
static inline int hz_test_have_unnamed(const char *dir) {
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
        print_message("note: no O_TMPFILE in %s: only the named temporary is checked there\n", dir);
        return 0;
    }
    close(fd);
    return 1;
}

#endif
