/* Injected faults on every step of the miss path, for every transport. Before publication: an error,
 * the previous generation still authoritative, every row and staging slot recovered, and a retry that
 * works. After publication (or when a failed transfer cannot be drained): FAULTED, and HZ_EFAULTED from
 * then on. */
#include "cache_test_util.h"

typedef struct fx {
    hz_host_backing *b;
    uint64_t hash0;
    hz_backend *fb;
    hz_device *d;
    hz_cache *c;
    int transport;
} fx;

/* Which call of an operation a 4-miss group makes at a given step. Serial and threaded: one event
 * record per copy; waits = reuse of slot 0, reuse of slot 1, then the two final ones (the threaded
 * loader waits for a slot only when nothing is being staged, so the order is the same). Registered:
 * one record and one wait for the whole group. */
static uint64_t nth_second_record(const fx *f) { return f->transport == HZ_TRANSPORT_REGISTERED ? 1 : 2; }
static uint64_t nth_last_wait(const fx *f) { return f->transport == HZ_TRANSPORT_REGISTERED ? 1 : 4; }

/* 2 layers, 16 experts, top-4: capacity 4, 4 spare rows, 2 staging slots (so a 4-miss group reuses
 * each slot once, after waiting for its event); threaded: 3 threads, 3 pieces per blob. */
static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->transport = *(const int *)*state;
    f->b = tu_backing(2, 16, 4, 21);
    f->hash0 = tu_routed_hash(f->b);
    f->d = tu_fault_device(&f->fb);
    hz_cache_options o;
    tu_options(&o, f->transport);
    o.capacity = 4;
    o.staging_bytes = 2 * tu_row_bytes(f->b);
    assert_int_equal(hz_cache_create(f->b, f->d, &o, &f->c), HZ_OK);
    tu_after_create(f->c);
    assert_int_equal(tu_stat(f->c, "staging_slots"), f->transport == HZ_TRANSPORT_REGISTERED ? 0 : 2);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    tu_close(f->c, f->d, f->b, f->hash0);
    free(f);
    return 0;
}

static const uint32_t k_old[4] = {0, 1, 2, 3};
static const uint32_t k_new[4] = {4, 5, 6, 7};

/* The 4-miss group (k_new of layer 0) that the test's armed fault breaks: its status; no lease comes back. */
static int acquire_new_fails(fx *f) {
    hz_generation *l = NULL;
    int st = hz_generation_acquire(f->c, 0, k_new, 4, &l);
    assert_null(l);
    return st;
}

/* After a failure before publication: generation 1 is current and whole, nothing leaked, a retry works. */
static void expect_recovered(fx *f, int st, int expected_status) {
    if (st != expected_status) fprintf(stderr, "got %s: %s\n", hz_status_name(st), hz_last_error_message());
    assert_int_equal(st, expected_status);
    assert_non_null(strstr(hz_last_error_message(), "before publication"));
    tu_expect_rolled_back(f->c, 4);
    assert_int_equal(tu_stat(f->c, "failed_transactions"), 1);
    assert_int_equal(tu_stat(f->c, "rows.published"), 8);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 0);
    assert_int_equal(tu_stat(f->c, "leases_active"), 0);
    assert_int_equal(tu_stat(f->c, "generations_live"), 1);
    if (f->transport == HZ_TRANSPORT_REGISTERED) assert_int_equal(tu_stat(f->c, "staging_high_water"), 0);
    tu_check_invariants(f->c);
    /* the previous generation serves the old experts, bytes intact */
    assert_int_equal(tu_acquire_check_release(f->c, f->b, 0, k_old, 4), 1);
    /* and the same miss succeeds once the fault is gone */
    hz_backend_fault_reset(f->fb);
    assert_int_equal(tu_acquire_check_release(f->c, f->b, 0, k_new, 4), 2);
    tu_check_invariants(f->c);
    assert_int_equal(tu_stat(f->c, "expert_d2h_bytes"), 0);
}

