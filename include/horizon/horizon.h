/*
 * horizon.h -- the public interface of libhorizon.
 *
 * libhorizon runs mixture-of-experts (MoE) language models whose routed experts do not all fit in GPU
 * memory. Routed experts are stored as INT4 "qpacked" weights (blocks of 256 values along K, one FP16
 * scale per block). A complete, immutable copy of every expert lives in process memory (the host
 * backing); a device holds a budgeted subset of them (the cache). A routed expert that is missing on the
 * device is copied host -> pinned staging -> an unpublished device row and then published atomically as
 * part of a new, complete cache generation. Executors compute on the qpacked rows with FP16 activations.
 *
 * This header is the whole contract. It compiles alone as C11 and as C++.
 *
 * Conventions (they hold for every function unless its comment says otherwise):
 *
 *  - Status. Functions that can fail return an `int` holding an hz_status: HZ_OK (0) on success, a
 *    negative code otherwise. On failure a message naming what is wrong (which file, offset, tensor,
 *    expert or device call) is stored in a thread-local buffer read with hz_last_error_message(). The
 *    library never aborts or exits the process and never prints unless a log callback is installed.
 *  - Out parameters are the last arguments and are named `out`/`out_*`. On failure `*out` is set to
 *    NULL (or zero) when out itself is not NULL.
 *  - Ownership. An object returned through `out` by a *_open / *_create call is owned by the caller and
 *    released with the matching *_close / *_destroy call, all of which accept NULL. Strings returned by
 *    *_json calls are owned by the caller and released with hz_free(). Pointers returned by getters are
 *    owned by the object they were read from and stay valid while it lives.
 *  - Lifetimes. Children hold no reference on their parents: a backing and a device must outlive every
 *    cache and model created on them (a device also every event), a cache must outlive its models, a
 *    model its sessions. Destroy
 *    calls that would leave live children return HZ_EBUSY and destroy nothing.
 *  - Options. Options structs start with `struct_size`; fill them with the matching *_init macro
 *    (or pass NULL for the defaults). The library reads only the fields it knows, so a program built
 *    against an older header keeps working with a newer library of the same major version.
 *    hz_X_init(p) is a macro for hz_X_init_sized(p, sizeof(hz_X)): it passes the struct's size as the
 *    caller's header knows it, and the library fills defaults into those bytes only, never past them
 *    (a newer library's struct may be larger). The exported functions named hz_X_init themselves
 *    (declared with the name in parentheses, so that the macro does not apply) are the compatibility
 *    entry points for binaries built before the macros: they fill sizeof as the library knows it.
 *    Both kinds touch only *p (NULL: nothing) and may be called from any thread.
 *  - Threading. Unless a function says otherwise, distinct handles may be used from distinct threads
 *    at the same time, and one handle may not be used by two threads at once.
 *
 * Functions marked EXPERIMENTAL may change in any release; everything else follows the ABI promise
 * (same major version = ABI compatible; structs grow only at the end; enums grow only at the end).
 */
#ifndef HORIZON_H
#define HORIZON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------------- */

#define HZ_VERSION_MAJOR 0
#define HZ_VERSION_MINOR 1
#define HZ_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, e.g. 100 for 0.1.0. */
#define HZ_VERSION_NUMBER (HZ_VERSION_MAJOR * 10000 + HZ_VERSION_MINOR * 100 + HZ_VERSION_PATCH)

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". Static string; thread-safe. */
const char *hz_version(void);
/* HZ_VERSION_NUMBER of the library actually loaded. Thread-safe. */
unsigned hz_version_number(void);

/* ---------------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------------- */

/* X(name, value, message). Codes are never renumbered; new ones are added at the end. */
#define HZ_STATUS_LIST(X)                                                                            \
    X(HZ_OK, 0, "success")                                                                           \
    X(HZ_EINVAL, -1, "invalid argument")                                                             \
    X(HZ_ENOMEM, -2, "out of memory")                                                                \
    X(HZ_EIO, -3, "input/output error")                                                              \
    X(HZ_EFORMAT, -4, "malformed file or data")                                                      \
    X(HZ_EIDENTITY, -5, "identity or checksum mismatch")                                             \
    X(HZ_EUNSUPPORTED, -6, "not supported")                                                          \
    X(HZ_ECAPACITY, -7, "insufficient capacity")                                                     \
    X(HZ_EBUSY, -8, "object still in use")                                                           \
    X(HZ_EFAULTED, -9, "cache is in the FAULTED state")                                              \
    X(HZ_EDEVICE, -10, "device error")                                                               \
    X(HZ_ERANGE, -11, "value out of range")                                                          \
    X(HZ_ESTATE, -12, "call not valid in the current state")

