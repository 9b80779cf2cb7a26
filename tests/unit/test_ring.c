/* test_ring.c: the load_balancing ring: the same backend set maps every key alike whatever the
 * order it was given in, in another process too, and the routing keys are pinned; removing a
 * backend moves only its keys, adding one moves keys only to it; the rank is the failover
 * order (second choice = owner after removal); the load is even; jump hash moves keys only to a
 * new bucket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exporters/load_balancing/ring.h"

#define NKEYS 20000

static const char *const GW[] = {"10.0.0.7:4318",     "10.0.0.8:4318",     "10.0.0.9:4318",
                                 "gw-3.hotspan:4318", "gw-4.hotspan:4318", "[fd00::5]:4318"};

static uint64_t key_of(unsigned i)
{
    char t[32], s[32];
    int tl = snprintf(t, sizeof(t), "tenant-%u", i % 7);
    int sl = snprintf(s, sizeof(s), "service-%u", i);
    return hs_ring_key_tenant_service((struct hs_str){t, (size_t)tl},
                                      (struct hs_str){s, (size_t)sl});
}

/* The owner's name for each key, so rings over different sets can be compared. */
static const char **owners(const struct hs_ring *r)
{
    const char **o = calloc(NKEYS, sizeof(*o));
    for (unsigned i = 0; i < NKEYS; i++) {
        int b = hs_ring_pick(r, key_of(i));
        assert_true(b >= 0);
        o[i] = hs_ring_name(r, (size_t)b);
    }
    return o;
}

static void test_order_and_duplicates_do_not_matter(void **state)
{
    const char *rev[HS_ARRAY_SIZE(GW) + 2];
    for (size_t i = 0; i < HS_ARRAY_SIZE(GW); i++)
        rev[i] = GW[HS_ARRAY_SIZE(GW) - 1 - i];
    rev[HS_ARRAY_SIZE(GW)] = GW[2]; /* a duplicate, as a DNS answer with A records twice */
    rev[HS_ARRAY_SIZE(GW) + 1] = "";
    struct hs_ring *a = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    struct hs_ring *b = hs_ring_new(rev, HS_ARRAY_SIZE(rev));
    assert_int_equal(hs_ring_size(b), HS_ARRAY_SIZE(GW));
    const char **oa = owners(a), **ob = owners(b);
    for (unsigned i = 0; i < NKEYS; i++)
        assert_string_equal(oa[i], ob[i]);
    assert_int_equal(hs_ring_find(b, "gw-4.hotspan:4318"), 5);
    assert_int_equal(hs_ring_find(b, "gw-5.hotspan:4318"), -1);
    free(oa);
    free(ob);
    hs_ring_free(a);
    hs_ring_free(b);
}

/* The child of test_same_mapping_in_another_process: a ring from a rotated list, its picks on
 * stdout. */
