/* Public devices and events: thin wrappers over a backend and its events. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/json.h"

void hz_device_child_add(hz_device *d) { atomic_fetch_add_explicit(&d->children, 1, memory_order_acq_rel); }

void hz_device_child_remove(hz_device *d) { atomic_fetch_sub_explicit(&d->children, 1, memory_order_acq_rel); }

int hz_device_wrap(hz_backend *be, hz_device **out) {
    if (!out) {
        hz_backend_destroy(be);
        return hz_error(HZ_EINVAL, "hz_device_wrap: NULL out");
    }
    *out = NULL;
    if (!be) return hz_error(HZ_EINVAL, "hz_device_wrap: NULL backend");
    if (be->ops->version != HZ_BACKEND_INTERFACE_VERSION) {
        int st = hz_error(HZ_EUNSUPPORTED, "backend '%s' implements interface version %u, expected %u",
                          be->name, be->ops->version, HZ_BACKEND_INTERFACE_VERSION);
        hz_backend_destroy(be);
        return st;
    }
    hz_device *d = calloc(1, sizeof *d);
    if (!d) {
        hz_backend_destroy(be);
        return hz_error(HZ_ENOMEM, "out of memory for a device");
    }
    d->be = be;
    atomic_init(&d->children, 0);
    *out = d;
    return HZ_OK;
}

/* "cuda:N" with N a plain decimal ordinal. */
static int parse_cuda_ordinal(const char *name, int *out) {
    const char *p = name + 5;
    if (*p == '\0') return 0;
    long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
        if (v > 1024) return 0;
    }
    *out = (int)v;
    return 1;
}

int hz_device_open(const char *name, hz_device **out) {
    if (out) *out = NULL;
    if (!name || !out) return hz_error(HZ_EINVAL, "hz_device_open: NULL argument");
    hz_backend *be = NULL;
    int st;
    if (strcmp(name, "cpu") == 0) {
        st = hz_backend_cpu_create(&be);
    } else if (strncmp(name, "cuda:", 5) == 0) {
        int ordinal = 0;
        if (!parse_cuda_ordinal(name, &ordinal))
            return hz_error(HZ_EINVAL, "hz_device_open: '%s' is not a device name (\"cpu\", \"cuda:N\", \"auto\")", name);
        st = hz_backend_cuda_create(ordinal, &be);
    } else if (strcmp(name, "auto") == 0) {
        /* Any failure to bring up cuda:0 (no CUDA build, no GPU, driver error) falls back to cpu. */
        st = hz_backend_cuda_create(0, &be);
        if (st != HZ_OK) {
            hz_log(HZ_LOG_INFO, "device auto: cuda:0 unavailable (%s); using cpu", hz_last_error_message());
            hz_error_clear();
            st = hz_backend_cpu_create(&be);
        }
    } else {
        return hz_error(HZ_EINVAL, "hz_device_open: unknown device '%s' (expected \"cpu\", \"cuda:N\" or \"auto\")", name);
    }
    if (st != HZ_OK) return st;
    return hz_device_wrap(be, out);
}

int hz_device_close(hz_device *device) {
    if (!device) return HZ_OK;
    int n = atomic_load_explicit(&device->children, memory_order_acquire);
    if (n > 0)
        return hz_error(HZ_EBUSY, "device %s: %d cache(s), model(s) or event(s) still live", device->be->name, n);
    hz_backend_destroy(device->be);
    free(device);
    return HZ_OK;
}

const char *hz_device_name(const hz_device *device) { return device ? device->be->name : NULL; }

int hz_device_describe_json(const hz_device *device, char **out) {
    if (out) *out = NULL;
    if (!device || !out) return hz_error(HZ_EINVAL, "hz_device_describe_json: NULL argument");
    hz_backend *be = device->be;
    int ok = 1;
    cJSON *root = cJSON_CreateObject(); /* NULL: every add below fails, hz_json_finish reports it */
    hz_json_str(root, "backend", be->ops->kind, &ok);
    hz_json_str(root, "name", be->name, &ok);
    hz_json_num(root, "interface_version", be->ops->version, &ok);
    uint64_t mfree = 0, mtotal = 0;
    cJSON *mem = hz_json_obj(root, "memory", &ok);
    if (be->ops->mem_info(be, &mfree, &mtotal) == HZ_OK) {
        hz_json_num(mem, "free_bytes", (double)mfree, &ok);
        hz_json_num(mem, "total_bytes", (double)mtotal, &ok);
    } else {
        /* The cpu backend has no separate device memory to report. */
        hz_json_str(mem, "free_bytes", "UNSUPPORTED", &ok);
        hz_json_str(mem, "total_bytes", "UNSUPPORTED", &ok);
    }
    hz_error_clear();
    cJSON *xf = hz_json_obj(root, "transfers", &ok);
    for (int d = 0; d < HZ_DIR_COUNT; d++) {
        cJSON *dir = hz_json_obj(xf, hz_xfer_dir_name((hz_xfer_dir)d), &ok);
        for (int p = 0; p < HZ_PURPOSE_COUNT; p++) {
            cJSON *pp = hz_json_obj(dir, hz_xfer_purpose_name((hz_xfer_purpose)p), &ok);
            hz_json_num(pp, "bytes", (double)atomic_load(&be->bytes[d][p]), &ok);
            hz_json_num(pp, "copies", (double)atomic_load(&be->copies[d][p]), &ok);
        }
    }
    hz_json_num(root, "children", atomic_load(&((hz_device *)device)->children), &ok);
    /* a malloc'd string: callers free with hz_free (free) */
    *out = hz_json_finish(root, ok, 0);
    return *out ? HZ_OK : hz_error(HZ_ENOMEM, "hz_device_describe_json: out of memory");
}

int hz_event_create(hz_device *device, hz_event **out) {
    if (out) *out = NULL;
    if (!device || !out) return hz_error(HZ_EINVAL, "hz_event_create: NULL argument");
    hz_event *e = calloc(1, sizeof *e);
    if (!e) return hz_error(HZ_ENOMEM, "out of memory for an event");
    int st = device->be->ops->event_create(device->be, &e->ev);
    if (st) {
        free(e);
        return st;
    }
    e->device = device;
    /* Events are children too: closing the device under a live event would free its backend. */
    hz_device_child_add(device);
    *out = e;
    return HZ_OK;
}

void hz_event_destroy(hz_event *event) {
    if (!event) return;
    hz_device *d = event->device;
    d->be->ops->event_destroy(d->be, event->ev);
    hz_device_child_remove(d);
    free(event);
}

int hz_event_record(hz_event *event) {
    if (!event) return hz_error(HZ_EINVAL, "hz_event_record: NULL event");
    hz_backend *be = event->device->be;
    return be->ops->event_record(be, event->ev, HZ_QUEUE_COMPUTE);
}

/* The public contract promises HZ_OK, HZ_EBUSY or HZ_EDEVICE; backend detail stays in the message. */
static int device_status(int st) {
    return (st == HZ_OK || st == HZ_EBUSY || st == HZ_EINVAL) ? st : HZ_EDEVICE;
}

int hz_event_query(hz_event *event) {
    if (!event) return hz_error(HZ_EINVAL, "hz_event_query: NULL event");
    hz_backend *be = event->device->be;
    return device_status(be->ops->event_query(be, event->ev));
}

int hz_event_synchronize(hz_event *event) {
    if (!event) return hz_error(HZ_EINVAL, "hz_event_synchronize: NULL event");
    hz_backend *be = event->device->be;
    return device_status(be->ops->event_wait(be, event->ev));
}
