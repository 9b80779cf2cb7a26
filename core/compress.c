/* compress.c: gzip in with zlib's streaming inflate, so a bomb stops at the output limit, and
 * gzip out with libdeflate, which is faster than zlib for whole buffers. */
#include "compress.h"

#include <libdeflate.h>
#include <zlib.h>

#include "buf.h"
#include "common.h"
#include "errors.h"

int hs_gunzip(const uint8_t *in, size_t len, size_t max_out, struct hs_buf *out, const char **msg)
{
    z_stream zs = {0};
    const char *why = NULL;
    int rc = 0;

    if (len < 2 || in[0] != 0x1f || in[1] != 0x8b) {
        *msg = "body is not gzip (bad magic bytes)";
        return HS_EINVAL;
    }
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return HS_ENOMEM;
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)HS_MIN(len, (size_t)UINT32_MAX);
    size_t left_in = len - zs.avail_in;
    for (;;) {
        if (out->cap - out->len < 16384) {
            size_t want = out->len < 65536 ? 65536 : out->len;
            if ((rc = hs_buf_reserve(out, HS_MIN(want, max_out + 1 - out->len + 16384))))
                break;
        }
        size_t room = HS_MIN(out->cap - out->len, max_out + 1 - out->len);
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt)HS_MIN(room, (size_t)UINT32_MAX);
        uInt before = zs.avail_out;
        int z = inflate(&zs, Z_NO_FLUSH);
        out->len += before - zs.avail_out;
        if (out->len > max_out) {
            why = "decompressed body exceeds the size limit";
            rc = HS_E2BIG;
            break;
        }
        if (z == Z_STREAM_END) {
            /* skip zero padding; a further member starts with the magic again */
            while (zs.avail_in > 0 && *zs.next_in == 0) {
                zs.next_in++;
                zs.avail_in--;
            }
            if (zs.avail_in == 0 && left_in == 0)
                break;
            if (inflateReset(&zs) != Z_OK) {
                rc = HS_EINVAL;
                why = "corrupt gzip data";
                break;
            }
            continue;
        }
        if (z == Z_OK || (z == Z_BUF_ERROR && zs.avail_out == 0)) {
            if (zs.avail_in == 0 && left_in > 0) {
                size_t n = HS_MIN(left_in, (size_t)UINT32_MAX);
                zs.avail_in = (uInt)n;
                left_in -= n;
            }
            if (zs.avail_in == 0 && zs.avail_out > 0) {
                why = "truncated gzip data (stream ends early)";
                rc = HS_EINVAL;
                break;
            }
            continue;
        }
        if (z == Z_BUF_ERROR) {
            why = "truncated gzip data (stream ends early)";
        } else if (z == Z_MEM_ERROR) {
            rc = HS_ENOMEM;
            break;
        } else {
            why = zs.msg ? zs.msg : "corrupt gzip data";
        }
        rc = HS_EINVAL;
        break;
    }
    inflateEnd(&zs);
    if (msg)
        *msg = why;
    return rc;
}

int hs_gzip(const uint8_t *in, size_t len, int level, struct hs_buf *out)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c)
        return HS_ENOMEM;
    size_t bound = libdeflate_gzip_compress_bound(c, len);
    out->len = 0;
    int rc = hs_buf_reserve(out, bound);
    if (rc == 0) {
        size_t n = libdeflate_gzip_compress(c, in, len, out->data, bound);
        if (n == 0)
            rc = HS_ENOMEM;
        out->len = n;
    }
    libdeflate_free_compressor(c);
    return rc;
}