static void expect_faulted(fx *f) {
    tu_expect_state(f->c, "FAULTED");
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 0, k_old, 4, &l), HZ_EFAULTED);
    assert_null(l);
    assert_non_null(strstr(hz_last_error_message(), "FAULTED"));
    assert_int_equal(hz_generation_acquire(f->c, 1, k_new, 1, &l), HZ_EFAULTED);
    assert_int_equal(hz_cache_check_model_use(f->c, f->b, f->d), HZ_EFAULTED);
}

static void test_staging_copy_fails(void **state) {
    fx *f = *state;
    /* serial: the third blob; threaded: the third piece (the first blob's last) */
    hz_transactor_inject(hz_cache_transactor(f->c), HZ_TXN_FAULT_STAGING_COPY, 3, HZ_EIO);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(), "staging copy"));
    expect_recovered(f, st, HZ_EIO);
}

/* Threaded with a slot per blob: all four blobs are handed out at once and a piece of the first fails
 * while the other three are still being copied: the loader must take every fill back from the threads
 * before it returns (else their pieces would land in slots the retry reuses). */
static void test_threaded_piece_fails_others_in_flight(void **state) {
    (void)state;
    fx *f = calloc(1, sizeof *f);
    f->transport = HZ_TRANSPORT_THREADED;
    f->b = tu_backing(2, 16, 4, 23);
    f->hash0 = tu_routed_hash(f->b);
    f->d = tu_fault_device(&f->fb);
    hz_cache_options o;
    tu_options(&o, HZ_TRANSPORT_THREADED);
    o.capacity = 4;
    o.staging_bytes = 4 * tu_row_bytes(f->b);
    assert_int_equal(hz_cache_create(f->b, f->d, &o, &f->c), HZ_OK);
    /* one piece per thread (3) for each blob, each taking 3 ms: when the first blob's second piece
     * fails, pieces of the other blobs are being copied and more wait in the queue */
    assert_int_equal(hz_transactor_set_piecewise(hz_cache_transactor(f->c), 0), HZ_OK);
    assert_int_equal(hz_transactor_set_piece_bytes(hz_cache_transactor(f->c), 64), HZ_OK);
    hz_transactor_set_copy_delay(hz_cache_transactor(f->c), 3000);
    hz_transactor_inject(hz_cache_transactor(f->c), HZ_TXN_FAULT_STAGING_COPY, 2, HZ_EIO);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(), "copy thread"));
    expect_recovered(f, st, HZ_EIO);
    *state = f;
    assert_int_equal(teardown(state), 0);
}

/* Threaded: a piece of the third blob fails on a copy thread while the first two blobs' H2Ds are
 * queued and other pieces are in flight: the loader stops handing out pieces, waits for the claimed
 * ones, drains the copy queue, and reports the thread's failure. */
static void test_threaded_late_piece_fails(void **state) {
    fx *f = *state;
    assert_int_equal(hz_backend_cpu_set_copy_delay(hz_backend_fault_inner(f->fb), 2000), HZ_OK);
    hz_transactor_inject(hz_cache_transactor(f->c), HZ_TXN_FAULT_STAGING_COPY, 2 * 3 + 2, HZ_EIO);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(), "copy thread"));
    assert_true(tu_stat(f->c, "h2d_copies") >= 8 + 2); /* the first two blobs were on their way */
    expect_recovered(f, st, HZ_EIO);
}

/* Threaded piecewise, every piece taking 10 ms on 3 threads, so that the loading thread gets a CPU
 * between two waves under a test run's load (a timing assumption: with 16 such suites at once on 2 CPUs,
 * a third of them still saw every blob whole before its first run went out; with 2 ms, most). First the
 * second H2D run of the first blob is refused while its later pieces are still being copied: the
 * loader stops, takes every fill back, drains the copy queue (the first run may still read the slot)
 * and reports the refusal before publication. Then a clean miss: a blob's pieces land in several
 * rounds, so its H2D goes out as several runs (more copies than blobs), each row still whole and
 * counted once. */
