/* compress.h: gzip in (zlib streaming, bounded output: bombs stop at the limit) and out
 * (libdeflate). */
#ifndef HS_COMPRESS_H
#define HS_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

struct hs_buf;

/* Inflates a whole gzip stream (also concatenated members) into out. Returns 0; HS_E2BIG when
 * the output would pass `max_out`; HS_EINVAL when the data is not gzip, corrupt or truncated
 * (msg says which); HS_ENOMEM. */
int hs_gunzip(const uint8_t *in, size_t len, size_t max_out, struct hs_buf *out, const char **msg);

/* Compresses into out (replacing its contents). level 1..12 (libdeflate). 0 or HS_ENOMEM. */
int hs_gzip(const uint8_t *in, size_t len, int level, struct hs_buf *out);

#endif
