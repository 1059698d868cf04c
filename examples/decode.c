/* decode: the reference integration of libhorizon. Uses only the public header.
 *
 *   decode MODEL.hzq [--device auto|cpu|cuda:N] [--resident N] [--tokens N]
 *                    [--prompt "1,2,3" | --prompt-file F] [--executor NAME]
 *                    [--transport auto|serial|threaded|registered] [--prefetch] [--stop-at-eos] [--json]
 *
 * Opens the artifact as a host backing, opens a device, creates a cache holding N routed experts per
 * layer (0 or absent: all), creates the model and a session, prefills the prompt, then decodes greedily.
 * Prints the token ids, the prefill and decode rates and a summary of the cache's counters. With --json
 * the last line of stdout is one JSON object: tokens, decode_tok_s, executor, resident and every cache
 * counter (hz_cache_stats_json).
 * Exit status 0 on success, 1 on any error (the message goes to stderr). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <horizon/horizon.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: decode MODEL.hzq [--device auto|cpu|cuda:N] [--resident N] [--tokens N]\n"
            "                        [--prompt \"1,2,3\" | --prompt-file F] [--executor NAME]\n"
            "                        [--transport auto|serial|threaded|registered] [--prefetch] [--stop-at-eos]\n"
            "                        [--json]\n"
            "  --device     device to run on (default auto)\n"
            "  --resident   routed experts kept on the device per layer (default 0 = all)\n"
            "  --tokens     tokens to generate (default 16)\n"
            "  --prompt     prompt token ids, separated by commas or spaces (default: the BOS token,\n"
            "               or token 0 when the model has none)\n"
            "  --prompt-file  read the prompt token ids from a file\n"
            "  --executor   routed-expert executor (default auto)\n"
            "  --transport  how missed experts reach the device (default auto): serial stages each one\n"
            "               through pinned memory on the decoding thread, threaded splits those copies over\n"
            "               a thread pool, registered lets the device copy straight from the backing's\n"
            "               pages in process memory (registered for DMA: no staging copy), auto takes\n"
            "               registered when experts will miss and threaded otherwise or where the\n"
            "               registration fails (HZ_TRANSPORT_AUTO)\n"
            "  --prefetch   while a layer computes, start loading the experts the next layer's router\n"
            "               predicts from the current hidden state (HZ_PREFETCH_NEXT_LAYER; the cache pauses\n"
            "               the predictions while fewer than a quarter of them are used)\n"
            "  --stop-at-eos  stop when the model produces its EOS token\n"
            "  --json       print one final JSON line\n");
}

/* Parses an unsigned decimal argument. */
static int parse_u32(const char *s, const char *what, uint32_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || v > UINT32_MAX || s[0] == '-') {
        fprintf(stderr, "decode: %s must be a non-negative integer, got '%s'\n", what, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* Token ids separated by commas and/or whitespace. Returns the count, or -1 (message printed). */
static long parse_tokens(const char *text, int32_t **out) {
    size_t cap = 16, n = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        fprintf(stderr, "decode: out of memory\n");
        return -1;
    }
    const char *p = text;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *end = NULL;
        errno = 0;
        long long t = strtoll(p, &end, 10);
        if (end == p || errno || t < INT32_MIN || t > INT32_MAX) {
            fprintf(stderr, "decode: prompt: '%.20s' is not a token id\n", p);
            free(v);
            return -1;
        }
        if (n == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                fprintf(stderr, "decode: out of memory\n");
                return -1;
            }
            v = nv;
        }
        v[n++] = (int32_t)t;
        p = end;
    }
    *out = v;
    return (long)n;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "decode: cannot open prompt file '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "decode: cannot read prompt file '%s'\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* The raw text of a top-level scalar field of a flat JSON object ("key": value), for the summary
 * line. Writes "?" when absent. */
static void json_field(const char *json, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) {
        snprintf(out, cap, "?");
        return;
    }
    p += strlen(pat);
    while (*p == ' ') p++;
    size_t n = 0;
    if (*p == '"') {
        p++;
        while (p[n] && p[n] != '"') n++;
    } else {
        while (p[n] && p[n] != ',' && p[n] != '}' && p[n] != ' ') n++;
    }
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