#define HZ_STATUS_ENUM_ITEM_(name, value, message) name = value,
typedef enum hz_status { HZ_STATUS_LIST(HZ_STATUS_ENUM_ITEM_) HZ_STATUS_END_ = -13 } hz_status;
#undef HZ_STATUS_ENUM_ITEM_

/* A fixed English sentence for `status` ("unknown status" for codes this library does not know).
 * Static string; thread-safe. */
const char *hz_strerror(int status);
/* The enumerator's name, e.g. "HZ_EFORMAT" ("HZ_UNKNOWN" for unknown codes). Static; thread-safe. */
const char *hz_status_name(int status);
/* The detail of the last failure on the calling thread, e.g.
 * "model.safetensors: tensor 'lm_head.weight': data ends at 1024 past file end 512".
 * Never NULL: "" when nothing has failed yet. Valid until the next libhorizon call on this thread. */
const char *hz_last_error_message(void);

/* Frees a string or buffer that a libhorizon call handed to the caller. NULL is allowed. */
void hz_free(void *ptr);

/* ---------------------------------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------------------------------- */

typedef enum hz_log_level {
    HZ_LOG_ERROR = 0,
    HZ_LOG_WARN = 1,
    HZ_LOG_INFO = 2,
    HZ_LOG_DEBUG = 3
} hz_log_level;

/* Receives one log line (no trailing newline). May be called from any thread the library uses, and
 * while the library holds an internal lock (a cache's, when it reports a fault or a failed prefetch):
 * it must return without calling any hz_ function other than the error and version getters
 * (hz_last_error_message, hz_status_name, ...), or that call may deadlock. Copy the message and act on
 * it after the library call that logged it has returned. */
typedef void (*hz_log_fn)(void *user, int level, const char *message);

/* Installs a process-wide log callback for messages at `max_level` or more severe; NULL silences the
 * library (the default). Not synchronised with calls in flight: install it before creating objects. */
void hz_set_log_callback(hz_log_fn fn, void *user, int max_level);

/* ---------------------------------------------------------------------------------------------------
 * Host backing: the complete, immutable, process-owned copy of a qpacked artifact (.hzq)
 * ------------------------------------------------------------------------------------------------- */

typedef struct hz_host_backing hz_host_backing;

/* Flags for hz_backing_options.flags. */
#define HZ_BACKING_SKIP_CHECKSUMS 0x1u /* verify the whole-artifact identity only, not every blob */

typedef struct hz_backing_options {
    uint32_t struct_size; /* sizeof(hz_backing_options) */
    uint32_t flags;       /* HZ_BACKING_* */
} hz_backing_options;

/* Fills the first `size` bytes of *opts with the defaults (flags 0) and sets its struct_size to
 * `size`. Pass sizeof of the caller's struct (the hz_backing_options_init macro does). Writes nothing
 * past `size`: a struct from an older, smaller header gets only the fields it has; bytes past the
 * fields this library knows (a newer header's) are zeroed, which means their old behaviour. Does
 * nothing when `opts` is NULL or `size` is below sizeof(uint32_t) (the struct_size field itself) or
 * above UINT32_MAX. Cannot fail. Touches only *opts (nothing is retained); any thread. */
void hz_backing_options_init_sized(hz_backing_options *opts, size_t size);
/* Compatibility entry point for binaries built before hz_backing_options_init became a macro:
 * hz_backing_options_init_sized(opts, sizeof(hz_backing_options) as the library knows it). New code
 * gets the macro. */
void (hz_backing_options_init)(hz_backing_options *opts);
/* Fills *opts with the defaults; struct_size = sizeof as the caller's header knows it. */
#define hz_backing_options_init(opts) hz_backing_options_init_sized((opts), sizeof(hz_backing_options))

/* Opens the artifact at `path`, validates its header, manifest, inventory, layout, per-blob checksums
 * and whole-artifact identity, copies everything into process-owned memory (every page touched before
 * the backing is admitted), makes the routed-expert region read-only, and closes the file. After it
 * returns no call reads the file again.
 * Errors: HZ_EINVAL (NULL argument), HZ_EIO (cannot open or read), HZ_EFORMAT (bad magic, version,
 * manifest or layout; the message names the field or blob), HZ_EIDENTITY (checksum or identity
 * mismatch; the message names the blob), HZ_EUNSUPPORTED (the manifest's model config asks for
 * something Horizon does not implement: another model_type, rope scaling, a sliding window, clip_qkv...;
 * the message names the setting), HZ_ENOMEM.
 * Threading: any number of backings may be opened concurrently. The returned backing is immutable and
 * may be read by any number of threads. */
int hz_host_backing_open(const char *path, const hz_backing_options *opts, hz_host_backing **out);

/* Releases the backing. Returns HZ_EBUSY (and releases nothing) while a cache or model created on it
 * still lives. NULL is allowed (returns HZ_OK). */
