/* lib/core: status names and messages, the thread-local last error, fp16/bf16 conversion, tuning
 * knobs from the environment, output files (hz_outfile: nothing named in the directory until commit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/core.h"
#include "../../test_dir.h"
#include "core/fp16.h"

static void test_names_and_messages(void **state) {
    (void)state;
    assert_string_equal(hz_status_name(HZ_OK), "HZ_OK");
    assert_string_equal(hz_status_name(HZ_EFORMAT), "HZ_EFORMAT");
    assert_string_equal(hz_status_name(HZ_EFAULTED), "HZ_EFAULTED");
    assert_string_equal(hz_status_name(12345), "HZ_UNKNOWN");
    assert_string_equal(hz_strerror(HZ_OK), "success");
    assert_string_equal(hz_strerror(-999), "unknown status");
    /* every code from the X-macro has a distinct name and a non-empty message */
#define CHECK_(name, value, message)                                                                \
    assert_string_equal(hz_status_name(value), #name);                                               \
    assert_true(strlen(hz_strerror(value)) > 0);
    HZ_STATUS_LIST(CHECK_)
#undef CHECK_
}

static void test_version(void **state) {
    (void)state;
    assert_int_equal(hz_version_number(), HZ_VERSION_NUMBER);
    assert_string_equal(hz_version(), "0.1.0");
}

static void *other_thread(void *arg) {
    (void)arg;
    /* a fresh thread sees an empty, non-NULL message */
    const char *m = hz_last_error_message();
    return (void *)(m != NULL && m[0] == '\0' ? (void *)1 : NULL);
}

static void test_last_error_is_thread_local(void **state) {
    (void)state;
    assert_non_null(hz_last_error_message());
    assert_int_equal(hz_error(HZ_EFORMAT, "tensor '%s' bad", "x.weight"), HZ_EFORMAT);
    assert_string_equal(hz_last_error_message(), "tensor 'x.weight' bad");
    hz_error_prefix(HZ_EFORMAT, "file %s", "a.safetensors");
    assert_string_equal(hz_last_error_message(), "file a.safetensors: tensor 'x.weight' bad");
    pthread_t t;
    void *ok = NULL;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &ok);
    assert_non_null(ok);
    assert_string_equal(hz_last_error_message(), "file a.safetensors: tensor 'x.weight' bad");
}

static void test_fp16_roundtrip(void **state) {
    (void)state;
    /* every finite binary16 value converts to f32 and back to the same bits */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;
        float f = hz_f16_to_f32((hz_f16)h);
        hz_f16 back = hz_f32_to_f16(f);
        if (h == 0x8000u) assert_int_equal(back, 0x8000u);
        else assert_int_equal(back, h);
    }
    assert_float_equal(hz_f16_to_f32(hz_f32_to_f16(1.0f)), 1.0f, 0.0f);
    assert_int_equal(hz_f32_to_f16(65504.0f), 0x7bffu);
    assert_int_equal(hz_f32_to_f16(65520.0f), 0x7c00u);         /* rounds to inf */
    assert_int_equal(hz_f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00u); /* tie -> even */
    assert_int_equal(hz_f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02u); /* tie -> even (up) */
    assert_int_equal(hz_f32_to_f16(5.9604644775390625e-8f), 0x0001u); /* smallest subnormal */
    assert_true(hz_f16_fits(65504.0f));
    assert_false(hz_f16_fits(70000.0f));
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(hz_f32_to_bf16(1.0f), 0x3f80u);
    assert_float_equal(hz_bf16_to_f32(0x3f80u), 1.0f, 0.0f);
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1) */
    assert_int_equal(hz_f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80u);
    for (uint32_t h = 0; h < 0x10000u; h += 7) {
        if (((h >> 7) & 0xff) == 0xff) continue;
        assert_int_equal(hz_f32_to_bf16(hz_bf16_to_f32((hz_bf16)h)), h);
    }
}

/* hz_env_u32: a decimal number in range replaces the default; anything else leaves it. */
static void test_env_u32(void **state) {
    (void)state;
    static const struct {
        const char *val;
        int ok;
        uint32_t want;
    } cases[] = {{"7", 1, 7}, {"2", 1, 2}, {"9", 1, 9}, {"1", 0, 5}, {"10", 0, 5},
                 {"", 0, 5}, {"7x", 0, 5}, {"-3", 0, 5}, {"99999999999999999999", 0, 5}};
    uint32_t v = 5;
    unsetenv("HZ_TEST_KNOB");
    assert_int_equal(hz_env_u32("HZ_TEST_KNOB", 2, 9, &v), 0);
    assert_int_equal(v, 5);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        v = 5;
        setenv("HZ_TEST_KNOB", cases[i].val, 1);
        assert_int_equal(hz_env_u32("HZ_TEST_KNOB", 2, 9, &v), cases[i].ok);
        assert_int_equal(v, cases[i].want);
    }
    unsetenv("HZ_TEST_KNOB");
}

/* hz_shape_text: only the dimensions there are ([256] for one, never [2560]), truncated to the buffer. */
static void test_shape_text(void **state) {
    (void)state;
    const uint64_t shape[3] = {256, 64, 18446744073709551615ull};
    char buf[64];
    assert_string_equal(hz_shape_text(buf, sizeof buf, 1, shape), "[256]");
    assert_string_equal(hz_shape_text(buf, sizeof buf, 2, shape), "[256, 64]");
    assert_string_equal(hz_shape_text(buf, sizeof buf, 3, shape), "[256, 64, 18446744073709551615]");
    assert_string_equal(hz_shape_text(buf, sizeof buf, 0, shape), "[]");
    char small[8];
    assert_string_equal(hz_shape_text(small, sizeof small, 2, shape), "[256, 6");
    assert_string_equal(hz_shape_text(small, 1, 2, shape), "");
}