static int fail(const char *what, int status) {
    fprintf(stderr, "decode: %s failed: %s (%s): %s\n", what, hz_strerror(status), hz_status_name(status),
            hz_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *device_name = "auto", *prompt_text = NULL, *prompt_file = NULL;
    const char *executor = "auto", *transport = "auto";
    uint32_t resident = 0, n_tokens = 16;
    int json = 0, stop_eos = 0, prefetch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--stop-at-eos") == 0) {
            stop_eos = 1;
        } else if (strcmp(a, "--prefetch") == 0) {
            prefetch = 1;
        } else if (strcmp(a, "--device") == 0 && has_value) {
            device_name = argv[++i];
        } else if (strcmp(a, "--executor") == 0 && has_value) {
            executor = argv[++i];
        } else if (strcmp(a, "--transport") == 0 && has_value) {
            transport = argv[++i];
        } else if (strcmp(a, "--prompt") == 0 && has_value) {
            prompt_text = argv[++i];
        } else if (strcmp(a, "--prompt-file") == 0 && has_value) {
            prompt_file = argv[++i];
        } else if (strcmp(a, "--resident") == 0 && has_value) {
            if (parse_u32(argv[++i], "--resident", &resident)) return 1;
        } else if (strcmp(a, "--tokens") == 0 && has_value) {
            if (parse_u32(argv[++i], "--tokens", &n_tokens)) return 1;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "decode: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 1;
        } else if (!model_path) {
            model_path = a;
        } else {
            fprintf(stderr, "decode: unexpected argument '%s'\n", a);
            usage(stderr);
            return 1;
        }
    }
    if (!model_path) {
        usage(stderr);
        return 1;
    }
    if (prompt_text && prompt_file) {
        fprintf(stderr, "decode: give --prompt or --prompt-file, not both\n");
        return 1;
    }
    if (n_tokens == 0) {
        fprintf(stderr, "decode: --tokens must be at least 1\n");
        return 1;
    }
    int32_t transport_id;
    if (strcmp(transport, "auto") == 0) transport_id = HZ_TRANSPORT_AUTO;
    else if (strcmp(transport, "serial") == 0) transport_id = HZ_TRANSPORT_SERIAL;
    else if (strcmp(transport, "threaded") == 0) transport_id = HZ_TRANSPORT_THREADED;
    else if (strcmp(transport, "registered") == 0) transport_id = HZ_TRANSPORT_REGISTERED;
    else {
        fprintf(stderr, "decode: unknown transport '%s' (auto, serial, threaded or registered)\n", transport);
        return 1;
    }

    int rc = 1, st;
    int32_t *prompt = NULL, *out_tokens = NULL;
    long n_prompt = 0;
    char *file_text = NULL, *cache_json = NULL, *model_json = NULL;
    hz_host_backing *backing = NULL;
    hz_device *device = NULL;
    hz_cache *cache = NULL;
    hz_model *model = NULL;
    hz_session *session = NULL;

    if (prompt_file) {
        if (!(file_text = read_file(prompt_file))) goto done;
        prompt_text = file_text;
    }
    if (prompt_text) {
        if ((n_prompt = parse_tokens(prompt_text, &prompt)) < 0) goto done;
        if (n_prompt == 0) {
            fprintf(stderr, "decode: the prompt has no tokens\n");
            goto done;
        }
    }

    double t_open = now_s();
    if ((st = hz_host_backing_open(model_path, NULL, &backing))) {
        rc = fail("opening the model", st);
        goto done;
    }
    if ((st = hz_device_open(device_name, &device))) {
        rc = fail("opening the device", st);
        goto done;
    }
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = resident;
    co.transport = transport_id; /* threaded: staging_threads 0 = 3/4 of the online CPUs, at most 12 */
    co.prefetch = prefetch ? HZ_PREFETCH_NEXT_LAYER : HZ_PREFETCH_OFF;
    if ((st = hz_cache_create(backing, device, &co, &cache))) {
        rc = fail("creating the cache", st);
        goto done;
    }
    hz_model_options mo;
    hz_model_options_init(&mo);
    mo.executor = executor;
    if ((st = hz_model_create(backing, device, cache, &mo, &model))) {
        rc = fail("creating the model", st);
        goto done;
    }
    hz_model_info info;
    hz_model_info_init(&info);
    if ((st = hz_model_get_info(model, &info))) {
        rc = fail("reading the model info", st);
        goto done;
    }
    if ((st = hz_model_describe_json(model, &model_json))) {
        rc = fail("describing the model", st);
        goto done;
    }
    if (!prompt) {
        if (!(prompt = malloc(sizeof *prompt))) {
            fprintf(stderr, "decode: out of memory\n");
            goto done;
        }
        prompt[0] = info.bos_token >= 0 ? info.bos_token : 0;
        n_prompt = 1;
    }
    uint64_t want = (uint64_t)n_prompt + n_tokens;
    if (want > info.max_context) {
        fprintf(stderr, "decode: %ld prompt tokens + %u generated exceed the model's context of %u\n", n_prompt,
                n_tokens, info.max_context);
        goto done;
    }
    hz_session_options so;
    hz_session_options_init(&so);
    so.max_context = (uint32_t)want;
    if ((st = hz_session_create(model, &so, &session))) {
        rc = fail("creating the session", st);
        goto done;
    }
    double setup_s = now_s() - t_open;

    char executor_name[64], arch[32];
    json_field(model_json, "executor", executor_name, sizeof executor_name);
    json_field(model_json, "architecture", arch, sizeof arch);
    uint32_t resident_eff = resident ? resident : info.experts;
    if (!json)
        printf("model %s (%s), device %s, executor %s, %u of %u routed experts resident per layer, setup %.3f s\n",
               model_path, arch, hz_device_name(device), executor_name, resident_eff, info.experts, setup_s);

    if (!(out_tokens = malloc((size_t)n_tokens * sizeof *out_tokens))) {
        fprintf(stderr, "decode: out of memory\n");
        goto done;
    }
    /* Prefill yields the first generated token; each decode step feeds the previous one. */
    int32_t next = -1;
    double t0 = now_s();
    if ((st = hz_prefill(session, prompt, (uint32_t)n_prompt, &next))) {
        rc = fail("prefill", st);
        goto done;
    }
    double prefill_s = now_s() - t0;
    uint32_t produced = 0;
    out_tokens[produced++] = next;
    t0 = now_s();
    while (produced < n_tokens && !(stop_eos && next == info.eos_token)) {
        if ((st = hz_decode_step(session, next, &next))) {
            rc = fail("decode step", st);
            goto done;
        }
        out_tokens[produced++] = next;
    }
    double decode_s = now_s() - t0;
    uint32_t decode_steps = produced - 1;
    double prefill_tok_s = prefill_s > 0 ? (double)n_prompt / prefill_s : 0.0;
    double decode_tok_s = decode_s > 0 && decode_steps > 0 ? (double)decode_steps / decode_s : 0.0;

    if ((st = hz_cache_stats_json(cache, &cache_json))) {
        rc = fail("reading the cache stats", st);
        goto done;
    }
    if (json) {
        printf("{\"model\":\"");
        for (const char *p = model_path; *p; p++) /* a path is the only free text: escape it */
            if (*p == '"' || *p == '\\')
                printf("\\%c", *p);
            else if ((unsigned char)*p < 0x20)
                printf("\\u%04x", (unsigned)(unsigned char)*p);
            else
                putchar(*p);
        printf("\",\"architecture\":\"%s\",\"device\":\"%s\",\"executor\":\"%s\",\"resident\":%u,\"experts\":%u,"
               "\"prompt_tokens\":%ld,\"tokens\":[",
               arch, hz_device_name(device), executor_name, resident_eff, info.experts, n_prompt);
        for (uint32_t i = 0; i < produced; i++) printf("%s%d", i ? "," : "", (int)out_tokens[i]);
        printf("],\"prefill_seconds\":%.6f,\"prefill_tok_s\":%.3f,\"decode_steps\":%u,\"decode_seconds\":%.6f,"
               "\"decode_tok_s\":%.3f,\"cache\":%s}\n",
               prefill_s, prefill_tok_s, decode_steps, decode_s, decode_tok_s, cache_json);
    } else {
        printf("prompt (%ld tokens):", n_prompt);
        for (long i = 0; i < n_prompt; i++) printf(" %d", (int)prompt[i]);
        printf("\ntokens (%u):", produced);
        for (uint32_t i = 0; i < produced; i++) printf(" %d", (int)out_tokens[i]);
        printf("\nprefill: %ld tokens in %.4f s (%.1f tok/s)\n", n_prompt, prefill_s, prefill_tok_s);
        printf("decode:  %u steps in %.4f s (%.1f tok/s)\n", decode_steps, decode_s, decode_tok_s);
        char hits[32], misses[32], h2d[32], d2h[32];
        json_field(cache_json, "hits", hits, sizeof hits);
        json_field(cache_json, "misses", misses, sizeof misses);
        json_field(cache_json, "h2d_bytes", h2d, sizeof h2d);
        json_field(cache_json, "expert_d2h_bytes", d2h, sizeof d2h);
        char state[32], generation[32], publications[32];
        json_field(cache_json, "state", state, sizeof state);
        json_field(cache_json, "generation", generation, sizeof generation);
        json_field(cache_json, "publications", publications, sizeof publications);
        printf("cache:   hits %s, misses %s, H2D bytes %s, expert D2H bytes %s\n", hits, misses, h2d, d2h);
        char transport_used[32], transport_asked[32];
        json_field(cache_json, "transport", transport_used, sizeof transport_used);
        json_field(cache_json, "transport_requested", transport_asked, sizeof transport_asked);
        char asked[40] = ""; /* " (auto)" when the cache chose the transport */
        if (strcmp(transport_used, transport_asked) != 0) snprintf(asked, sizeof asked, " (%s)", transport_asked);
        printf("         state %s, generation %s after %s publications, transport %s%s\n", state, generation,
               publications, transport_used, asked);
        printf("         (--json prints every counter)\n");
    }
    rc = 0;

done:
    hz_session_destroy(session);
    /* Children first; each destroy only fails while a child lives, which cannot happen here. */
    if (hz_model_destroy(model) || hz_cache_destroy(cache) || hz_device_close(device) ||
        hz_host_backing_close(backing)) {
        fprintf(stderr, "decode: shutdown failed: %s\n", hz_last_error_message());
        rc = 1;
    }
    hz_free(cache_json);
    hz_free(model_json);
    free(out_tokens);
    free(prompt);
    free(file_text);
    return rc;
}