int hz_host_backing_close(hz_host_backing *backing);

/* The whole-artifact identity (XXH3-128) as 32 lowercase hex digits. Owned by the backing. */
const char *hz_host_backing_identity(const hz_host_backing *backing);

/* A JSON object describing the backing: identity, architecture, config, precision, routed layers,
 * experts per layer, expert blob bytes, total bytes, routed-region bytes, load seconds, protection.
 * Caller frees *out with hz_free(). Errors: HZ_EINVAL, HZ_ENOMEM. Thread-safe. */
int hz_host_backing_describe_json(const hz_host_backing *backing, char **out);

/* ---------------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------------- */

typedef struct hz_device hz_device;
typedef struct hz_event hz_event;

/* Opens a device by name: "cpu" (host memory stands in for device memory; transfers run on a worker
 * thread), "cuda:N" (GPU N), or "auto" (cuda:0 when the library was built with CUDA and a GPU is
 * present, else cpu).
 * Errors: HZ_EINVAL (unknown name), HZ_EUNSUPPORTED (built without CUDA), HZ_EDEVICE (the CUDA call
 * and its error string are in the message). */
int hz_device_open(const char *name, hz_device **out);
/* Closes the device. HZ_EBUSY while a cache, model or event created on it still lives. NULL is allowed. */
int hz_device_close(hz_device *device);
/* The canonical name ("cpu", "cuda:0"). Owned by the device. */
const char *hz_device_name(const hz_device *device);
/* A JSON object: backend, name, memory, transfer counters by direction and purpose. Caller frees. */
int hz_device_describe_json(const hz_device *device, char **out);

/* Events mark completion of work submitted to a device. Used to tell the cache when a consumer of a
 * generation has finished reading its rows. */
int hz_event_create(hz_device *device, hz_event **out);
void hz_event_destroy(hz_event *event);
/* Records the event after all work the library has submitted to the device's compute queue so far. */
int hz_event_record(hz_event *event);
/* HZ_OK when complete, HZ_EBUSY while pending, HZ_EDEVICE if the work it marks failed. */
int hz_event_query(hz_event *event);
/* Blocks until complete. HZ_OK or HZ_EDEVICE. */
int hz_event_synchronize(hz_event *event);

/* ---------------------------------------------------------------------------------------------------
 * Generation cache (resident-qpacked-cache-v1)
 * ------------------------------------------------------------------------------------------------- */

typedef struct hz_cache hz_cache;
typedef struct hz_generation hz_generation;

typedef enum hz_eviction {
    HZ_EVICT_LRU = 0 /* least recently acquired resident expert of the layer */
} hz_eviction;

/* How a miss transaction moves expert blobs from the host backing into device rows. Every transport
 * has the same publication guarantees, counters and fault semantics (doc/cache-contract.md); they
 * differ in how the bytes travel. */
typedef enum hz_transport {
    HZ_TRANSPORT_SERIAL = 0,    /* serialized transactions through pinned staging (version 1): the
                                   acquiring thread copies each blob backing -> pinned staging (with
                                   streaming stores where the CPU has them), then enqueues its H2D */
    HZ_TRANSPORT_THREADED = 1,  /* as serial, but the backing -> staging copies run on a pool of
                                   `staging_threads` threads owned by the cache, each blob split into
                                   pieces copied in parallel; a blob's H2D goes out in two runs, the
                                   first half while the second is still being copied (the environment
                                   variable HZ_TXN_PIECEWISE=0 at hz_cache_create: one H2D per blob,
                                   once it is staged) */
    HZ_TRANSPORT_REGISTERED = 2, /* no staging copy: the backing's read-only routed region is registered
                                   for direct DMA at hz_cache_create (cudaHostRegister on CUDA) and H2D
                                   copies read it directly; `staging_bytes` is ignored, no staging is
                                   allocated */
    HZ_TRANSPORT_AUTO = 3        /* the fastest that works here: registered where experts will miss
                                   (capacity below the expert count) and the registration succeeds,
                                   else threaded (every expert resident: only the initial fill moves,
                                   which registering the whole region would not repay). Registration
                                   pins the routed region in host memory; where the registered cache
                                   cannot be created for a device error or lack of memory (a host that
                                   refuses the registration), it is created threaded instead and the
                                   log says why at HZ_LOG_INFO; other errors are returned as they are.
                                   hz_cache_stats_json names the transport chosen ("transport") and
                                   "auto" as "transport_requested". The default stays serial (0). */
} hz_transport;

/* Speculative loading of routed experts ahead of their acquire, independent of the transport (each
 * transport moves the prefetched blobs as it moves misses). Prefetched experts wait in unpublished rows;
 * an acquire of their layer publishes those its group wants, in a complete new generation, exactly as
 * a miss would. A wrong prediction costs copy bandwidth, never residency or results. Counted apart:
 * prefetch_hits, prefetch_wasted_bytes, ... in hz_cache_stats_json (doc/cache-contract.md, "Prefetch"). */