static void test_piecewise_runs(void **state) {
    fx *f = *state;
    hz_transactor *t = hz_cache_transactor(f->c);
    hz_transactor_set_copy_delay(t, 10000);
    hz_backend_fault_arm(f->fb, HZ_FAULT_COPY_H2D, 2, HZ_EDEVICE);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(), "pieces"));
    /* The blob's first run went out before its second was refused: the device moved those bytes, and
     * the cache counts every expert H2D as the device does (whole-blob transports count at enqueue). */
    assert_int_equal((uint64_t)tu_stat(f->c, "h2d_bytes"),
                     atomic_load(&f->fb->bytes[HZ_H2D][HZ_PURPOSE_EXPERT]));
    expect_recovered(f, st, HZ_EDEVICE); /* k_new is now loaded and current */
    assert_int_equal((uint64_t)tu_stat(f->c, "h2d_bytes"),
                     atomic_load(&f->fb->bytes[HZ_H2D][HZ_PURPOSE_EXPERT]));

    const uint64_t calls0 = hz_backend_fault_calls(f->fb, HZ_FAULT_COPY_H2D);
    const uint64_t chunks0 = (uint64_t)tu_stat(f->c, "staging_chunks"), blobs0 = (uint64_t)tu_stat(f->c, "h2d_copies");
    const uint64_t bytes0 = (uint64_t)tu_stat(f->c, "h2d_bytes");
    tu_acquire_check_release(f->c, f->b, 0, k_old, 4); /* four misses again */
    const uint64_t pieces = ((uint64_t)tu_stat(f->c, "staging_chunks") - chunks0) / 4;
    const uint64_t calls = hz_backend_fault_calls(f->fb, HZ_FAULT_COPY_H2D) - calls0;
    assert_true(pieces > 3);    /* two per thread (two waves) */
    assert_true(calls > 4);     /* several runs per blob */
    assert_true(calls <= 4 * pieces);
    assert_int_equal((uint64_t)tu_stat(f->c, "h2d_copies") - blobs0, 4); /* still counted per blob */
    assert_int_equal((uint64_t)tu_stat(f->c, "h2d_bytes") - bytes0, 4 * tu_row_bytes(f->b));
    assert_int_equal(tu_stat(f->c, "staging_slots_busy"), 0);
    tu_check_invariants(f->c);
}

static void test_h2d_enqueue_fails(void **state) {
    fx *f = *state;
    hz_backend_fault_arm(f->fb, HZ_FAULT_COPY_H2D, 3, HZ_EDEVICE);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(), "copy_h2d"));
    expect_recovered(f, st, HZ_EDEVICE);
}

static void test_event_record_fails(void **state) {
    fx *f = *state;
    hz_backend_fault_arm(f->fb, HZ_FAULT_EVENT_RECORD, nth_second_record(f), HZ_EDEVICE);
    expect_recovered(f, acquire_new_fails(f), HZ_EDEVICE);
}

static void test_event_wait_fails(void **state) {
    fx *f = *state;
    /* the first wait is the reuse of staging slot 0 by the third copy (registered: the group's wait) */
    hz_backend_fault_arm(f->fb, HZ_FAULT_EVENT_WAIT, 1, HZ_EDEVICE);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(),
                           f->transport == HZ_TRANSPORT_REGISTERED ? "registered copies" : "staging slot"));
    expect_recovered(f, st, HZ_EDEVICE);
}

static void test_final_event_wait_fails(void **state) {
    fx *f = *state;
    /* waits: slot 0 reuse, slot 1 reuse, final slot 0, final slot 1 (the last one fails) */
    hz_backend_fault_arm(f->fb, HZ_FAULT_EVENT_WAIT, nth_last_wait(f), HZ_EDEVICE);
    expect_recovered(f, acquire_new_fails(f), HZ_EDEVICE);
}

