/* A downstream program built against an OLDER header than the library it runs with: run.sh makes that
 * header from the installed one by dropping the last field of hz_cache_options (prefetch) and of
 * hz_model_info (bos_token), as a header from before those fields were appended had them. Each struct
 * is followed in memory by a guard. The *_init macros of that header must fill only the bytes its
 * structs have (struct_size = the older sizeof), never the guard; hz_cache_create must then behave as
 * with defaults for the field the program does not know (not read the guard as `prefetch`), and
 * hz_model_get_info must write only struct_size bytes. Exit 0 = pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <horizon/horizon.h>

#define CHECK(call)                                                                                    \
    do {                                                                                               \
        int st_ = (call);                                                                              \
        if (st_ != HZ_OK) {                                                                            \
            fprintf(stderr, "older: %s: %s: %s\n", #call, hz_status_name(st_), hz_last_error_message()); \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "older: expectation failed: %s\n", #cond);                                 \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

enum { GUARD_WORDS = 8 };
#define GUARD_BYTE 0x5a

/* The struct as the caller declares it, and the caller's next variable right behind it. */
struct cache_frame {
    hz_cache_options co;
    int32_t guard[GUARD_WORDS];
};
struct info_frame {
    hz_model_info info;
    int32_t guard[GUARD_WORDS];
};

static int guard_is(const int32_t *guard, int32_t word) {
    for (int i = 0; i < GUARD_WORDS; i++)
        if (guard[i] != word) return 0;
    return 1;
}

static int guard_untouched(const int32_t *guard) {
    const unsigned char *b = (const unsigned char *)guard;
    for (size_t i = 0; i < GUARD_WORDS * sizeof(int32_t); i++)
        if (b[i] != GUARD_BYTE) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: older MODEL.hzq\n");
        return 2;
    }
    /* The library's own sizes, through the compatibility entry points (they fill the library's
     * sizeof): the header this program was built with must really be older, or the test proves
     * nothing. */
    union {
        unsigned char bytes[512];
        uint64_t align;
    } probe;
    uint32_t lib_cache_size = 0, lib_info_size = 0;
    memset(&probe, 0, sizeof probe);
    (hz_cache_options_init)((hz_cache_options *)(void *)&probe);
    memcpy(&lib_cache_size, probe.bytes, sizeof lib_cache_size); /* struct_size comes first */
    memset(&probe, 0, sizeof probe);
    (hz_model_info_init)((hz_model_info *)(void *)&probe);
    memcpy(&lib_info_size, probe.bytes, sizeof lib_info_size);
    printf("older: hz_cache_options %u bytes here, %u in the library; hz_model_info %u here, %u there\n",
           (unsigned)sizeof(hz_cache_options), lib_cache_size, (unsigned)sizeof(hz_model_info),
           lib_info_size);
    EXPECT(sizeof(hz_cache_options) < lib_cache_size);
    EXPECT(sizeof(hz_model_info) < lib_info_size);

    hz_host_backing *backing = NULL;
    hz_device *device = NULL;
    hz_cache *cache = NULL;
    hz_model *model = NULL;
    CHECK(hz_host_backing_open(argv[1], NULL, &backing));
    CHECK(hz_device_open("cpu", &device));

    /* init through the header's macro: only the older struct's bytes, struct_size = its sizeof */
    struct cache_frame cf;
    memset(&cf, 0xff, sizeof cf.co);
    memset(cf.guard, GUARD_BYTE, sizeof cf.guard);
    hz_cache_options_init(&cf.co);
    EXPECT(guard_untouched(cf.guard));
    EXPECT(cf.co.struct_size == sizeof cf.co);
    EXPECT(cf.co.capacity == 0 && cf.co.spare_rows == 0 && cf.co.staging_bytes == 0);
    EXPECT(cf.co.eviction == HZ_EVICT_LRU && cf.co.transport == HZ_TRANSPORT_SERIAL);
    EXPECT(cf.co.initial_placement == NULL && cf.co.initial_placement_count == 0);
    EXPECT(cf.co.staging_threads == 0);

    /* The caller's next variable now holds a value that, read as the newer struct's `prefetch`, would
     * turn prefetching on: the library must use its default for the field this program lacks. */
    for (int i = 0; i < GUARD_WORDS; i++) cf.guard[i] = HZ_PREFETCH_NEXT_LAYER;
    cf.co.capacity = 4;
    CHECK(hz_cache_create(backing, device, &cf.co, &cache));
    EXPECT(guard_is(cf.guard, HZ_PREFETCH_NEXT_LAYER));
    char *stats = NULL;
    CHECK(hz_cache_stats_json(cache, &stats));
    EXPECT(strstr(stats, "\"prefetch\":\"off\"") != NULL);
    EXPECT(strstr(stats, "\"transport\":\"serial\"") != NULL);
    hz_free(stats);

    CHECK(hz_model_create(backing, device, cache, NULL, &model));
    struct info_frame inf;
    memset(&inf.info, 0xff, sizeof inf.info);
    memset(inf.guard, GUARD_BYTE, sizeof inf.guard);
    hz_model_info_init(&inf.info);
    EXPECT(guard_untouched(inf.guard));
    EXPECT(inf.info.struct_size == sizeof inf.info && inf.info.vocab_size == 0);
    CHECK(hz_model_get_info(model, &inf.info));
    EXPECT(guard_untouched(inf.guard)); /* only struct_size bytes written */
    EXPECT(inf.info.struct_size == sizeof inf.info);
    EXPECT(inf.info.vocab_size > 0 && inf.info.layers > 0 && inf.info.top_k > 0);

    CHECK(hz_model_destroy(model));
    CHECK(hz_cache_destroy(cache));
    CHECK(hz_device_close(device));
    CHECK(hz_host_backing_close(backing));
    printf("older: ok\n");
    return 0;
}