typedef enum hz_prefetch {
    HZ_PREFETCH_OFF = 0,       /* experts are loaded only when acquired (the default) */
    HZ_PREFETCH_NEXT_LAYER = 1 /* while layer l computes, a model applies layer l+1's router to layer l's
                                  MoE input and the cache starts loading the predicted experts that are
                                  missing on a thread of its own (single-token runs: decode steps and a
                                  one-token prefill; a longer prefill does not predict). A gate stops predicting for a while when fewer than a quarter
                                  of the last 64 prefetched experts were used (prefetch_gated;
                                  doc/cache-contract.md, "The gate") */
} hz_prefetch;

typedef struct hz_cache_options {
    uint32_t struct_size;    /* sizeof(hz_cache_options) */
    uint32_t capacity;       /* resident experts per routed layer; 0 = all experts */
    uint32_t spare_rows;     /* unpublished rows for misses; 0 = the model's top-k */
    uint64_t staging_bytes;  /* pinned staging; 0 = one expert blob per spare row, 2 to 8 blobs */
    int32_t eviction;        /* hz_eviction */
    int32_t transport;       /* hz_transport */
    /* Initial placement: NULL = canonical (experts 0..capacity-1 of every layer), else
     * layers x capacity expert ids, layer-major, distinct within a layer. */
    const uint32_t *initial_placement;
    uint32_t initial_placement_count;
    /* HZ_TRANSPORT_THREADED only: copy threads, started at creation; 0 = three quarters of the online
     * CPUs, at least 1 and at most 12 (the threads poll for work while misses keep coming, and the
     * thread that runs the model needs a CPU too). Values above 256 are HZ_EINVAL. Ignored by the other
     * transports. */
    uint32_t staging_threads;
    /* hz_prefetch; 0 = HZ_PREFETCH_OFF. Other values are HZ_EUNSUPPORTED. */
    int32_t prefetch;
} hz_cache_options;

/* Fills the first `size` bytes of *opts with the defaults (every field 0: all experts resident, LRU
 * eviction, serial transport, prefetch off) and sets its struct_size to `size`. Pass sizeof of the
 * caller's struct (the hz_cache_options_init macro does). Writes nothing past `size`: a struct from an
 * older, smaller header gets only the fields it has; bytes past the fields this library knows (a newer
 * header's) are zeroed, which means their old behaviour. Does nothing when `opts` is NULL or `size` is
 * below sizeof(uint32_t) (the struct_size field itself) or above UINT32_MAX. Cannot fail. Touches only
 * *opts (nothing is retained); any thread. */
void hz_cache_options_init_sized(hz_cache_options *opts, size_t size);
/* Compatibility entry point for binaries built before hz_cache_options_init became a macro:
 * hz_cache_options_init_sized(opts, sizeof(hz_cache_options) as the library knows it). New code gets
 * the macro. */
void (hz_cache_options_init)(hz_cache_options *opts);
/* Fills *opts with the defaults; struct_size = sizeof as the caller's header knows it. */
#define hz_cache_options_init(opts) hz_cache_options_init_sized((opts), sizeof(hz_cache_options))

/* Allocates all device memory (capacity x layers published rows plus the spare rows, and the pinned
 * staging) and publishes generation 1 with the initial placement, copied from the backing.
 * Errors: HZ_ECAPACITY (capacity above the expert count, spare rows fewer than the model's top-k, or
 * staging smaller than one expert blob; the message says which), HZ_EUNSUPPORTED (unknown eviction,
 * transport or prefetch), HZ_EINVAL, HZ_ENOMEM (also: a copy thread or the prefetch thread could not
 * start), HZ_EDEVICE (also: the registered transport's host registration failed; the message names the
 * call). */
int hz_cache_create(hz_host_backing *backing, hz_device *device, const hz_cache_options *opts,
                    hz_cache **out);

/* Destroys the cache. HZ_EBUSY while leases are outstanding or a model uses it (nothing is freed). NULL
 * is allowed. Waits for transfers in flight (a prefetch being loaded included; one not started yet is
 * dropped). */
int hz_cache_destroy(hz_cache *cache);

/* Counters as JSON: hits, misses, h2d_bytes, h2d_copies, expert_d2h_bytes, backing_writes,
 * request_source_reads, request_hashing, publications, evictions, retired_rows, staging_high_water,
 * staging copy bytes and rate, miss latency, miss_transfer_bytes and miss_transfer_seconds (the miss
 * path's bytes and the wall time of its rounds, first copy to publication), prefetch counters
 * (prefetch_requests, prefetch_bytes, prefetch_hits, prefetch_wasted_bytes, ...), generation id,
 * transport ("serial", "threaded", "registered"), state ("OK" or "FAULTED"). A counter the library
 * does not observe is "UNKNOWN", one the platform cannot provide "UNSUPPORTED". Caller frees.
 * Thread-safe. */
