/* hz-inspect: prints a Horizon artifact's manifest summary; --verify also checks every checksum and the
 * whole-artifact identity. Exit status 0 for an artifact whose header and manifest are valid (with
 * --verify: whose every checksum and identity match too). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "format/artifact.h"
#include "format/hfconfig.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hz-inspect [--verify] FILE.hzq\n"
               "Prints the artifact's identity, architecture, config, precision and inventory;\n"
               "--verify checks every blob and tensor checksum and the identity (exit 1 on the first "
               "mismatch).\n");
}

static int fail(int rc) {
    fprintf(stderr, "hz-inspect: %s: %s\n", hz_status_name(rc), hz_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"verify", no_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int verify = 0, ch;
    while ((ch = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
        switch (ch) {
        case 'v':
            verify = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    int fd;
    if (hz_file_open_regular(path, &fd, NULL) != HZ_OK) {
        fprintf(stderr, "hz-inspect: HZ_EIO: %s\n", hz_last_error_message());
        return 1;
    }
    hz_artifact *art = NULL;
    int rc = hz_artifact_read_meta(fd, path, &art);
    if (rc) {
        close(fd);
        return fail(rc);
    }
    const hz_model_config *c = &art->cfg;
    char id[HZ_IDENTITY_HEX_BYTES];
    hz_artifact_identity_hex(&art->header, id);
    uint64_t nr_bytes = 0;
    for (uint32_t i = 0; i < art->n_tensors; i++) nr_bytes += art->tensors[i].bytes;
    printf("file: %s\n", path);
    printf("identity: %s\n", id);
    printf("format: %s version %u\n", HZ_ARTIFACT_FORMAT_NAME, art->header.version);
    printf("architecture: %s\n", hz_arch_name(c->arch));
    printf("config: hidden %u, layers %u, heads %u, kv heads %u, head_dim %u, vocab %u, experts %u, "
           "top-k %u, expert width %u, shared expert width %u, max positions %u, rope theta %g, "
           "rms eps %g\n",
           c->hidden, c->layers, c->heads, c->kv_heads, c->head_dim, c->vocab, c->experts, c->top_k,
           c->expert_inter, c->shared_inter, c->max_pos, (double)c->rope_theta, (double)c->rms_eps);
    printf("precision: source %s, routed int4 (block %u, scale f16), activation f16, non-routed f16\n",
           art->source_dtype, HZ_QBLOCK);
    printf("source identity: %s\n", art->source_identity);
    printf("non-routed tensors: %u (%llu bytes)\n", art->n_tensors, (unsigned long long)nr_bytes);
    printf("routed experts: %u layers x %u experts = %llu blobs of %llu bytes (stride %llu)\n",
           c->layers, c->experts, (unsigned long long)art->n_blobs,
           (unsigned long long)art->layout.blob_bytes, (unsigned long long)art->blob_stride);
    printf("routed region: %llu bytes at offset %llu\n", (unsigned long long)art->routed_bytes,
           (unsigned long long)art->routed_offset);
    printf("manifest: %llu bytes at offset %llu\n", (unsigned long long)art->header.manifest_bytes,
           (unsigned long long)art->header.manifest_offset);
    printf("file bytes: %llu\n", (unsigned long long)art->header.file_bytes);
    fflush(stdout);
    if (verify) {
        double t0 = hz_now_seconds();
        rc = hz_artifact_load(fd, path, art, NULL, 0);
        if (rc) {
            hz_artifact_free(art);
            close(fd);
            printf("verify: FAILED\n");
            return fail(rc);
        }
        printf("verify: OK (%u tensor and %llu blob checksums, identity) in %.2f s\n", art->n_tensors,
               (unsigned long long)art->n_blobs, hz_now_seconds() - t0);
    }
    hz_artifact_free(art);
    close(fd);
    return 0;
}