static int write_picks(void)
{
    const char *rot[HS_ARRAY_SIZE(GW)];
    for (size_t i = 0; i < HS_ARRAY_SIZE(GW); i++)
        rot[i] = GW[(i + 3) % HS_ARRAY_SIZE(GW)];
    struct hs_ring *r = hs_ring_new(rot, HS_ARRAY_SIZE(rot));
    for (unsigned i = 0; i < NKEYS; i++)
        putchar(hs_ring_pick(r, key_of(i)));
    hs_ring_free(r);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* This program run again (fresh addresses, fresh heap, another list order) must pick alike:
 * nothing may depend on pointers or on the state of the process. */
static void test_same_mapping_in_another_process(void **state)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl("/proc/self/exe", "test_ring", "--picks", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    struct hs_ring *r = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    FILE *in = fdopen(fd[0], "r");
    unsigned same = 0;
    int c;
    for (unsigned i = 0; i < NKEYS && (c = getc(in)) != EOF; i++)
        same += c == hs_ring_pick(r, key_of(i));
    fclose(in);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(same, NKEYS);
    hs_ring_free(r);
}

/* Pinned values: two hotspans of different versions in one first tier must route alike, so a
 * change of the hash is a breaking change this test makes visible. */
static void test_keys_are_pinned(void **state)
{
    uint8_t tid[16];
    for (int i = 0; i < 16; i++)
        tid[i] = (uint8_t)i;
    assert_int_equal(hs_ring_key_tenant_service(HS_STR("acme"), HS_STR("checkout")),
                     0x70a737eb4b5ad259ULL);
    assert_int_equal(hs_ring_key_service(HS_STR("checkout")), 0xa496c23b1af8693dULL);
    assert_int_equal(hs_ring_key_trace_id(tid), 0x7cbb4910b9fe8415ULL);
    /* the tenant/service boundary is part of the key */
    assert_true(hs_ring_key_tenant_service(HS_STR("ab"), HS_STR("c")) !=
                hs_ring_key_tenant_service(HS_STR("a"), HS_STR("bc")));
    struct hs_ring *r = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    assert_string_equal(hs_ring_name(r, (size_t)hs_ring_pick(r, key_of(1))), "10.0.0.7:4318");
    hs_ring_free(r);
}

static void test_removal_moves_only_that_backends_keys(void **state)
{
    struct hs_ring *all = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    const char **before = owners(all);
    for (size_t gone = 0; gone < HS_ARRAY_SIZE(GW); gone++) {
        const char *rest[HS_ARRAY_SIZE(GW) - 1];
        for (size_t i = 0, k = 0; i < HS_ARRAY_SIZE(GW); i++)
            if (i != gone)
                rest[k++] = GW[i];
        struct hs_ring *r = hs_ring_new(rest, HS_ARRAY_SIZE(rest));
        const char **after = owners(r);
        unsigned moved = 0;
        for (unsigned i = 0; i < NKEYS; i++) {
            if (strcmp(before[i], after[i]) == 0)
                continue;
            assert_string_equal(before[i], GW[gone]); /* only the removed one's keys move */
            moved++;
        }
        unsigned owned = 0;
        for (unsigned i = 0; i < NKEYS; i++)
            owned += strcmp(before[i], GW[gone]) == 0;
        assert_int_equal(moved, owned); /* and all of them do */
        free(after);
        hs_ring_free(r);
    }
    free(before);
    hs_ring_free(all);
}

static void test_add_moves_keys_only_to_the_new_backend(void **state)
{
    struct hs_ring *small = hs_ring_new(GW, HS_ARRAY_SIZE(GW) - 1);
    struct hs_ring *big = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    const char *added = GW[HS_ARRAY_SIZE(GW) - 1];
    const char **before = owners(small), **after = owners(big);
    unsigned moved = 0;
    for (unsigned i = 0; i < NKEYS; i++) {
        if (strcmp(before[i], after[i]) == 0)
            continue;
        assert_string_equal(after[i], added);
        moved++;
    }
    /* about 1/6 of the keys: a broken hash that moves none or all fails here */
    assert_true(moved > NKEYS / 6 * 8 / 10 && moved < NKEYS / 6 * 12 / 10);
    free(before);
    free(after);
    hs_ring_free(small);
    hs_ring_free(big);
}

/* The second choice of each key is its owner once the first is gone: re-routing a dead
 * backend's keys by rank agrees with what removing it from the resolver's answer would do. */
static void test_rank_is_the_failover_order(void **state)
{
    struct hs_ring *all = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    uint32_t rank[HS_ARRAY_SIZE(GW) + 1];
    for (unsigned i = 0; i < 2000; i++) {
        uint64_t k = key_of(i);
        assert_int_equal(hs_ring_rank(all, k, rank, HS_ARRAY_SIZE(rank)), HS_ARRAY_SIZE(GW));
        assert_int_equal(rank[0], hs_ring_pick(all, k));
        for (size_t j = 1; j < HS_ARRAY_SIZE(GW); j++)
            assert_true(rank[j] != rank[j - 1]);
        const char *rest[HS_ARRAY_SIZE(GW)];
        size_t n = 0;
        for (size_t b = 0; b < HS_ARRAY_SIZE(GW); b++)
            if (strcmp(GW[b], hs_ring_name(all, rank[0])) != 0)
                rest[n++] = GW[b];
        struct hs_ring *r = hs_ring_new(rest, n);
        assert_string_equal(hs_ring_name(r, (size_t)hs_ring_pick(r, k)),
                            hs_ring_name(all, rank[1]));
        hs_ring_free(r);
        uint32_t two[2];
        assert_int_equal(hs_ring_rank(all, k, two, 2), 2);
        assert_int_equal(two[0], rank[0]);
        assert_int_equal(two[1], rank[1]);
    }
    assert_int_equal(hs_ring_rank(all, 1, rank, 0), 0);
    hs_ring_free(all);
}

static void test_load_is_even_and_empty_ring_picks_nothing(void **state)
{
    struct hs_ring *r = hs_ring_new(GW, HS_ARRAY_SIZE(GW));
    unsigned count[HS_ARRAY_SIZE(GW)] = {0};
    for (unsigned i = 0; i < NKEYS; i++)
        count[hs_ring_pick(r, key_of(i))]++;
    for (size_t b = 0; b < HS_ARRAY_SIZE(GW); b++) /* within 10% of the mean (binomial: ~2%) */
        assert_true(count[b] > NKEYS / 6 * 9 / 10 && count[b] < NKEYS / 6 * 11 / 10);
    hs_ring_free(r);
    struct hs_ring *e = hs_ring_new(NULL, 0);
    uint32_t rank[2];
    assert_int_equal(hs_ring_size(e), 0);
    assert_int_equal(hs_ring_pick(e, 42), -1);
    assert_int_equal(hs_ring_rank(e, 42, rank, 2), 0);
    hs_ring_free(e);
}

static void test_jump_moves_keys_only_to_the_new_bucket(void **state)
{
    unsigned moved = 0, count[11] = {0};
    for (unsigned i = 0; i < NKEYS; i++) {
        uint64_t k = key_of(i);
        uint32_t a = hs_ring_jump(k, 10), b = hs_ring_jump(k, 11);
        assert_true(a < 10 && b < 11);
        if (a != b) {
            assert_int_equal(b, 10);
            moved++;
        }
        count[b]++;
        assert_int_equal(hs_ring_jump(k, 1), 0);
    }
    assert_true(moved > NKEYS / 11 * 8 / 10 && moved < NKEYS / 11 * 12 / 10);
    for (int b = 0; b < 11; b++)
        assert_true(count[b] > NKEYS / 11 * 8 / 10);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--picks") == 0)
        return write_picks();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_duplicates_do_not_matter),
        cmocka_unit_test(test_same_mapping_in_another_process),
        cmocka_unit_test(test_keys_are_pinned),
        cmocka_unit_test(test_removal_moves_only_that_backends_keys),
        cmocka_unit_test(test_add_moves_keys_only_to_the_new_backend),
        cmocka_unit_test(test_rank_is_the_failover_order),
        cmocka_unit_test(test_load_is_even_and_empty_ring_picks_nothing),
        cmocka_unit_test(test_jump_moves_keys_only_to_the_new_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
