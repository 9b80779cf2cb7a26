/* grpc.c: gRPC's unary call over HTTP/2 (grpc.h): message framing, gzip, status and trailers,
 * RetryInfo in grpc-status-details-bin (hand-encoded: four tiny messages), grpc-timeout. */
#include "grpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libdeflate.h>

#include "core/compress.h"
#include "core/errors.h"

/* Responses are small (an ExportTraceServiceResponse); level 1 as in the exporter. */
#define GZIP_LEVEL 1

static const char *const code_names[] = {
    "OK",          "CANCELLED",         "UNKNOWN",          "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",   "ALREADY_EXISTS",   "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",        "UNAVAILABLE",      "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *hs_grpc_code_name(int code)
{
    return code >= 0 && (size_t)code < HS_ARRAY_SIZE(code_names) ? code_names[code] : "UNKNOWN";
}

/* ---- framing ----------------------------------------------------------------------------- */

int hs_grpc_unframe(const uint8_t *body, size_t len, const struct hs_str *encoding, uint64_t max,
                    struct hs_buf *out, const uint8_t **msg, size_t *msg_len, char *err,
                    size_t errlen)
{
    err[0] = '\0';
    bool gzip = false;
    if (encoding && encoding->len && !hs_str_ieq(*encoding, "identity")) {
        if (!hs_str_ieq(*encoding, "gzip")) {
            snprintf(err, errlen, "grpc-encoding \"%.*s\" is not supported (supported: %s)",
                     (int)HS_MIN(encoding->len, 40), encoding->ptr, HS_GRPC_ACCEPT_ENCODING);
            return HS_GRPC_UNIMPLEMENTED;
        }
        gzip = true;
    }
    if (len < HS_GRPC_PREFIX) {
        snprintf(err, errlen, "%s", len ? "truncated gRPC message prefix" : "no request message");
        return HS_GRPC_INTERNAL;
    }
    uint8_t flag = body[0];
    uint64_t n = (uint64_t)body[1] << 24 | (uint64_t)body[2] << 16 | (uint64_t)body[3] << 8 |
                 body[4];
    if (flag > 1) {
        snprintf(err, errlen, "bad gRPC compressed flag %u", flag);
        return HS_GRPC_INTERNAL;
    }
    if (n > max) {
        snprintf(err, errlen, "message of %llu bytes is larger than the limit (%llu bytes)",
                 (unsigned long long)n, (unsigned long long)max);
        return HS_GRPC_RESOURCE_EXHAUSTED;
    }
    if (n != len - HS_GRPC_PREFIX) {
        snprintf(err, errlen,
                 n > len - HS_GRPC_PREFIX ? "truncated gRPC message"
                                          : "more than one message in a unary request");
        return HS_GRPC_INTERNAL;
    }
    const uint8_t *p = body + HS_GRPC_PREFIX;
    if (flag == 0) {
        *msg = p;
        *msg_len = (size_t)n;
        return HS_GRPC_OK;
    }
    if (!gzip) { /* PROTOCOL-HTTP2.md: compressed flag without grpc-encoding is INTERNAL */
        snprintf(err, errlen, "compressed message without grpc-encoding");
        return HS_GRPC_INTERNAL;
    }
    const char *why = NULL;
    int rc = hs_gunzip(p, (size_t)n, (size_t)max, out, &why);
    if (rc == HS_E2BIG) {
        snprintf(err, errlen, "decompressed message is larger than the limit (%llu bytes)",
                 (unsigned long long)max);
        return HS_GRPC_RESOURCE_EXHAUSTED;
    }
    if (rc) {
        snprintf(err, errlen, "bad gzip message: %s", why ? why : hs_strerror(rc));
        return rc == HS_ENOMEM ? HS_GRPC_RESOURCE_EXHAUSTED : HS_GRPC_INTERNAL;
    }
    *msg = out->data ? out->data : (const uint8_t *)"";
    *msg_len = out->len;
    return HS_GRPC_OK;
}

int hs_grpc_prefix(uint8_t out[HS_GRPC_PREFIX], size_t len, bool compressed)
{
    if (len > UINT32_MAX)
        return HS_E2BIG;
    out[0] = compressed ? 1 : 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
    return 0;
}

/* Deflates straight behind a prefix reserved in out: the gzip output is not copied again. */
static int frame_gzip(struct hs_buf *out, const uint8_t *msg, size_t len)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(GZIP_LEVEL);
    if (!c)
        return HS_ENOMEM;
    size_t bound = libdeflate_gzip_compress_bound(c, len);
    int rc = hs_buf_reserve(out, HS_GRPC_PREFIX + bound);
    if (rc == 0) {
        uint8_t *p = out->data + out->len;
        size_t n = libdeflate_gzip_compress(c, msg, len, p + HS_GRPC_PREFIX, bound);
        if (n == 0) /* cannot happen with the bound; treated as the allocation it stands for */
            rc = HS_ENOMEM;
        else if ((rc = hs_grpc_prefix(p, n, true)) == 0)
            out->len += HS_GRPC_PREFIX + n;
    }
    libdeflate_free_compressor(c);
    return rc;
}

