/* A tool's report file (hz-bench, hz-ceilings): the text and a newline, written beside the target as
 * PATH.tmp.PID and renamed over it, so a failed run never leaves half a report under the target's name
 * and what was there stays. PATH "-" writes to stdout. Messages go to stderr, prefixed with `tool`.
 * Returns 0, or 1 after printing why. */
#ifndef HZ_TOOLS_REPORT_FILE_H
#define HZ_TOOLS_REPORT_FILE_H

int report_file_write(const char *tool, const char *path, const char *text);

#endif
