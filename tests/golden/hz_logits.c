/* hz_logits: runs a prompt plus greedy steps through the public API and writes every step's logits, for
 * comparisons against transformers at full model size (tests/golden/fullsize_check.py).
 *
 *   hz_logits MODEL.hzq DEVICE RESIDENT STEPS PROMPT OUT.bin [EXECUTOR]
 *
 * PROMPT is comma-separated token ids. OUT.bin: int32 steps, int32 vocab, int32 tokens[steps], then
 * float32 logits[steps][vocab] (step 0 = the logits after the prompt; token i = greedy pick of step i).
 * Greedy picks follow the library's sampler (the largest logit, ties to the lowest id). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <horizon/horizon.h>

static int fail(const char *what, int st) {
    fprintf(stderr, "hz_logits: %s: %s: %s\n", what, hz_status_name(st), hz_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: hz_logits MODEL.hzq DEVICE RESIDENT STEPS PROMPT OUT.bin [EXECUTOR]\n");
        return 2;
    }
    uint32_t resident = (uint32_t)strtoul(argv[3], NULL, 10);
    int32_t steps = (int32_t)strtol(argv[4], NULL, 10);
    int32_t prompt[512];
    uint32_t n_prompt = 0;
    for (char *p = argv[5]; *p && n_prompt < 512;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        prompt[n_prompt++] = (int32_t)v;
        p = (*end == ',') ? end + 1 : end;
    }
    if (steps < 1 || n_prompt == 0) {
        fprintf(stderr, "hz_logits: need steps >= 1 and a prompt\n");
        return 2;
    }

    hz_host_backing *b = NULL;
    hz_device *d = NULL;
    hz_cache *c = NULL;
    hz_model *m = NULL;
    hz_session *s = NULL;
    int st;
    if ((st = hz_host_backing_open(argv[1], NULL, &b))) return fail("backing", st);
    if ((st = hz_device_open(argv[2], &d))) return fail("device", st);
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = resident;
    if ((st = hz_cache_create(b, d, &co, &c))) return fail("cache", st);
    hz_model_options mo;
    hz_model_options_init(&mo);
    mo.executor = argc > 7 ? argv[7] : "auto";
    if ((st = hz_model_create(b, d, c, &mo, &m))) return fail("model", st);
    hz_session_options so;
    hz_session_options_init(&so);
    so.max_context = n_prompt + (uint32_t)steps + 1;
    if ((st = hz_session_create(m, &so, &s))) return fail("session", st);

    hz_model_info info;
    hz_model_info_init(&info);
    hz_model_get_info(m, &info);
    int32_t *tokens = calloc((size_t)steps, sizeof *tokens);
    float *all = malloc((size_t)steps * info.vocab_size * sizeof *all);
    if (!tokens || !all) return 1;
    int32_t next = 0;
    for (int32_t i = 0; i < steps; i++) {
        st = i == 0 ? hz_prefill(s, prompt, n_prompt, &next) : hz_decode_step(s, tokens[i - 1], &next);
        if (st) return fail(i == 0 ? "prefill" : "decode", st);
        const float *lg;
        uint32_t n;
        if ((st = hz_session_logits(s, &lg, &n))) return fail("logits", st);
        memcpy(all + (size_t)i * n, lg, n * sizeof *lg);
        tokens[i] = next;
    }
    FILE *f = fopen(argv[6], "wb");
    if (!f) return fail("output", HZ_EIO);
    int32_t hdr[2] = {steps, (int32_t)info.vocab_size};
    fwrite(hdr, sizeof hdr, 1, f);
    fwrite(tokens, sizeof *tokens, (size_t)steps, f);
    fwrite(all, sizeof *all, (size_t)steps * info.vocab_size, f);
    if (fclose(f) != 0) return fail("output", HZ_EIO);
    char *stats = NULL;
    if (hz_cache_stats_json(c, &stats) == HZ_OK) printf("%s\n", stats);
    hz_free(stats);
    free(tokens);
    free(all);
    hz_session_destroy(s);
    hz_model_destroy(m);
    hz_cache_destroy(c);
    hz_device_close(d);
    hz_host_backing_close(b);
    return 0;
}