int hz_cache_stats_json(hz_cache *cache, char **out);

/* Waits until the cache's prefetch thread has no request queued or being loaded, so that the counters
 * read next (hz_cache_stats_json) hold every copy of a load together with its miss_transfer_bytes and
 * prefetch counters: a load in flight has its H2D copies counted already and the rest only at its end.
 * For benchmarks and tests that compare counters over a window. Returns at once when prefetch is off
 * or `cache` is NULL. Thread-safe, but not while the calling thread holds a lease that another
 * thread's miss transaction may be waiting for: the load may need that transaction to end first. */
void hz_cache_prefetch_wait(hz_cache *cache);

/* Returns a lease on a published generation in which all `n` experts of `layer` are resident, running
 * a miss transaction first when some are not. `experts` must be distinct and n <= capacity. A group
 * with more misses than spare rows is loaded in several rounds inside this one call (one publication
 * per round; the group's own experts are never evicted), so any n <= capacity is served.
 * Blocks while the spare rows it needs are still mapped by leased generations of other threads, and
 * (prefetch on) while the queued or running prefetch request of the same layer predicts one of the
 * group's missing experts: the experts it loaded that the group wants are published first and count as
 * hits (and as prefetch_hits). A running prefetch that predicts none of them is cancelled instead.
 * Errors: HZ_ERANGE (layer or expert out of range), HZ_EINVAL (duplicates, n == 0, NULL),
 * HZ_ECAPACITY (n above capacity, or the rows it needs are pinned only by leases that cannot end while
 * it waits: the calling thread's own, or those of threads that are themselves waiting for this miss
 * transaction to end, such as a thread acquiring with misses while it holds a lease; either would
 * otherwise wait forever), HZ_EFAULTED, HZ_EDEVICE / HZ_EIO / HZ_ENOMEM (the miss failed before
 * publication: the previous generation stays authoritative, nothing leaks).
 * Threading: may be called from any number of threads on one cache; miss transactions are serialized. */
int hz_generation_acquire(hz_cache *cache, uint32_t layer, const uint32_t *experts, uint32_t n,
                          hz_generation **out);

/* Ends a lease. `consumer_done` marks when the consumer finished reading the rows (NULL: already
 * finished); rows are reused only after every lease on a generation mapping them is released and its
 * events complete. The event may be destroyed after this returns.
 * Errors: HZ_EINVAL (NULL, a lease already released or not from this library, or an event of another
 * device: the lease then stays live), HZ_EFAULTED (the cache has failed; the lease is released).
 * Thread-safe. */
int hz_generation_release(hz_generation *lease, hz_event *consumer_done);

/* The generation's id (publications are numbered 1, 2, ...). */
uint64_t hz_generation_id(const hz_generation *lease);
/* The layer the lease was acquired for. */
uint32_t hz_generation_layer(const hz_generation *lease);
/* Row index and device address of `expert` of the lease's layer in this generation.
 * Errors: HZ_EINVAL (NULL lease), HZ_ERANGE (expert out of range or not resident in this generation),
 * HZ_EFAULTED (the cache has failed). */
int hz_generation_row(const hz_generation *lease, uint32_t expert, uint32_t *out_row,
                      const void **out_address);

/* ---------------------------------------------------------------------------------------------------
 * Models and sessions
 * ------------------------------------------------------------------------------------------------- */

typedef struct hz_model hz_model;
typedef struct hz_session hz_session;

typedef struct hz_model_options {
    uint32_t struct_size; /* sizeof(hz_model_options) */
    /* Executor for routed experts: NULL or "auto" (best for the device), "reference" (CPU),
     * "scalar", "grouped" (CUDA). */
    const char *executor;
    uint32_t flags; /* HZ_MODEL_* below; 0 (the default) for none */
} hz_model_options;

/* Flags for hz_model_options.flags. By default a cuda model keeps an INT8 copy of the lm_head rows on
 * the device (vocab x hidden bytes, plus 12 per row) through which greedy steps pick their token without
 * reading every FP16 row: the same token, faster (session stat lm_head_screen). The copy is skipped,
 * not an error, when the device lacks the memory for it. This flag spends none of that memory. Ignored
 * on the cpu. */
#define HZ_MODEL_NO_LM_HEAD_SCREEN 0x1u

