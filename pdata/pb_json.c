/* pb_json.c: proto3 JSON to wire bytes (pb_json.h), one token at a time from core/json.h, each
 * value written as it is read, guided by protobuf-c's generated descriptors. */
#include "pdata/pb_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "core/json.h"
#include "pdata/otlp_json_int.h"

/* Why a pull reader and not jansson, which this replaced: jansson builds the whole document
 * before anyone can look at it, and its tree costs 10x an SDK's JSON and 75x a body of empty
 * objects (bench/bench_json_mem.c), so a 20 KB gzipped request took 1.6 GB. An allocation
 * budget would have bounded that, but a legitimate 64 MiB request would still need ~700 MB
 * of tree; reading and writing at once needs the output only (about half the JSON). jansson
 * stays as the reference the tests and fuzz_json_mem check this reader against. */

/* A key path, built on the stack as the walk descends and only rendered for an error. */
struct jpath {
    const struct jpath *up;
    const char *key; /* NULL: an array element */
    size_t index;
};

struct jdec {
    struct hs_json_reader r;
    const struct hs_pb_json_opts *o;
    struct hs_buf *out;
    size_t out_max; /* out->len may not pass this: twice the text, by construction never hit */
    bool nomem;     /* sticky: an append failed; checked once at the end */
    bool over;      /* sticky: out_max reached */
    uint32_t nested;
    uint32_t counts[HS_PB_JSON_MAX_LIMITS]; /* per-request limits' elements so far */
    char shown[64];                         /* show()'s room */
    char *err;
    size_t errlen;
};

/* One step of a path: ".key" (or "key" first) or "[3]". */
static size_t step_render(const struct jpath *p, bool first, char *out, size_t outlen)
{
    int w = p->key ? snprintf(out, outlen, "%s%s", first ? "" : ".", p->key)
                   : snprintf(out, outlen, "[%zu]", p->index);
    return w < 0 ? 0 : (size_t)w >= outlen ? outlen - 1 : (size_t)w;
}

/* The path, outermost first; when it is longer than out, its middle becomes "...", so the
 * outer indexes and the element that failed both stay. */
static void path_render(const struct jpath *p, char *out, size_t outlen)
{
    const struct jpath *steps[HS_JSON_MAX_DEPTH + 1]; /* steps[0] is the leaf */
    char step[72];
    size_t n = 0, total = 0, len = 0;
    for (; p && n < HS_ARRAY_SIZE(steps); p = p->up)
        steps[n++] = p;
    for (size_t i = 0; i < n; i++)
        total += step_render(steps[i], i == n - 1, step, sizeof(step));
    if (total < outlen) {
        for (size_t i = n; i-- > 0;)
            len += step_render(steps[i], i == n - 1, out + len, outlen - len);
        return;
    }
    size_t head = outlen / 3, tail = outlen - head - 4, leaf_steps = 0;
    for (size_t sum = 0; leaf_steps < n; leaf_steps++) {
        size_t w = step_render(steps[leaf_steps], false, step, sizeof(step));
        if (sum + w > tail)
            break;
        sum += w;
    }
    for (size_t i = n; i-- > leaf_steps;) {
        size_t w = step_render(steps[i], i == n - 1, step, sizeof(step));
        if (len + w > head)
            break;
        memcpy(out + len, step, w);
        len += w;
    }
    memcpy(out + len, "...", 3);
    len += 3;
    for (size_t j = leaf_steps; j-- > 0;)
        len += step_render(steps[j], j == leaf_steps - 1, out + len, outlen - len);
}