static void test_transfer_event_reports_error(void **state) {
    fx *f = *state;
    /* the second copy's event (registered: the group's) completes with an error: a transfer failed */
    hz_backend_fault_arm_event_error(f->fb, nth_second_record(f), HZ_EDEVICE);
    int st = acquire_new_fails(f);
    assert_non_null(strstr(hz_last_error_message(), "injected error"));
    expect_recovered(f, st, HZ_EDEVICE);
}

static void test_generation_alloc_fails(void **state) {
    fx *f = *state;
    /* publication needs the new generation's consumer event: fail its creation after the copies */
    hz_backend_fault_arm(f->fb, HZ_FAULT_EVENT_CREATE, 1, HZ_ENOMEM);
    assert_int_equal(acquire_new_fails(f), HZ_ENOMEM);
    /* this one is not a transfer failure, so the message differs; the recovery must not */
    tu_expect_rolled_back(f->c, 4);
    tu_check_invariants(f->c);
    hz_backend_fault_reset(f->fb);
    tu_acquire_check_release(f->c, f->b, 0, k_new, 4);
}

static void test_undrainable_failure_faults(void **state) {
    fx *f = *state;
    /* a copy fails and the queue cannot be drained: the rows may still be written: FAULTED */
    hz_backend_fault_arm(f->fb, HZ_FAULT_COPY_H2D, 2, HZ_EDEVICE);
    hz_backend_fault_arm(f->fb, HZ_FAULT_QUEUE_SYNC, 1, HZ_EDEVICE);
    assert_int_equal(acquire_new_fails(f), HZ_EFAULTED);
    assert_non_null(strstr(hz_last_error_message(), "draining"));
    hz_backend_fault_reset(f->fb);
    expect_faulted(f);
}

/* Releases a lease on generation 1 whose consumer event will report an error. */
static void release_with_failing_consumer(fx *f) {
    hz_event *ev = NULL;
    assert_int_equal(hz_event_create(f->d, &ev), HZ_OK);
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, k_old, 4, &l), HZ_OK);
    assert_int_equal(hz_event_record(ev), HZ_OK);
    /* the generation's own consumer record (inside release) will report that the consumer failed */
    hz_backend_fault_arm_event_error(f->fb, 1, HZ_EDEVICE);
    assert_int_equal(hz_generation_release(l, ev), HZ_OK);
    /* let the compute queue reach that record, so the error is there to be seen */
    assert_int_equal(hz_event_record(ev), HZ_OK);
    assert_int_equal(hz_event_synchronize(ev), HZ_OK);
    hz_event_destroy(ev);
}

static void test_consumer_error_seen_at_publication(void **state) {
    fx *f = *state;
    release_with_failing_consumer(f);
    /* nothing is wrong until generation 1 has to retire, i.e. right after the next publication */
    assert_int_equal(acquire_new_fails(f), HZ_EFAULTED);
    assert_non_null(strstr(hz_last_error_message(), "consumer event of generation 1"));
    /* generation 2 was published before the fault was seen */
    assert_int_equal(tu_stat(f->c, "generation"), 2);
    expect_faulted(f);
    assert_int_equal(tu_stat(f->c, "leases_active"), 0);
}

static void test_consumer_error_seen_at_last_release(void **state) {
    fx *f = *state;
    release_with_failing_consumer(f);
    hz_generation *keep = NULL;
    uint32_t two[2] = {0, 1};
    assert_int_equal(hz_generation_acquire(f->c, 0, two, 2, &keep), HZ_OK); /* pins generation 1 */
    assert_int_equal(tu_acquire_check_release(f->c, f->b, 0, k_new, 4), 2);
    /* the last lease on generation 1 ends: it retires, and its failed consumer comes to light */
    assert_int_equal(hz_generation_release(keep, NULL), HZ_EFAULTED);
    assert_non_null(strstr(hz_last_error_message(), "consumer event of generation 1"));
    assert_int_equal(hz_generation_release(keep, NULL), HZ_EINVAL);
    assert_int_equal(tu_stat(f->c, "leases_active"), 0);
    expect_faulted(f);
}