/* Fills the first `size` bytes of *opts with the defaults (executor NULL = "auto", flags 0) and sets its
 * struct_size to `size`. Pass sizeof of the caller's struct (the hz_model_options_init macro does).
 * Writes nothing past `size`: a struct from an older, smaller header gets only the fields it has;
 * bytes past the fields this library knows (a newer header's) are zeroed, which means their old
 * behaviour. Does nothing when `opts` is NULL or `size` is below sizeof(uint32_t) (the struct_size
 * field itself) or above UINT32_MAX. Cannot fail. Touches only *opts (nothing is retained); any
 * thread. */
void hz_model_options_init_sized(hz_model_options *opts, size_t size);
/* Compatibility entry point for binaries built before hz_model_options_init became a macro: fills the
 * struct as their header (0.1.0) had it, up to `executor`, never more; hz_model_create gives the fields
 * past struct_size their defaults. New code gets the macro. */
void (hz_model_options_init)(hz_model_options *opts);
/* Fills *opts with the defaults; struct_size = sizeof as the caller's header knows it. */
#define hz_model_options_init(opts) hz_model_options_init_sized((opts), sizeof(hz_model_options))

/* Creates a model from a backing, placing the non-routed FP16 weights on the device and serving routed
 * experts through `cache`, which must have been created on the same backing and device.
 * Errors: HZ_EINVAL, HZ_EFORMAT (the backing's config has a zero or inconsistent dimension),
 * HZ_EUNSUPPORTED (executor unknown for this device; on cuda also a head_dim that is not a multiple of 8
 * up to 256, more than 1024 experts or a top-k above 64), HZ_EFAULTED (the cache has failed), HZ_ENOMEM,
 * HZ_EDEVICE. */
int hz_model_create(hz_host_backing *backing, hz_device *device, hz_cache *cache,
                    const hz_model_options *opts, hz_model **out);
/* HZ_EBUSY while sessions live. NULL is allowed. */
int hz_model_destroy(hz_model *model);

typedef struct hz_model_info {
    uint32_t struct_size;
    uint32_t vocab_size;
    uint32_t hidden_size;
    uint32_t layers;
    uint32_t experts;
    uint32_t top_k;
    uint32_t max_context;
    int32_t eos_token; /* -1 when none */
    int32_t bos_token; /* -1 when none */
} hz_model_info;

/* Fills the first `size` bytes of *info with the defaults (zeros) and sets its struct_size to `size`.
 * Pass sizeof of the caller's struct (the hz_model_info_init macro does). Writes nothing past `size`:
 * a struct from an older, smaller header gets only the fields it has; bytes past the fields this
 * library knows (a newer header's) are zeroed, which means their old behaviour. Does nothing when
 * `info` is NULL or `size` is below sizeof(uint32_t) (the struct_size field itself) or above
 * UINT32_MAX. Cannot fail. Touches only *info (nothing is retained); any thread. */
void hz_model_info_init_sized(hz_model_info *info, size_t size);
/* Compatibility entry point for binaries built before hz_model_info_init became a macro:
 * hz_model_info_init_sized(info, sizeof(hz_model_info) as the library knows it). New code gets the
 * macro. */
void (hz_model_info_init)(hz_model_info *info);
/* Fills *info with the defaults; struct_size = sizeof as the caller's header knows it. */
#define hz_model_info_init(info) hz_model_info_init_sized((info), sizeof(hz_model_info))

/* Fills `out` (set out->struct_size first, or use the hz_model_info_init macro): writes exactly
 * min(out->struct_size, the library's sizeof(hz_model_info)) bytes, struct_size included (set to that
 * count), and nothing past them. Errors: HZ_EINVAL (NULL, or struct_size below sizeof(uint32_t)).
 * Read-only on the model; safe alongside its sessions. */
int hz_model_get_info(const hz_model *model, hz_model_info *out);

/* JSON: architecture, config, executor, precision declaration (checkpoint dtype, routed INT4 block and
 * scale dtype, activation dtype, non-routed dtype, accumulation dtype of the executor). Caller frees. */
int hz_model_describe_json(const hz_model *model, char **out);

typedef struct hz_session_options {
    uint32_t struct_size;
    uint32_t max_context; /* tokens of KV cache; 0 = the model's maximum */
} hz_session_options;

/* Fills the first `size` bytes of *opts with the defaults (max_context 0 = the model's) and sets its
 * struct_size to `size`. Pass sizeof of the caller's struct (the hz_session_options_init macro does).
 * Writes nothing past `size`: a struct from an older, smaller header gets only the fields it has;
 * bytes past the fields this library knows (a newer header's) are zeroed, which means their old
 * behaviour. Does nothing when `opts` is NULL or `size` is below sizeof(uint32_t) (the struct_size
 * field itself) or above UINT32_MAX. Cannot fail. Touches only *opts (nothing is retained); any
 * thread. */