/* "line 3 col 14: resourceSpans[0].name: <message>", positioned at token t. */
__attribute__((format(printf, 5, 6))) static int fail(struct jdec *d, int code,
                                                      const struct hs_json_token *t,
                                                      const struct jpath *p, const char *fmt, ...)
{
    char where[48] = "", path[160] = "", msg[160];
    if (t)
        hs_json_where(&d->r, t->at, where, sizeof(where));
    if (p) {
        path_render(p, path, sizeof(path) - 2);
        strcat(path, ": ");
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(d->err, d->errlen, "%s%s%s", where, path, msg);
    return code;
}

/* The reader's own error (syntax, or nesting past max_depth), as it worded it. */
static int reader_fail(struct jdec *d, int rc)
{
    bool key = rc == HS_E2BIG && d->o->depth_key;
    snprintf(d->err, d->errlen, "%s%s%s%s", d->r.err, key ? " (limit " : "",
             key ? d->o->depth_key : "", key ? ")" : "");
    return rc;
}

static int next(struct jdec *d, struct hs_json_token *t)
{
    int rc = hs_json_next(&d->r, t);
    return rc ? reader_fail(d, rc) : 0;
}

/* The offending value, short, for messages: "abc" (as written, cut at 40 bytes on a character
 * boundary), 12, true, an object. */
static const char *show(struct jdec *d, const struct hs_json_token *t)
{
    switch (t->type) {
    case HS_JSON_STRING: {
        size_t n = HS_MIN(t->len, 40);
        while (n < t->len && n > 0 && (t->ptr[n] & 0xC0) == 0x80)
            n--; /* no half character: the message must stay UTF-8 */
        snprintf(d->shown, sizeof(d->shown), "\"%.*s%s\"", (int)n, t->ptr, n < t->len ? "..." : "");
        return d->shown;
    }
    case HS_JSON_NUMBER:
        snprintf(d->shown, sizeof(d->shown), "%.*s%s", (int)HS_MIN(t->len, 40), t->ptr,
                 t->len > 40 ? "..." : "");
        return d->shown;
    case HS_JSON_TRUE:
        return "true";
    case HS_JSON_FALSE:
        return "false";
    case HS_JSON_OBJECT:
        return "an object";
    case HS_JSON_ARRAY:
        return "an array";
    default:
        return "null";
    }
}

/* A short string's decoded text, NUL-terminated, in buf; false when it is longer than buf can
 * hold or holds U+0000 (then it matches no name and no number). */
static bool small_string(const struct hs_json_token *t, char *buf, size_t size)
{
    if (t->type != HS_JSON_STRING || t->len >= size)
        return false;
    size_t n = hs_json_unescape(t, buf);
    buf[n] = '\0';
    return strlen(buf) == n;
}

/* ---- scalars ------------------------------------------------------------------------------ */

/* A 64-bit integer written as a JSON integer, an integral number, or a decimal string. */
static int get_integer(struct jdec *d, const struct hs_json_token *t, const struct jpath *p,
                       bool *neg, uint64_t *mag)
{
    if (t->type == HS_JSON_NUMBER && t->integer) {
        if (!hs_json_integer(t, neg, mag))
            return fail(d, HS_EINVAL, t, p, "%s is not a 64-bit integer", show(d, t));
        return 0;
    }
    if (t->type == HS_JSON_NUMBER) {
        double r = hs_json_double(t);
        if (r != floor(r) || fabs(r) >= 18446744073709551616.0)
            return fail(d, HS_EINVAL, t, p, "%s is not an integer", show(d, t));
        *neg = r < 0;
        *mag = (uint64_t)fabs(r);
        return 0;
    }
    if (t->type == HS_JSON_STRING) {
        char s[32];
        size_t n, sign;
        if (small_string(t, s, sizeof(s)) && (n = strlen(s)) > (sign = s[0] == '-') &&
            strspn(s + sign, "0123456789") == n - sign) {
            const struct hs_json_token digits = {.ptr = s, .len = n};
            if (hs_json_integer(&digits, neg, mag))
                return 0;
        }
        return fail(d, HS_EINVAL, t, p, "%s is not a 64-bit integer", show(d, t));
    }
    return fail(d, HS_EINVAL, t, p, "%s is not an integer", show(d, t));
}

static int get_enum(struct jdec *d, const ProtobufCFieldDescriptor *f,
                    const struct hs_json_token *t, const struct jpath *p, int32_t *out)
{
    if (t->type == HS_JSON_STRING) {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        char name[64];
        const ProtobufCEnumValue *ev = small_string(t, name, sizeof(name))
                                           ? protobuf_c_enum_descriptor_get_value_by_name(e, name)
                                           : NULL;
        if (!ev)
            return fail(d, HS_EINVAL, t, p, "%s is not a %s", show(d, t), e->short_name);
        *out = ev->value;
        return 0;
    }
    bool neg;
    uint64_t mag;
    int rc = get_integer(d, t, p, &neg, &mag);
    if (rc)
        return rc;
    if (neg ? mag > (uint64_t)INT32_MAX + 1 : mag > INT32_MAX)
        return fail(d, HS_EINVAL, t, p, "%s%llu is out of range", neg ? "-" : "",
                    (unsigned long long)mag);
    *out = neg ? (int32_t)(0 - mag) : (int32_t)mag;
    return 0;
}

/* The value's two's complement bits, range-checked for f's type. */
static int get_int(struct jdec *d, const ProtobufCFieldDescriptor *f, const struct hs_json_token *t,
                   const struct jpath *p, uint64_t *bits)
{
    bool neg;
    uint64_t mag;
    int rc = get_integer(d, t, p, &neg, &mag);
    if (rc)
        return rc;
    bool is64 = hs_json_elem_size(f->type) == 8;
    bool is_unsigned = f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_FIXED32 ||
                       f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_FIXED64;
    uint64_t max = is_unsigned ? (is64 ? UINT64_MAX : UINT32_MAX) : (is64 ? INT64_MAX : INT32_MAX);
    if ((neg && mag && is_unsigned) || (neg && mag > max + 1) || (!neg && mag > max))
        return fail(d, HS_EINVAL, t, p, "%s%llu is out of range for %s", neg ? "-" : "",
                    (unsigned long long)mag,
                    is_unsigned ? (is64 ? "uint64" : "uint32") : (is64 ? "int64" : "int32"));
    *bits = neg ? 0 - mag : mag;
    return 0;
}

static int get_double(struct jdec *d, const struct hs_json_token *t, const struct jpath *p,
                      double *out)
{
    char s[64];
    char *end;
    if (t->type == HS_JSON_NUMBER)
        *out = hs_json_double(t);
    else if (!small_string(t, s, sizeof(s)))
        goto bad;
    else if (strcmp(s, "NaN") == 0)
        *out = NAN;
    else if (strcmp(s, "Infinity") == 0)
        *out = INFINITY;
    else if (strcmp(s, "-Infinity") == 0)
        *out = -INFINITY;
    else if (!*s || (*out = strtod(s, &end), *end != '\0') || !isfinite(*out))
        goto bad; /* proto3 JSON allows finite numbers in strings too */
    if (t->type == HS_JSON_NUMBER && !isfinite(*out))
        return fail(d, HS_EINVAL, t, p, "%s is out of range for a double", show(d, t));
    return 0;
bad:
    return fail(d, HS_EINVAL, t, p, "%s is not a number", show(d, t));
}

/* ---- writing the wire ---------------------------------------------------------------------- */

/* Makes room for n more bytes, growing the buffer by doubling as hs_buf does, but never past
 * out_max: the output's bound is then the buffer's too. */
static bool room(struct jdec *d, size_t n)
{
    struct hs_buf *b = d->out;
    if (d->nomem || d->over)
        return false;
    if (n > d->out_max - b->len) {
        d->over = true;
        return false;
    }
    if (b->cap - b->len >= n)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n)
        cap *= 2;
    uint8_t *p = realloc(b->data, HS_MIN(cap, d->out_max));
    if (!p) {
        d->nomem = true;
        return false;
    }
    b->data = p;
    b->cap = HS_MIN(cap, d->out_max);
    return true;
}

