#include "report_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int report_file_write(const char *tool, const char *path, const char *text) {
    if (strcmp(path, "-") == 0) {
        if (fputs(text, stdout) < 0 || fputc('\n', stdout) == EOF || fflush(stdout)) {
            fprintf(stderr, "%s: writing the report to stdout: %s\n", tool, strerror(errno));
            return 1;
        }
        return 0;
    }
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) {
        fprintf(stderr, "%s: out of memory\n", tool);
        return 1;
    }
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot create '%s': %s\n", tool, tmp, strerror(errno));
        free(tmp);
        return 1;
    }
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: cannot write '%s': %s\n", tool, path, strerror(errno));
        remove(tmp);
        free(tmp);
        return 1;
    }
    free(tmp);
    return 0;
}