void hz_session_options_init_sized(hz_session_options *opts, size_t size);
/* Compatibility entry point for binaries built before hz_session_options_init became a macro:
 * hz_session_options_init_sized(opts, sizeof(hz_session_options) as the library knows it). New code
 * gets the macro. */
void (hz_session_options_init)(hz_session_options *opts);
/* Fills *opts with the defaults; struct_size = sizeof as the caller's header knows it. */
#define hz_session_options_init(opts) hz_session_options_init_sized((opts), sizeof(hz_session_options))

typedef struct hz_sampler_options {
    uint32_t struct_size;
    float temperature; /* 0 = greedy (the default) */
    uint32_t top_k;    /* 0 = off */
    float top_p;       /* 1 = off */
    uint64_t seed;
} hz_sampler_options;

/* Fills the first `size` bytes of *opts with the defaults (greedy: temperature 0, top_k 0, top_p 1,
 * seed 0) and sets its struct_size to `size`. Pass sizeof of the caller's struct (the
 * hz_sampler_options_init macro does). Writes nothing past `size`: a struct from an older, smaller
 * header gets only the fields it has; bytes past the fields this library knows (a newer header's) are
 * zeroed, which means their old behaviour. Does nothing when `opts` is NULL or `size` is below
 * sizeof(uint32_t) (the struct_size field itself) or above UINT32_MAX. Cannot fail. Touches only *opts
 * (nothing is retained); any thread. */
void hz_sampler_options_init_sized(hz_sampler_options *opts, size_t size);
/* Compatibility entry point for binaries built before hz_sampler_options_init became a macro:
 * hz_sampler_options_init_sized(opts, sizeof(hz_sampler_options) as the library knows it). New code
 * gets the macro. */
void (hz_sampler_options_init)(hz_sampler_options *opts);
/* Fills *opts with the defaults; struct_size = sizeof as the caller's header knows it. */
#define hz_sampler_options_init(opts) hz_sampler_options_init_sized((opts), sizeof(hz_sampler_options))

/* Creates a session (FP16 KV cache of max_context tokens, position 0, greedy sampler).
 * Errors: HZ_EINVAL, HZ_ERANGE (max_context above the model's), HZ_ENOMEM, HZ_EDEVICE. */
int hz_session_create(hz_model *model, const hz_session_options *opts, hz_session **out);
/* NULL is allowed. Using a session after its model was destroyed is undefined; hz_model_destroy
 * refuses with HZ_EBUSY while the session lives. */
void hz_session_destroy(hz_session *session);
/* Back to position 0; the sampler keeps its options and restarts its seed. */
int hz_session_reset(hz_session *session);
int hz_session_set_sampler(hz_session *session, const hz_sampler_options *opts);
/* Tokens already in the KV cache. */
uint32_t hz_session_position(const hz_session *session);

/* Runs `n` prompt tokens from the current position, leaves the logits of the last one readable, and
 * samples the next token into *out_next (out_next may be NULL). out_next may point at an element of
 * `tokens`: it is written once, after the tokens have been read, with the next token on success and 0
 * on any error.
 * Errors: HZ_EINVAL (n == 0, NULL), HZ_ERANGE (position + n above max_context, checked before any token
 * is read, or a token outside the vocabulary; nothing is run), HZ_EFAULTED, HZ_EDEVICE, HZ_ENOMEM,
 * HZ_ECAPACITY (a miss needs rows that only leases of the calling thread, or of threads waiting for that
 * miss, pin: see hz_generation_acquire). After any error the position has not moved. After an error
 * while running (HZ_EFAULTED, HZ_EDEVICE, HZ_ENOMEM, HZ_ECAPACITY) no logits are readable until the next
 * successful run; a call refused for its arguments (HZ_EINVAL, HZ_ERANGE: nothing is run) keeps the
 * earlier logits readable. After HZ_ENOMEM or HZ_ECAPACITY the call may be repeated. */
int hz_prefill(hz_session *session, const int32_t *tokens, uint32_t n, int32_t *out_next);

/* Runs one token at the current position, leaves its logits readable, and samples the next token.
 * Errors as hz_prefill.
 * A greedy cuda session at full residency may return while the device already runs the step at the next
 * position with the token it returned (queued ahead, so that the device does not wait for the host
 * between steps): the next hz_decode_step with that token finishes sooner; any other call (another
 * token, hz_prefill, hz_session_reset then a run, hz_session_logits) first waits for that step, and its
 * results are the same bits as without it. The environment variable HZ_GPU_SPECULATE=0, read when a
 * session is created, turns it off. */
int hz_decode_step(hz_session *session, int32_t token, int32_t *out_next);

