/* fuzz_gunzip.c: libFuzzer target for hs_gunzip (core/compress.c): any bytes, two output limits;
 * it must not crash, and its answer must match a one-shot zlib inflate into a buffer of the
 * limit plus one byte: the same bytes, the same "too big", the same "bad". */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/buf.h"
#include "core/compress.h"
#include "core/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { REF_OK, REF_TOO_BIG, REF_BAD };

/* Inflates every gzip member (zero bytes between members are padding) in one buffer. */
static int reference(const uint8_t *in, size_t len, size_t limit, uint8_t *out, size_t *outlen)
{
    z_stream zs = {0};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        abort();
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)(limit + 1);
    int verdict = REF_BAD;
    for (;;) {
        int z = inflate(&zs, Z_FINISH);
        if (zs.total_out > limit) {
            verdict = REF_TOO_BIG;
            break;
        }
        if (z != Z_STREAM_END)
            break; /* corrupt, or the input ends early */
        while (zs.avail_in > 0 && *zs.next_in == 0) {
            zs.next_in++;
            zs.avail_in--;
        }
        if (zs.avail_in == 0) {
            verdict = REF_OK;
            break;
        }
        uLong total = zs.total_out; /* inflateReset zeroes it */
        if (inflateReset(&zs) != Z_OK)
            abort();
        zs.total_out = total;
    }
    *outlen = zs.total_out;
    inflateEnd(&zs);
    return verdict;
}

static void check(const uint8_t *data, size_t size, size_t limit, uint8_t *ref)
{
    struct hs_buf out = {0};
    const char *msg = NULL;
    int rc = hs_gunzip(data, size, limit, &out, &msg);
    size_t reflen = 0;
    int verdict = reference(data, size, limit, ref, &reflen);
    bool agree = rc == 0 ? verdict == REF_OK && out.len == reflen &&
                               (reflen == 0 || memcmp(out.data, ref, reflen) == 0)
                 : rc == HS_E2BIG  ? verdict == REF_TOO_BIG
                 : rc == HS_EINVAL ? verdict == REF_BAD && msg != NULL
                                   : false;
    if (!agree) {
        fprintf(stderr,
                "fuzz_gunzip: limit %zu: hs_gunzip %s (%s, %zu bytes), zlib %d (%zu bytes)\n",
                limit, hs_err_name(rc), msg ? msg : "-", out.len, verdict, reflen);
        abort();
    }
    if (rc == 0 && out.len > limit)
        abort();
    hs_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t ref[70001];
    check(data, size, 1000, ref);  /* stops inside the first buffer */
    check(data, size, 70000, ref); /* past the first growth step (64 KiB) */
    return 0;
}
