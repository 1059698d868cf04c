/* A downstream program: built outside the source tree against the installed header and pkg-config file
 * only (see run.sh). Exercises the public contract the way an integrator would: the whole object chain,
 * prefill and decode, logits, JSON observations, an error with its message, the EBUSY refusal, and an
 * options struct from an "older header" (a smaller struct_size). Exit 0 = pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <horizon/horizon.h>

#define CHECK(call)                                                                                    \
    do {                                                                                               \
        int st_ = (call);                                                                              \
        if (st_ != HZ_OK) {                                                                            \
            fprintf(stderr, "consumer: %s: %s: %s\n", #call, hz_status_name(st_), hz_last_error_message()); \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "consumer: expectation failed: %s\n", #cond);                              \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer MODEL.hzq\n");
        return 2;
    }
    EXPECT(hz_version_number() / 10000 == HZ_VERSION_MAJOR); /* same major = ABI compatible */

    hz_host_backing *missing = NULL;
    int st = hz_host_backing_open("/nonexistent/model.hzq", NULL, &missing);
    EXPECT(st == HZ_EIO && missing == NULL);
    EXPECT(strstr(hz_last_error_message(), "/nonexistent/model.hzq") != NULL);

    hz_host_backing *backing = NULL;
    hz_device *device = NULL;
    hz_cache *cache = NULL;
    hz_model *model = NULL;
    hz_session *session = NULL;
    CHECK(hz_host_backing_open(argv[1], NULL, &backing));
    CHECK(hz_device_open("cpu", &device));

    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = 4; /* half the tiny model's experts: decode must miss and publish */
    CHECK(hz_cache_create(backing, device, &co, &cache));

    /* A caller built against an older header passes a shorter struct: only struct_size is known. */
    hz_model_options old;
    memset(&old, 0, sizeof old);
    old.struct_size = sizeof(uint32_t);
    CHECK(hz_model_create(backing, device, cache, &old, &model));

    hz_model_info info;
    hz_model_info_init(&info);
    CHECK(hz_model_get_info(model, &info));
    CHECK(hz_session_create(model, NULL, &session));

    EXPECT(hz_host_backing_close(backing) == HZ_EBUSY); /* children live: refused, nothing freed */
    EXPECT(hz_model_destroy(model) == HZ_EBUSY);

    int32_t prompt[3] = {1, 2, 3}, next = -1;
    CHECK(hz_prefill(session, prompt, 3, &next));
    for (int i = 0; i < 8; i++) CHECK(hz_decode_step(session, next, &next));
    EXPECT(next >= 0 && (uint32_t)next < info.vocab_size);
    EXPECT(hz_session_position(session) == 11);

    const float *logits = NULL;
    uint32_t n = 0;
    CHECK(hz_session_logits(session, &logits, &n));
    EXPECT(logits != NULL && n == info.vocab_size);

    int32_t bad = (int32_t)info.vocab_size;
    EXPECT(hz_decode_step(session, bad, &next) == HZ_ERANGE);
    EXPECT(strstr(hz_last_error_message(), "vocabulary") != NULL);

    char *stats = NULL, *describe = NULL;
    CHECK(hz_cache_stats_json(cache, &stats));
    CHECK(hz_model_describe_json(model, &describe));
    EXPECT(strstr(stats, "\"misses\"") && strstr(stats, "\"expert_d2h_bytes\":0"));
    EXPECT(strstr(describe, "\"architecture\":\"olmoe\""));
    printf("consumer: libhorizon %s, %u tokens of vocabulary, last token %d\n", hz_version(),
           info.vocab_size, (int)next);
    hz_free(stats);
    hz_free(describe);

    hz_session_destroy(session);
    CHECK(hz_model_destroy(model));
    CHECK(hz_cache_destroy(cache));
    CHECK(hz_device_close(device));
    CHECK(hz_host_backing_close(backing));
    printf("consumer: ok\n");
    return 0;
}