/* A fresh empty directory (in the build tree, where the outputs of the suite go), caller frees. */
static char *fresh_dir(void) {
    const char *root = getenv("HZ_BUILD_ROOT");
    char *d = malloc(4096);
    assert_non_null(d);
    snprintf(d, 4096, "%s/hz-test-outfile-XXXXXX", root && root[0] ? root : "/tmp");
    assert_non_null(mkdtemp(d));
    return d;
}


static void remove_dir_flat(char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    char p[4096];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}


static void write_str(const hz_outfile *f, const char *s) {
    assert_int_equal(write(f->fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* The file at `path` holds `want` and has mode 0644. */
static void expect_file(const char *path, const char *want) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0644);
    char got[64] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    assert_string_equal(got, want);
}

/* hz_outfile_create: while the file is written the directory holds nothing new (a process killed then
 * leaves nothing); commit gives it its name with mode 0644 whatever the umask; abort leaves what was
 * there. */
static void test_outfile_unnamed(void **state) {
    (void)state;
    char *dir = fresh_dir();
    const int unnamed = hz_test_have_unnamed(dir);
    char path[4200], first[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    const mode_t old_mask = umask(077);
    hz_outfile f;
    assert_int_equal(hz_outfile_create(path, &f), HZ_OK);
    write_str(&f, "first");
    if (unnamed) {
        assert_null(f.tmp);
        assert_int_equal(hz_test_count_entries(dir, NULL, 0), 0);
        assert_non_null(strstr(hz_outfile_name(&f), path));
        assert_non_null(strstr(hz_outfile_name(&f), "(unnamed temporary)"));
    } else {
        assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    }
    assert_int_equal(hz_outfile_commit(&f), HZ_OK);
    assert_int_equal(f.fd, -1);
    assert_null(f.path);
    assert_int_equal(hz_test_count_entries(dir, first, sizeof first), 1);
    assert_string_equal(first, "out.bin");
    expect_file(path, "first");
    hz_outfile_abort(&f); /* committed: nothing happens */
    expect_file(path, "first");

    /* an aborted rewrite leaves the earlier file and nothing else; abort again and NULL are no-ops */
    assert_int_equal(hz_outfile_create(path, &f), HZ_OK);
    write_str(&f, "second");
    if (unnamed) assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    hz_outfile_abort(&f);
    hz_outfile_abort(&f);
    hz_outfile_abort(NULL);
    hz_outfile zero = {0}; /* a writer's calloc'd struct before create: no file, fd 0 not touched */
    hz_outfile_abort(&zero);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    expect_file(path, "first");

    /* a committed rewrite replaces it */
    assert_int_equal(hz_outfile_create(path, &f), HZ_OK);
    write_str(&f, "third");
    assert_int_equal(hz_outfile_commit(&f), HZ_OK);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    expect_file(path, "third");
    assert_int_equal(hz_outfile_commit(&f), HZ_EINVAL); /* nothing left to commit */
    umask(old_mask);
    remove_dir_flat(dir);
}

/* hz_outfile_create_named, the fallback where there are no unnamed files: path.tmp.XXXXXX beside the
 * path while written, mode 0644; commit renames it, abort removes it. */
static void test_outfile_named(void **state) {
    (void)state;
    char *dir = fresh_dir();
    char path[4200], first[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    const mode_t old_mask = umask(077);
    hz_outfile f;
    assert_int_equal(hz_outfile_create_named(path, &f), HZ_OK);
    assert_non_null(f.tmp);
    assert_string_equal(hz_outfile_name(&f), f.tmp);
    write_str(&f, "named");
    assert_int_equal(hz_test_count_entries(dir, first, sizeof first), 1);
    assert_int_equal(strncmp(first, "out.bin.tmp.", 12), 0);
    assert_int_equal(strlen(first), strlen("out.bin.tmp.XXXXXX"));
    assert_int_equal(hz_outfile_commit(&f), HZ_OK);
    assert_int_equal(hz_test_count_entries(dir, first, sizeof first), 1);
    assert_string_equal(first, "out.bin");
    expect_file(path, "named");

    assert_int_equal(hz_outfile_create_named(path, &f), HZ_OK);
    write_str(&f, "discarded");
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 2);
    hz_outfile_abort(&f);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    expect_file(path, "named");
    umask(old_mask);
    remove_dir_flat(dir);
}

/* What cannot be an output is refused before anything is created, and the message names the path. */
static void test_outfile_refused(void **state) {
    (void)state;
    char *dir = fresh_dir();
    char path[4200];
    hz_outfile f;
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(hz_outfile_create(path, &f), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), path));
    assert_int_equal(f.fd, -1);
    assert_int_equal(hz_outfile_create_named(path, &f), HZ_EINVAL);
    unlink(path);
    snprintf(path, sizeof path, "%s/no/such/dir/out.bin", dir);
    assert_int_equal(hz_outfile_create(path, &f), HZ_EIO);
    assert_non_null(strstr(hz_last_error_message(), path));
    assert_non_null(strstr(hz_last_error_message(), "cannot create"));
    assert_int_equal(f.fd, -1);
    assert_null(f.path);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 0);
    remove_dir_flat(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_messages),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_last_error_is_thread_local),
        cmocka_unit_test(test_fp16_roundtrip),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_env_u32),
        cmocka_unit_test(test_shape_text),
        cmocka_unit_test(test_outfile_unnamed),
        cmocka_unit_test(test_outfile_named),
        cmocka_unit_test(test_outfile_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