static void put(struct jdec *d, const void *p, size_t n)
{
    if (room(d, n)) {
        memcpy(d->out->data + d->out->len, p, n);
        d->out->len += n;
    }
}

static void put_varint(struct jdec *d, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        b[n++] = (uint8_t)(v | 0x80);
    b[n++] = (uint8_t)v;
    put(d, b, n);
}

static unsigned wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return 5;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 1;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return 2;
    default:
        return 0;
    }
}

static void put_tag(struct jdec *d, const ProtobufCFieldDescriptor *f, unsigned wt)
{
    put_varint(d, (uint64_t)f->id << 3 | wt);
}

/* A scalar's bits (two's complement, or the IEEE 754 pattern) in its wire form. */
static void put_scalar(struct jdec *d, ProtobufCType t, uint64_t bits)
{
    uint8_t le[8];
    switch (t) {
    case PROTOBUF_C_TYPE_SINT32: {
        uint32_t v = (uint32_t)bits;
        put_varint(d, (uint32_t)(v << 1) ^ (v >> 31 ? UINT32_MAX : 0));
        return;
    }
    case PROTOBUF_C_TYPE_SINT64:
        put_varint(d, bits << 1 ^ (bits >> 63 ? UINT64_MAX : 0));
        return;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_ENUM: /* negative values are sign-extended to ten bytes */
        put_varint(d, (uint64_t)(int64_t)(int32_t)(uint32_t)bits);
        return;
    default:
        break;
    }
    unsigned wt = wire_type(t);
    if (wt == 0) {
        put_varint(d, bits);
        return;
    }
    size_t n = wt == 5 ? 4 : 8;
    for (size_t i = 0; i < n; i++)
        le[i] = (uint8_t)(bits >> (8 * i));
    put(d, le, n);
}

