/* fuzz_otlp_profiles.c: libFuzzer target for the OTLP profiles decoder. The first byte picks the
 * input: even, the rest is an ExportProfilesServiceRequest in protobuf; odd, in OTLP/JSON. A
 * request that decodes must give consistent summaries (indexes in range, values adding up), and
 * its conversion to pprof must itself be a valid pprof, summarized by hs_profile_summarize to the
 * same totals, functions, stacks and spans. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/errors.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_otlp_profiles: %s: %s\n", what, detail);
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
    if (!hs_profile_label(p, "__name__") || !p->service || s->ntypes != 1)
        fail("labels", "__name__, service_name or the one sample type missing");
    int64_t stacks = 0, self = 0, leafless = 0;
    for (uint32_t i = 0; i < s->nstacks; i++) {
        const struct hs_profile_stack *st = &s->stacks[i];
        if (st->span != HS_PROFILE_NO_SPAN && st->span >= s->nspans)
            fail("stack span", "out of range");
        for (uint32_t d = 0; d < st->depth; d++)
            if (st->funcs[d] >= s->nfuncs)
                fail("stack function", "out of range");
        stacks = wadd(stacks, st->values[0]);
        if (st->depth == 0)
            leafless = wadd(leafless, st->values[0]);
    }
    for (uint32_t f = 0; f < s->nfuncs; f++)
        self = wadd(self, s->funcs[f].self[0]);
    if (stacks != s->totals[0])
        fail("totals", "stack values do not add up to the totals");
    if (wadd(self, leafless) != s->totals[0])
        fail("self", "self values do not add up to the totals");
}

/* The converted pprof summarizes to what the item says. */
static void check_pprof(const struct hs_profile *p)
{
    char err[256];
    struct hs_profile *q = hs_profile_new();
    if (!q || hs_profile_set_raw(q, p->raw, p->raw_len) != 0)
        abort();
    int rc = hs_profile_summarize(q, NULL, err, sizeof(err));
    if (rc == HS_ENOMEM || rc == HS_E2BIG) { /* the pprof tree may legitimately be large */
        hs_profile_free(q);
        return;
    }
    if (rc != 0)
        fail("the converted pprof does not summarize", err);
    const struct hs_profile_summary *a = &p->summary, *b = &q->summary;
    if (a->ntypes != b->ntypes || a->totals[0] != b->totals[0] || a->nfuncs != b->nfuncs ||
        a->nstacks != b->nstacks || a->nspans != b->nspans || a->samples != b->samples)
        fail("the converted pprof", "summarizes differently");
    for (uint32_t i = 0; i < a->nspans; i++)
        if (memcmp(a->spans[i].id, b->spans[i].id, 8) != 0 ||
            a->spans[i].values[0] != b->spans[i].values[0])
            fail("the converted pprof", "has other spans");
    if (q->from_ns != p->from_ns || q->until_ns != p->until_ns)
        fail("the converted pprof", "covers another time");
    hs_profile_free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct hs_otlp_profiles_limits lim = {.max_decompressed = 1 << 20,
                                                       .max_profiles = 16,
                                                       .max_samples = 256,
                                                       .max_table_entries = 1024,
                                                       .max_stack_depth = 64,
                                                       .max_attributes = 32,
                                                       .max_value_depth = 8,
                                                       .max_string_len = 4096};
    if (size == 0)
        return 0;
    char err[256] = "";
    struct hs_profiles *b = hs_profiles_new("fuzz");
    if (!b)
        abort();
    int rc = data[0] & 1 ? hs_otlp_profiles_decode_json(b, (const char *)data + 1, size - 1, &lim,
                                                        err, sizeof(err))
                         : hs_otlp_profiles_decode(b, data + 1, size - 1, &lim, err, sizeof(err));
    if (rc != 0) {
        if ((rc != HS_EINVAL && rc != HS_E2BIG) || !err[0])
            fail("a refusal without HS_EINVAL/HS_E2BIG and a message", err);
        if (b->count || b->request)
            fail("a refused request", "left items or bytes in the batch");
        hs_profiles_unref(b);
        return 0;
    }
    if (b->format != HS_PROFILES_OTLP || !b->request)
        fail("an accepted request", "is not kept");
    for (uint32_t i = 0; i < b->count; i++)
        check_summary(b->items[i]);
    rc = hs_profiles_to_pprof(b, err, sizeof(err));
    if (rc != 0 && rc != HS_E2BIG)
        fail("an accepted request does not convert to pprof", err);
    for (uint32_t i = 0; rc == 0 && i < b->count; i++)
        check_pprof(b->items[i]);
    hs_profiles_unref(b);
    return 0;
}