/* The FP32 logits of the last token run (vocab_size values), owned by the session, valid until its next
 * prefill, decode step or reset. On a cuda session a greedy step leaves the logits on the device, or,
 * where its token came from the lm_head screen (session stat lm_head_screen), has not computed them:
 * the first call after a run computes them if needed (the same bits as a step without the screen) and
 * copies them to the host (the address returned does not change), so even this read-only-looking call
 * must not overlap another call on the same session.
 * Errors: HZ_ESTATE when no token has run since the session was created or reset, or when the last
 * prefill or decode step failed while running (a call refused for its arguments keeps the earlier
 * logits); HZ_EDEVICE when that computation or copy fails. */
int hz_session_logits(const hz_session *session, const float **out, uint32_t *out_count);

/* Session counters as one JSON object, into *out (caller frees with hz_free()). Every session reports
 * position, max_context, tokens_prefilled, prefill_calls, prefill_seconds, tokens_decoded,
 * decode_calls and decode_seconds. A cuda session adds how its decode steps ran:
 *   decode_path        "graph", "graph (not captured yet)", "graph (partial residency)" (the
 *                      partial-residency step captured as a graph: with the hits on the device below,
 *                      unless HZ_GPU_PARTIAL_GRAPH=0 at session creation), "eager (partial
 *                      residency)", "eager (graph disabled)" or "eager (graph capture failed)";
 *   graph_fallback     null, or the reason the capture failed (then the steps run eagerly);
 *   decode_pdl, graph_kernels, graph_steps, eager_steps, attention_splits;
 *   attention_groups   "by position" (the decode attention's blocks hold two groups of threads while
 *                      all positions fit in one block, i.e. below position 256, one group beyond; the
 *                      default) or "one" (HZ_GPU_ATTN_GROUPS=0 at session creation);
 *   steps_queued_ahead (whether hz_decode_step may queue the next step), steps_ahead_adopted,
 *                      steps_ahead_discarded;
 *   argmax_readback    "kernel store" (the argmax kernel writes the token to pinned memory) or "copy";
 *   router_tail        where the router's softmax + top-k runs: "router GEMV" (inside the router's
 *                      GEMV kernel), "own kernel" (a kernel after it) or "router cluster" (the router
 *                      GEMV as one thread-block cluster, which routes in one of its blocks);
 *   experts_start      "router flags" (the routed experts start once the router has written the
 *                      routing, while its kernel still runs) or "router end";
 *   expert_kernels     the routed experts' kernels: "fused" (one kernel), "twopass" (gate_up and
 *                      down as two kernels), "reg", "cudacores" (grouped executor) or "scalar";
 *   shared_down_start  null (no shared expert on a side stream), "router trigger" (in captured steps the
 *                      shared expert's down projection is placed while the router kernel runs and
 *                      waits for its end on the device) or "router end";
 *   routing_readback   how each layer's routing reaches the host at partial residency: "router store"
 *                      (the router writes it to pinned memory and the host polls a tag word), "copy"
 *                      (a copy and a wait for the queue), or "none (routing on the device)" at full
 *                      residency; routing_stored counts the layers that came back the first way;
 *   experts_queued     where a partial-residency step queues each layer's routed experts: "ahead of the
 *                      routing" (behind a gate the host opens once it has leased the rows, with the
 *                      next layer's kernels queued behind them; from a session's second step on),
 *                      "after the routing" (HZ_GPU_EXPERTS_AHEAD=0, or without the router store), or
 *                      "on the device" at full residency; experts_gated counts the layers run behind
 *                      a gate. Of those, gate_hits passed without the host: every expert of the
 *                      group had a row in the device's table of the rows the session holds during a
 *                      forward (HZ_GPU_DEVICE_HITS=0 at session creation turns this off), and
 *                      gates_waited waited for the host; gate_table_copies counts the layers whose
 *                      rows were copied into that table. Partial-residency forwards of sessions
 *                      sharing a cache run one at a time (the others wait).
 *   experts_gate       with the experts ahead, what runs each layer's gate: "router" (the router's
 *                      routing warp, once it has stored the routing) or "own kernel"
 *                      (HZ_GPU_GATE_IN_ROUTER=0 at session creation); null otherwise.
 *   lm_head_screen     whether this session's last-token steps pick through the lm_head screen (a
 *                      greedy sampler on a model that has it: an INT8 copy of the lm_head rows made at
 *                      model creation, unless HZ_GPU_LM_SCREEN=0 or the device lacked the memory); the
 *                      pick is the lm_head's argmax, and the logits are computed when asked for;
 *   lm_head_rows_summed the rows the screen summed again in FP16 since the session began (null where
 *                      pinned memory is not addressable by kernels).
 * Fields may be added; none is removed or changes meaning within a major version.
 * Errors: HZ_EINVAL (NULL), HZ_ENOMEM. Like every session call, not concurrently with another call on
 * the same session. */
int hz_session_stats_json(const hz_session *session, char **out);

#ifdef __cplusplus
}
#endif

#endif /* HORIZON_H */