int hs_grpc_frame(struct hs_buf *out, const uint8_t *msg, size_t len, bool gzip)
{
    if (gzip)
        return frame_gzip(out, msg, len);
    uint8_t pre[HS_GRPC_PREFIX];
    int rc = hs_grpc_prefix(pre, len, false);
    if (rc == 0)
        rc = hs_buf_reserve(out, sizeof(pre) + len);
    if (rc != 0)
        return rc;
    hs_buf_append(out, pre, sizeof(pre)); /* reserved above: cannot fail */
    if (len)
        hs_buf_append(out, msg, len);
    return 0;
}

/* ---- grpc-message ------------------------------------------------------------------------ */

void hs_grpc_percent_encode(const char *in, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        if (o + (plain ? 1 : 3) >= outlen)
            break;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (outlen)
        out[o] = '\0';
}

void hs_grpc_percent_decode(const char *in, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < outlen; i++) {
        int hi, lo;
        if (in[i] == '%' && i + 2 < len && (hi = hs_hexval(in[i + 1])) >= 0 &&
            (lo = hs_hexval(in[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    if (outlen)
        out[o] = '\0';
}

/* ---- google.rpc.Status with RetryInfo ---------------------------------------------------- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* tag + length + bytes, into p; returns the size */
static size_t put_bytes(uint8_t *p, unsigned field, const void *b, size_t len)
{
    size_t n = put_varint(p, (uint64_t)field << 3 | 2);
    n += put_varint(p + n, len);
    memcpy(p + n, b, len);
    return n + len;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int base64_encode(const uint8_t *in, size_t len, char *out, size_t outlen)
{
    if ((len + 2) / 3 * 4 + 1 > outlen)
        return HS_E2BIG;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < len ? in[i + 2] : 0);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return 0;
}

#define RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"
#define RETRY_SUFFIX "/google.rpc.RetryInfo"

int hs_grpc_status_details(int code, const char *msg, uint64_t retry_delay_ms, char *out,
                           size_t outlen)
{
    uint8_t dur[24], info[32], any[96], st[512];
    size_t nd = 0, ni, na, ns = 0;
    uint64_t secs = retry_delay_ms / 1000, nanos = retry_delay_ms % 1000 * 1000000;
    if (secs) {
        dur[nd++] = 0x08; /* Duration.seconds */
        nd += put_varint(dur + nd, secs);
    }
    if (nanos) {
        dur[nd++] = 0x10; /* Duration.nanos */
        nd += put_varint(dur + nd, nanos);
    }
    ni = put_bytes(info, 1, dur, nd); /* RetryInfo.retry_delay */
    na = put_bytes(any, 1, RETRY_INFO_TYPE, sizeof(RETRY_INFO_TYPE) - 1); /* Any.type_url */
    na += put_bytes(any + na, 2, info, ni);                                 /* Any.value */
    size_t mlen = HS_MIN(strlen(msg), sizeof(st) - na - 16);
    if (code) {
        st[ns++] = 0x08; /* Status.code */
        ns += put_varint(st + ns, (uint64_t)code);
    }
    ns += put_bytes(st + ns, 2, msg, mlen); /* Status.message */
    ns += put_bytes(st + ns, 3, any, na);   /* Status.details */
    return base64_encode(st, ns, out, outlen);
}

static int b64val(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    if (p)
        return (int)(p - b64);
    return c == '-' ? 62 : c == '_' ? 63 : -1; /* URL-safe too, at no cost */
}

/* Reads a varint at *p (< end); false when truncated. */
static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Calls out for each field of a message: number, wire type, and for length-delimited fields
 * the bytes; false on malformed input. Skips what it does not need. */
struct pb_field {
    unsigned num, type;
    uint64_t v;
    const uint8_t *b;
    size_t len;
};

static bool pb_next(const uint8_t **p, const uint8_t *end, struct pb_field *f)
{
    uint64_t key;
    if (!get_varint(p, end, &key))
        return false;
    f->num = (unsigned)(key >> 3);
    f->type = (unsigned)(key & 7);
    switch (f->type) {
    case 0:
        return get_varint(p, end, &f->v);
    case 1:
        if (end - *p < 8)
            return false;
        *p += 8;
        return true;
    case 5:
        if (end - *p < 4)
            return false;
        *p += 4;
        return true;
    case 2:
        if (!get_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p))
            return false;
        f->b = *p;
        f->len = (size_t)f->v;
        *p += f->len;
        return true;
    default:
        return false;
    }
}

static bool retry_info_delay(const uint8_t *p, const uint8_t *end, uint64_t *ms)
{
    struct pb_field f;
    while (p < end) {
        if (!pb_next(&p, end, &f))
            return false;
        if (f.num != 1 || f.type != 2)
            continue;
        uint64_t secs = 0, nanos = 0;
        const uint8_t *q = f.b, *qe = f.b + f.len;
        struct pb_field d;
        while (q < qe) {
            if (!pb_next(&q, qe, &d))
                return false;
            if (d.num == 1 && d.type == 0)
                secs = d.v;
            else if (d.num == 2 && d.type == 0)
                nanos = d.v;
        }
        if (secs > 86400) /* as for Retry-After: more than a day is a day */
            secs = 86400;
        *ms = secs * 1000 + (nanos & 0xffffffff) / 1000000;
        return true;
    }
    return false;
}

bool hs_grpc_details_retry_delay(const char *in, size_t len, uint64_t *delay_ms)
{
    uint8_t buf[2048];
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len && in[i] != '='; i++) {
        int v = b64val(in[i]);
        if (v < 0 || n == sizeof(buf))
            return false;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[n++] = (uint8_t)(acc >> bits);
        }
    }
    const uint8_t *p = buf, *end = buf + n;
    struct pb_field f;
    while (p < end) {
        if (!pb_next(&p, end, &f))
            return false;
        if (f.num != 3 || f.type != 2) /* Status.details */
            continue;
        const uint8_t *q = f.b, *qe = f.b + f.len;
        struct pb_field a;
        bool is_retry = false;
        const uint8_t *val = NULL;
        size_t vlen = 0;
        while (q < qe) {
            if (!pb_next(&q, qe, &a))
                return false;
            if (a.num == 1 && a.type == 2)
                is_retry = a.len >= sizeof(RETRY_SUFFIX) - 1 &&
                           memcmp(a.b + a.len - (sizeof(RETRY_SUFFIX) - 1), RETRY_SUFFIX,
                                  sizeof(RETRY_SUFFIX) - 1) == 0;
            else if (a.num == 2 && a.type == 2)
                val = a.b, vlen = a.len;
        }
        if (is_retry && val && retry_info_delay(val, val + vlen, delay_ms))
            return true;
        if (is_retry && !val) { /* an empty RetryInfo: retry, no delay asked */
            *delay_ms = 0;
            return true;
        }
    }
    return false;
}

/* ---- timeout, retry, HTTP ---------------------------------------------------------------- */

void hs_grpc_timeout_format(uint64_t ms, char *out, size_t outlen)
{
    if (ms <= 99999999)
        snprintf(out, outlen, "%llum", (unsigned long long)ms);
    else
        snprintf(out, outlen, "%lluS", (unsigned long long)HS_MIN(ms / 1000, 99999999));
}

bool hs_grpc_timeout_parse(struct hs_str v, uint64_t *ms)
{
    if (v.len < 2 || v.len > 9)
        return false;
    uint64_t n = 0;
    for (size_t i = 0; i + 1 < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return false;
        n = n * 10 + (uint64_t)(v.ptr[i] - '0');
    }
    switch (v.ptr[v.len - 1]) {
    case 'H': *ms = n * 3600000; return true;
    case 'M': *ms = n * 60000; return true;
    case 'S': *ms = n * 1000; return true;
    case 'm': *ms = n; return true;
    case 'u': *ms = n / 1000; return true;
    case 'n': *ms = n / 1000000; return true;
    default: return false;
    }
}

bool hs_grpc_retryable(int code, bool has_retry_info)
{
    switch (code) {
    case HS_GRPC_CANCELLED:
    case HS_GRPC_DEADLINE_EXCEEDED:
    case HS_GRPC_ABORTED:
    case HS_GRPC_OUT_OF_RANGE:
    case HS_GRPC_UNAVAILABLE:
    case HS_GRPC_DATA_LOSS:
        return true;
    case HS_GRPC_RESOURCE_EXHAUSTED:
        return has_retry_info;
    default:
        return false;
    }
}

int hs_grpc_code_from_http(int status)
{
    switch (status) {
    case 400: return HS_GRPC_INTERNAL;
    case 401: return HS_GRPC_UNAUTHENTICATED;
    case 403: return HS_GRPC_PERMISSION_DENIED;
    case 404: return HS_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return HS_GRPC_UNAVAILABLE;
    default: return HS_GRPC_UNKNOWN;
    }
}

/* ---- the server's answer ----------------------------------------------------------------- */

void hs_grpc_respond(struct hs_http_request *req, int code, const char *msg, const uint8_t *resp,
                     size_t resp_len, bool gzip, uint64_t retry_delay_ms)
{
    char status[8], text[1024], details[1024];
    struct hs_http_header extra[2];
    size_t nextra = 0;
    struct hs_http_header tr[3];
    size_t ntr = 0;
    struct hs_buf body = {0};
    extra[nextra++] = (struct hs_http_header){HS_STR("grpc-accept-encoding"),
                                              HS_STR(HS_GRPC_ACCEPT_ENCODING)};
    snprintf(status, sizeof(status), "%d", code);
    tr[ntr++] = (struct hs_http_header){HS_STR("grpc-status"), {status, strlen(status)}};
    if (code == HS_GRPC_OK) {
        if (hs_grpc_frame(&body, resp, resp_len, gzip) != 0) {
            code = HS_GRPC_RESOURCE_EXHAUSTED;
            msg = "out of memory for the response";
            snprintf(status, sizeof(status), "%d", code);
            tr[0].value = (struct hs_str){status, strlen(status)};
        } else if (gzip) {
            extra[nextra++] = (struct hs_http_header){HS_STR("grpc-encoding"), HS_STR("gzip")};
        }
    }
    if (code != HS_GRPC_OK) {
        hs_buf_free(&body);
        if (msg && msg[0]) {
            hs_grpc_percent_encode(msg, text, sizeof(text));
            tr[ntr++] = (struct hs_http_header){HS_STR("grpc-message"), {text, strlen(text)}};
        }
        if (retry_delay_ms &&
            hs_grpc_status_details(code, msg ? msg : "", retry_delay_ms, details,
                                   sizeof(details)) == 0)
            tr[ntr++] = (struct hs_http_header){HS_STR("grpc-status-details-bin"),
                                                {details, strlen(details)}};
    }
    hs_http_respond_trailers(req, 200, "application/grpc", extra, nextra, body.data, body.len, tr,
                             ntr);
    hs_buf_free(&body);
}

static bool media_is_grpc(const struct hs_str *ct)
{
    /* application/grpc, application/grpc+proto, application/grpc;charset=... */
    if (!ct || ct->len < 16 || strncasecmp(ct->ptr, "application/grpc", 16) != 0)
        return false;
    if (ct->len == 16 || ct->ptr[16] == ';')
        return true;
    return ct->len >= 22 && strncasecmp(ct->ptr + 16, "+proto", 6) == 0 &&
           (ct->len == 22 || ct->ptr[22] == ';');
}

bool hs_grpc_request_ok(struct hs_http_request *req)
{
    const struct hs_str *ct = hs_http_request_header(req, "content-type");
    if (!media_is_grpc(ct)) {
        /* PROTOCOL-HTTP2.md: a server SHOULD answer 415 to other content types */
        hs_http_respond_text(req, 415, "415 unsupported media type, supported: "
                                       "[application/grpc, application/grpc+proto]\n");
        return false;
    }
    if (strcmp(req->method, "POST") != 0) {
        hs_grpc_respond(req, HS_GRPC_UNIMPLEMENTED, "gRPC calls are POST", NULL, 0, false, 0);
        return false;
    }
    return true;
}

bool hs_grpc_request_gzip(const struct hs_http_request *req)
{
    const struct hs_str *e = hs_http_request_header(req, "grpc-encoding");
    return e && hs_str_ieq(*e, "gzip");
}

/* ---- the HTTP server's framing ------------------------------------------------------------ */

/* Any application/grpc* (+proto, -web, ...) is answered in gRPC's terms. */
static bool framing_claims(const struct hs_str *ct)
{
    return ct->len >= 16 && memcmp(ct->ptr, "application/grpc", 16) == 0;
}

static uint64_t framing_announced_len(const uint8_t *data, size_t len)
{
    if (len < HS_GRPC_PREFIX)
        return 0;
    return HS_GRPC_PREFIX +
           ((uint64_t)data[1] << 24 | (uint64_t)data[2] << 16 | (uint64_t)data[3] << 8 | data[4]);
}

static void framing_too_large(void *ud, struct hs_http_request *req)
{
    static const struct hs_http_header tr[] = {
        {HS_STR("grpc-status"), HS_STR("8")}, /* RESOURCE_EXHAUSTED */
        {HS_STR("grpc-message"),
         HS_STR("message larger than max_request_body_size")}, /* no '%' to encode */
    };
    hs_http_respond_trailers(req, 200, "application/grpc", NULL, 0, NULL, 0, tr, 2);
}

const struct hs_http_framing hs_grpc_framing = {
    .claims = framing_claims,
    .announced_len = framing_announced_len,
    .too_large = framing_too_large,
};