static void test_release_record_fails(void **state) {
    fx *f = *state;
    hz_event *ev = NULL;
    assert_int_equal(hz_event_create(f->d, &ev), HZ_OK);
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, k_old, 4, &l), HZ_OK);
    assert_int_equal(hz_event_record(ev), HZ_OK);
    /* the consumer cannot be tracked: its rows could be reused under it, so FAULTED */
    hz_backend_fault_arm(f->fb, HZ_FAULT_QUEUE_WAIT_EVENT, 1, HZ_EDEVICE);
    assert_int_equal(hz_generation_release(l, ev), HZ_EFAULTED);
    hz_event_destroy(ev);
    hz_backend_fault_reset(f->fb);
    expect_faulted(f);
    assert_int_equal(tu_stat(f->c, "leases_active"), 0);
}

static void test_create_fails_cleanly(void **state) {
    int transport = *(const int *)*state;
    hz_host_backing *b = tu_backing(2, 8, 2, 9);
    hz_backend *fb = NULL;
    hz_device *d = tu_fault_device(&fb);
    hz_cache_options o;
    tu_options(&o, transport);
    o.capacity = 4;
    hz_cache *c = NULL;
    /* registered: no pinned staging to allocate, a registration instead */
    const hz_fault_op ops[] = {HZ_FAULT_MEM_ALLOC, HZ_FAULT_EVENT_CREATE, HZ_FAULT_COPY_H2D, HZ_FAULT_EVENT_WAIT,
                               transport == HZ_TRANSPORT_REGISTERED ? HZ_FAULT_HOST_REGISTER : HZ_FAULT_PINNED_ALLOC};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        uint64_t before = hz_backend_fault_fired(fb);
        hz_backend_fault_arm(fb, ops[i], 1, HZ_EDEVICE);
        assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EDEVICE);
        assert_null(c);
        assert_int_equal(hz_backend_fault_fired(fb), before + 1);
        if (ops[i] == HZ_FAULT_HOST_REGISTER) {
            assert_non_null(strstr(hz_last_error_message(), "host_register"));
            assert_non_null(strstr(hz_last_error_message(), "direct DMA"));
        }
        hz_backend_fault_reset(fb);
    }
    /* nothing registered, nothing leaked (ASan checks the latter) */
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TRANSPORT_TEST_(test_staging_copy_fails, setup, teardown, 0, "serial"),
        TU_TRANSPORT_TEST_(test_staging_copy_fails, setup, teardown, 1, "threaded"),
        TU_TRANSPORT_TEST_(test_threaded_late_piece_fails, setup, teardown, 1, "threaded"),
        cmocka_unit_test(test_threaded_piece_fails_others_in_flight),
        TU_TRANSPORT_TEST_(test_piecewise_runs, setup, teardown, 3, "threaded piecewise"),
        TU_TRANSPORT_TESTS(test_h2d_enqueue_fails, setup, teardown),
        TU_TRANSPORT_TESTS(test_event_record_fails, setup, teardown),
        TU_TRANSPORT_TESTS(test_event_wait_fails, setup, teardown),
        TU_TRANSPORT_TESTS(test_final_event_wait_fails, setup, teardown),
        TU_TRANSPORT_TESTS(test_transfer_event_reports_error, setup, teardown),
        TU_TRANSPORT_TESTS(test_generation_alloc_fails, setup, teardown),
        TU_TRANSPORT_TESTS(test_undrainable_failure_faults, setup, teardown),
        TU_TRANSPORT_TESTS(test_consumer_error_seen_at_publication, setup, teardown),
        TU_TRANSPORT_TESTS(test_consumer_error_seen_at_last_release, setup, teardown),
        TU_TRANSPORT_TESTS(test_release_record_fails, setup, teardown),
        TU_TRANSPORT_TESTS(test_create_fails_cleanly, NULL, NULL),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