/* A length-delimited value is written after one byte set aside for its length (the common
 * case, under 128 bytes); close_len writes the length and, when it needs more bytes, moves the
 * value up. Each level moves its bytes once, cheaper than a second walk to size them. */
static size_t open_len(struct jdec *d)
{
    put(d, "", 1);
    return d->out->len;
}

static void close_len(struct jdec *d, size_t start)
{
    if (d->nomem || d->over)
        return;
    size_t n = d->out->len - start, extra = hs_varint_size(n) - 1;
    if (extra) {
        if (!room(d, extra))
            return;
        memmove(d->out->data + start + extra, d->out->data + start, n);
        d->out->len += extra;
    }
    uint8_t *p = d->out->data + start - 1;
    for (; n >= 0x80; n >>= 7)
        *p++ = (uint8_t)(n | 0x80);
    *p = (uint8_t)n;
}

/* ---- JSON values to wire ------------------------------------------------------------------ */

static int scalar_bits(struct jdec *d, const ProtobufCFieldDescriptor *f,
                       const struct hs_json_token *t, const struct jpath *p, uint64_t *bits)
{
    int rc;
    switch (f->type) {
    case PROTOBUF_C_TYPE_ENUM: {
        int32_t e = 0;
        rc = get_enum(d, f, t, p, &e);
        *bits = (uint32_t)e;
        return rc;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (t->type != HS_JSON_TRUE && t->type != HS_JSON_FALSE)
            return fail(d, HS_EINVAL, t, p, "%s is not true or false", show(d, t));
        *bits = t->type == HS_JSON_TRUE;
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FLOAT: {
        double x = 0;
        rc = get_double(d, t, p, &x);
        if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
            memcpy(bits, &x, 8);
        } else {
            float fx = (float)x;
            uint32_t u;
            memcpy(&u, &fx, 4);
            *bits = u;
        }
        return rc;
    }
    default:
        return get_int(d, f, t, p, bits);
    }
}

/* The string's decoded bytes as a length-delimited value (the text may hold U+0000). */
static void put_string(struct jdec *d, const struct hs_json_token *t)
{
    if (!t->escaped) {
        put_varint(d, t->len);
        put(d, t->ptr, t->len);
        return;
    }
    size_t start = open_len(d);
    if (room(d, t->len))
        d->out->len += hs_json_unescape(t, (char *)d->out->data + d->out->len);
    close_len(d, start);
}

