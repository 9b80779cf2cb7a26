/* fuzz_pprof.c: libFuzzer target for the pprof decoder. The first byte picks the mode: even, the
 * rest is a profile's raw bytes (gzipped or not) for hs_profile_summarize with small limits; odd,
 * it is folded text for hs_pprof_from_folded, whose output must then summarize cleanly. Either
 * way a summary must be consistent with itself (indexes in range, values adding up). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/errors.h"
#include "pdata/profiles.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_pprof: %s: %s\n", what, detail);
    abort();
}

static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* Every sample lands in exactly one stack, and in a leaf's self when its stack is not empty. */
static void check_summary(const struct hs_profile *p)
{
    const struct hs_profile_summary *s = &p->summary;
    if (!hs_profile_label(p, "__name__") || !p->service)
        fail("labels", "__name__ or service_name missing");
    if (s->ntypes && s->main_type >= s->ntypes)
        fail("main_type", "out of range");
    for (uint32_t t = 0; t < s->ntypes; t++) {
        int64_t stacks = 0, self = 0, leafless = 0;
        for (uint32_t i = 0; i < s->nstacks; i++) {
            const struct hs_profile_stack *st = &s->stacks[i];
            if (st->span != HS_PROFILE_NO_SPAN && st->span >= s->nspans)
                fail("stack span", "out of range");
            for (uint32_t d = 0; d < st->depth; d++)
                if (st->funcs[d] >= s->nfuncs)
                    fail("stack function", "out of range");
            stacks = wadd(stacks, st->values[t]);
            if (st->depth == 0)
                leafless = wadd(leafless, st->values[t]);
        }
        for (uint32_t f = 0; f < s->nfuncs; f++)
            self = wadd(self, s->funcs[f].self[t]);
        if (stacks != s->totals[t])
            fail("totals", "stack values do not add up to the totals");
        if (wadd(self, leafless) != s->totals[t])
            fail("self", "self values do not add up to the totals");
    }
}

static void pprof_side(const uint8_t *data, size_t size)
{
    static const struct hs_pprof_limits lim = {.max_decompressed = 1 << 20,
                                               .max_samples = 512,
                                               .max_sample_labels = 16,
                                               .max_stack_depth = 128};
    char err[256];
    struct hs_profile *p = hs_profile_new();
    if (!p || hs_profile_set_raw(p, data, size) != 0)
        abort();
    int rc = hs_profile_summarize(p, &lim, err, sizeof(err));
    if (rc == 0)
        check_summary(p);
    else if ((rc != HS_EINVAL && rc != HS_E2BIG) || !err[0])
        fail("a refusal without HS_EINVAL/HS_E2BIG and a message", err);
    hs_profile_free(p);
}

static void folded_side(const uint8_t *data, size_t size)
{
    static const struct hs_pprof_limits lim = {
        .max_decompressed = 64 << 20, .max_samples = 256, .max_string_len = 1024};
    char err[256];
    struct hs_buf out = {0};
    int rc = hs_pprof_from_folded((const char *)data, size, "cpu", "nanoseconds",
                                  size % 2 ? 10000000 : 0, &lim, &out, err, sizeof(err));
    if (rc == 0) {
        struct hs_profile *p = hs_profile_new();
        if (!p || hs_profile_set_raw(p, out.data, out.len) != 0)
            abort();
        if (hs_profile_summarize(p, &lim, err, sizeof(err)) != 0)
            fail("our own folded conversion does not summarize", err);
        check_summary(p);
        hs_profile_free(p);
    } else if ((rc != HS_EINVAL && rc != HS_E2BIG) || !err[0]) {
        fail("a folded refusal without HS_EINVAL/HS_E2BIG and a message", err);
    }
    hs_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        folded_side(data + 1, size - 1);
    else
        pprof_side(data + 1, size - 1);
    return 0;
}
