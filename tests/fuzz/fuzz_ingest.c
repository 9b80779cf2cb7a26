/* fuzz_ingest.c: libFuzzer target for the pyroscope receiver's parsers (receivers/pyroscope/):
 * query strings, attime, the `name` syntax, multipart bodies, and whole /ingest and push
 * requests. Input: one mode byte, a query line up to '\n', then the body. Nothing may crash,
 * parts must lie inside the body, and every refusal must carry a 4xx/503 status and a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/errors.h"
#include "receivers/pyroscope/pyroscope_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fail(int rc, const struct hs_pyro_fail *f)
{
    if (rc == 0)
        return;
    bool ok = (f->status == 400 || f->status == 413 || f->status == 415 || f->status == 503) &&
              f->msg[0] && f->reason;
    if (!ok) {
        fprintf(stderr, "fuzz_ingest: refusal without status or message: %d \"%s\"\n", f->status,
                f->msg);
        abort();
    }
}

static void parse_pieces(const char *q, size_t qlen, const uint8_t *body, size_t blen)
{
    struct hs_pyro_query query;
    char err[200];
    if (hs_pyro_query_parse(q, qlen, &query, err, sizeof(err)) == 0) {
        hs_pyro_attime(query.from, 1);
        hs_pyro_attime(query.until, 1);
        bool valid;
        hs_pyro_sample_rate(query.sample_rate, &valid);
        if (query.name) {
            struct hs_profile *p = hs_profile_new();
            if (p &&
                hs_labelset_parse(query.name, strlen(query.name), 30, p, err, sizeof(err)) == 0) {
                struct hs_pyro_folded ft;
                if (hs_pyro_folded_type(p->app_name, &ft) && ft.suffix_len > strlen(p->app_name))
                    abort();
            }
            hs_profile_free(p);
        }
        hs_pyro_query_free(&query);
    }
    /* the query line doubles as a Content-Type for the multipart parser */
    struct hs_str boundary;
    bool is_mp;
    if (!hs_pyro_multipart_boundary((struct hs_str){q, qlen}, &is_mp, &boundary))
        boundary = HS_STR("B");
    struct hs_pyro_part parts[HS_PYRO_MAX_PARTS];
    size_t n = 0;
    if (hs_pyro_multipart_parse(body, blen, boundary, parts, &n, err, sizeof(err)) == 0)
        for (size_t i = 0; i < n; i++)
            if (parts[i].data < body || parts[i].data + parts[i].len > body + blen)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const char *q = (const char *)data + 1;
    const uint8_t *nl = memchr(data + 1, '\n', size - 1);
    size_t qlen = nl ? (size_t)(nl - (data + 1)) : size - 1;
    const uint8_t *body = nl ? nl + 1 : data + size;
    size_t blen = (size_t)(data + size - body);
    parse_pieces(q, qlen, body, blen);

    const struct hs_pyro_limits lim = {.pprof = {.max_decompressed = 1 << 20,
                                                 .max_samples = 1000,
                                                 .max_sample_labels = 16,
                                                 .max_stack_depth = 64},
                                       .max_labels = 8,
                                       .max_profiles = 8};
    struct hs_profiles *b = hs_profiles_new(NULL);
    if (!b)
        return 0;
    struct hs_pyro_fail f = {0};
    int rc;
    switch (mode % 4) {
    case 0:
    case 1: {
        struct hs_pyro_ingest_req in = {.query = {q, qlen},
                                        .content_type =
                                            mode % 4 ? HS_STR("multipart/form-data; boundary=B")
                                                     : HS_STR("application/octet-stream"),
                                        .body = body,
                                        .len = blen,
                                        .now_ns = 1700000000000000000};
        rc = hs_pyro_ingest_decode(&in, &lim, b, &f);
        if (rc == 0 && b->count != 1)
            abort();
        break;
    }
    default:
        rc = hs_pyro_push_decode(body, blen, mode % 4 == 3, &lim, b, &f);
        if (rc == 0 && (b->count == 0 || b->count > lim.max_profiles))
            abort();
        break;
    }
    check_fail(rc, &f);
    hs_profiles_unref(b);
    return 0;
}