static bool hex_decode(const char *s, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hs_hexval(s[2 * i]), lo = hs_hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* Ids are hex in OTLP (its one deviation from proto3 JSON), other bytes base64, decoded in
 * place after their escapes (a writer may send "\/"). An empty string is an absent id: a root
 * span's parentSpanId is often "". */
static int encode_bytes(struct jdec *d, const ProtobufCFieldDescriptor *f,
                        const struct hs_json_token *t, const struct jpath *p, bool always)
{
    if (t->type != HS_JSON_STRING)
        return fail(d, HS_EINVAL, t, p, "%s is not a string", show(d, t));
    size_t id = d->o->hex_ids ? hs_json_hex_id_size(f) : 0;
    if (t->len == 0 && !always)
        return 0;
    put_tag(d, f, 2);
    if (id && t->len) {
        char hex[33];
        uint8_t raw[16];
        if (!small_string(t, hex, sizeof(hex)) || strlen(hex) != id * 2 ||
            !hex_decode(hex, id, raw))
            return fail(d, HS_EINVAL, t, p, "%s is not %zu hex digits", show(d, t), id * 2);
        put_varint(d, id);
        put(d, raw, id);
        return 0;
    }
    size_t start = open_len(d);
    if (!room(d, t->len))
        return 0;
    char *at = (char *)d->out->data + d->out->len;
    size_t n = t->escaped ? hs_json_unescape(t, at) : t->len;
    long len = hs_base64_decode(t->escaped ? at : t->ptr, n, (uint8_t *)at);
    if (len < 0)
        return fail(d, HS_EINVAL, t, p, "%s is not base64", show(d, t));
    d->out->len += (size_t)len;
    close_len(d, start);
    return 0;
}

static int encode_message(struct jdec *d, const ProtobufCMessageDescriptor *desc,
                          const struct hs_json_token *t, const struct jpath *p);

/* One value of f with its tag. Proto3 leaves out defaults; `always` writes them anyway, for
 * oneof members ({"intValue": "0"} must stay an int) and elements of repeated fields. */
static int encode_value(struct jdec *d, const ProtobufCFieldDescriptor *f,
                        const struct hs_json_token *t, const struct jpath *p, bool always)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
        if (t->type != HS_JSON_STRING)
            return fail(d, HS_EINVAL, t, p, "%s is not a string", show(d, t));
        if (t->len || always) {
            put_tag(d, f, 2);
            put_string(d, t);
        }
        return 0;
    case PROTOBUF_C_TYPE_BYTES:
        return encode_bytes(d, f, t, p, always);
    case PROTOBUF_C_TYPE_MESSAGE: { /* a message given at all is written, even empty */
        put_tag(d, f, 2);
        size_t start = open_len(d);
        int rc = encode_message(d, f->descriptor, t, p);
        close_len(d, start);
        return rc;
    }
    default: {
        uint64_t bits = 0;
        int rc = scalar_bits(d, f, t, p, &bits);
        if (rc == 0 && (bits || always)) {
            put_tag(d, f, wire_type(f->type));
            put_scalar(d, f->type, bits);
        }
        return rc;
    }
    }
}

/* The limit on f's elements in a message of type desc, or NULL. */
static const struct hs_pb_json_limit *limit_of(struct jdec *d,
                                               const ProtobufCMessageDescriptor *desc,
                                               const ProtobufCFieldDescriptor *f, size_t *slot)
{
    for (size_t i = 0; i < d->o->n_limits; i++) {
        const struct hs_pb_json_limit *l = &d->o->limits[i];
        if (l->msg == desc && l->max && strcmp(l->field, f->name) == 0) {
            *slot = i;
            return l;
        }
    }
    return NULL;
}

/* Counts one more element against l (n: the elements of this array before it). */
static int count(struct jdec *d, const struct hs_pb_json_limit *l, size_t slot, size_t n,
                 const struct hs_json_token *t, const struct jpath *p)
{
    if (!l)
        return 0;
    if (l->per_request && d->counts[slot]++ >= l->max)
        return fail(d, HS_E2BIG, t, p, "more than %u in one request (limit %s)", l->max, l->key);
    if (!l->per_request && n >= l->max)
        return fail(d, HS_E2BIG, t, p, "more than %u (limit %s)", l->max, l->key);
    return 0;
}

static int encode_repeated(struct jdec *d, const ProtobufCMessageDescriptor *desc,
                           const ProtobufCFieldDescriptor *f, const struct hs_json_token *t,
                           const struct jpath *p)
{
    if (t->type != HS_JSON_ARRAY)
        return fail(d, HS_EINVAL, t, p, "%s is not an array", show(d, t));
    size_t slot = 0;
    const struct hs_pb_json_limit *l = limit_of(d, desc, f, &slot);
    bool packed = (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) && wire_type(f->type) != 2;
    size_t mark = d->out->len, start = 0, n = 0;
    if (packed) {
        put_tag(d, f, 2);
        start = open_len(d);
    }
    for (size_t i = 0;; i++) {
        struct hs_json_token e;
        int rc = next(d, &e);
        if (rc)
            return rc;
        if (e.type == HS_JSON_ARRAY_END)
            break;
        if (e.type == HS_JSON_NULL) /* null is absent, here as everywhere */
            continue;
        struct jpath ep = {p, NULL, i};
        uint64_t bits = 0;
        if ((rc = count(d, l, slot, n++, &e, &ep)) ||
            (rc = packed ? scalar_bits(d, f, &e, &ep, &bits) : encode_value(d, f, &e, &ep, true)))
            return rc;
        if (packed)
            put_scalar(d, f->type, bits);
    }
    if (packed && !d->nomem && !d->over && d->out->len == start)
        d->out->len = mark; /* no elements: no record, as protobuf-c packs it */
    else if (packed)
        close_len(d, start);
    return 0;
}

/* Whether a JSON key names field f: 1 by its proto name, 2 by its lowerCamelCase, else 0. */
static int key_match(const char *key, const char *snake)
{
    if (strcmp(key, snake) == 0)
        return 1;
    for (const char *k = key, *s = snake;; k++, s++) {
        char want = *s;
        if (*s == '_' && s[1]) {
            s++;
            want = *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        }
        if (*k != want)
            return 0;
        if (!*k)
            return 2;
    }
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *desc,
                                                  const char *key, int *how)
{
    for (unsigned i = 0; i < desc->n_fields; i++)
        if ((*how = key_match(key, desc->fields[i].name)) != 0)
            return &desc->fields[i];
    return NULL;
}

enum { MAX_FIELDS = 32 }; /* OTLP's widest message, Span, has 17 */

/* Which fields a message's object has given so far, and in which spelling. */
struct seen {
    uint32_t given, snake;
};

/* Refuses a field given twice (in either spelling: readers disagree on which would win) or a
 * second member of a oneof; else records it. */
static int check_once(struct jdec *d, const ProtobufCMessageDescriptor *desc,
                      const ProtobufCFieldDescriptor *f, int how, struct seen *s,
                      const struct hs_json_token *k, const struct jpath *fp)
{
    unsigned i = (unsigned)(f - desc->fields);
    char other[64];
    if (s->given >> i & 1) {
        bool was_snake = s->snake >> i & 1;
        if (was_snake == (how == 1))
            return fail(d, HS_EINVAL, k, fp, "given twice");
        if (was_snake)
            return fail(d, HS_EINVAL, k, fp, "given twice (also as %s)", f->name);
        hs_json_camel_name(f->name, other, sizeof(other));
        return fail(d, HS_EINVAL, k, fp, "given twice (also as %s)", other);
    }
    for (unsigned j = 0; (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && j < desc->n_fields; j++) {
        const ProtobufCFieldDescriptor *g = &desc->fields[j];
        if ((s->given >> j & 1) && (g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            g->quantifier_offset == f->quantifier_offset) {
            hs_json_camel_name(g->name, other, sizeof(other));
            return fail(d, HS_EINVAL, k, fp, "only one of its group may be set (also %s)", other);
        }
    }
    s->given |= 1u << i;
    if (how == 1)
        s->snake |= 1u << i;
    return 0;
}

/* One member: its key was read into k; the value follows. Unknown keys are skipped. *id is the
 * field's number, 0 for a skipped member. */
static int encode_member(struct jdec *d, const ProtobufCMessageDescriptor *desc,
                         const struct hs_json_token *k, struct seen *s, const struct jpath *p,
                         uint32_t *id)
{
    char key[64];
    struct hs_json_token v;
    int how = 0, rc = next(d, &v);
    if (rc)
        return rc;
    /* no field name is 64 bytes long, and none holds U+0000 */
    const ProtobufCFieldDescriptor *f = NULL;
    if (k->len < sizeof(key)) {
        size_t n = hs_json_unescape(k, key);
        key[n] = '\0';
        if (strlen(key) == n)
            f = find_field(desc, key, &how);
    }
    *id = 0;
    if (!f || v.type == HS_JSON_NULL) /* null is absent */
        return hs_json_skip(&d->r, &v) ? reader_fail(d, d->r.rc) : 0;
    *id = (uint32_t)f->id;
    struct jpath fp = {p, key, 0};
    if ((rc = check_once(d, desc, f, how, s, &v, &fp)))
        return rc;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return encode_repeated(d, desc, f, &v, &fp);
    return encode_value(d, f, &v, &fp,
                        (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
                            f->label == PROTOBUF_C_LABEL_OPTIONAL);
}

/* Where each member's bytes start, and its field's number, in the order the JSON gave them. */
struct members {
    size_t start[MAX_FIELDS + 1]; /* start[n]: the message's end */
    uint32_t id[MAX_FIELDS];
    unsigned n;
};

static void reverse(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        uint8_t c = p[i];
        p[i] = p[n - 1 - i];
        p[n - 1 - i] = c;
    }
}

/* Puts the members' bytes in field number order, as protobuf-c packs them, so a message's wire
 * form does not depend on its keys' order and a canonical one survives wire -> JSON -> wire.
 * Adjacent members swap in place by three reversals (no memory); JSON from SDKs and from our own
 * writer is in field order already, which costs one compare per member. */
static void sort_members(struct jdec *d, struct members *m)
{
    if (d->nomem || d->over)
        return;
    m->start[m->n] = d->out->len;
    for (unsigned i = 1; i < m->n; i++) {
        for (unsigned j = i; j > 0 && m->id[j - 1] > m->id[j]; j--) {
            uint8_t *a = d->out->data + m->start[j - 1];
            size_t la = m->start[j] - m->start[j - 1], lb = m->start[j + 1] - m->start[j];
            reverse(a, la);
            reverse(a + la, lb);
            reverse(a, la + lb);
            m->start[j] = m->start[j - 1] + lb;
            uint32_t id = m->id[j];
            m->id[j] = m->id[j - 1];
            m->id[j - 1] = id;
        }
    }
}

static int encode_message(struct jdec *d, const ProtobufCMessageDescriptor *desc,
                          const struct hs_json_token *t, const struct jpath *p)
{
    if (t->type != HS_JSON_OBJECT)
        return fail(d, HS_EINVAL, t, p, "%s is not an object", show(d, t));
    if (desc->n_fields > MAX_FIELDS)
        return fail(d, HS_EINVAL, t, p, "%s has more fields than this decoder handles", desc->name);
    bool nested = desc == d->o->nested;
    if (nested && ++d->nested > d->o->max_nested)
        return fail(d, HS_E2BIG, t, p, "nested deeper than %u (limit %s)", d->o->max_nested,
                    d->o->nested_key);
    struct seen s = {0};
    struct members m;
    m.n = 0;
    int rc;
    for (;;) {
        struct hs_json_token k;
        if ((rc = next(d, &k)) || k.type == HS_JSON_OBJECT_END)
            break;
        size_t at = d->out->len;
        uint32_t id;
        if ((rc = encode_member(d, desc, &k, &s, p, &id)))
            break;
        if (d->out->len > at && m.n < MAX_FIELDS) { /* each field once: never past */
            m.start[m.n] = at;
            m.id[m.n++] = id;
        }
    }
    if (rc == 0)
        sort_members(d, &m);
    d->nested -= nested;
    return rc;
}

int hs_pb_json_to_wire(const char *json, size_t len, const struct hs_pb_json_opts *o,
                       struct hs_buf *out, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    struct jdec d = {.o = o, .out = out, .err = err, .errlen = errlen};
    hs_json_reader_init(&d.r, json, len, o->max_depth, o->allow_nul);
    size_t start = out->len;
    d.out_max = start + 2 * len + 64;
    room(&d, len / 2); /* the wire is about 40% of the JSON: a hint, which may fail */
    d.nomem = false;
    struct hs_json_token t;
    int rc = next(&d, &t);
    if (rc == 0)
        rc = encode_message(&d, o->desc, &t, NULL);
    if (rc == 0)
        rc = next(&d, &t); /* only whitespace may follow */
    if (rc == 0 && d.nomem)
        rc = fail(&d, HS_ENOMEM, NULL, NULL, "out of memory");
    if (rc == 0 && d.over)
        rc = fail(&d, HS_E2BIG, NULL, NULL, "the request's wire form would pass %zu bytes",
                  2 * len + 64);
    if (rc)
        out->len = start;
    return rc;
}
