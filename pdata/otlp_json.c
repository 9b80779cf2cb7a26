/* otlp_json.c: OTLP/JSON to wire bytes (wire.md §2.1), driven by protobuf-c's generated
 * descriptors so every message follows one set of rules; lenient in what it accepts (snake_case
 * keys, enum names, 64-bit numbers or strings). Wire to JSON is otlp_json_write.c. */
#include "pdata/otlp_json.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "pdata/otlp_json_int.h"

/* jansson parses (it reports line and column for syntax errors, validates UTF-8 and limits
 * nesting to 2048); the tree is then encoded straight to wire bytes, field by field in field
 * number order as protobuf-c packs them, so a canonical request survives wire -> JSON -> wire
 * byte for byte. A first version built protobuf-c messages in an arena and packed them, but
 * protobuf-c's strings are C strings and JSON's may hold U+0000 (the Collector keeps it), and
 * writing directly skips a tree of allocations. JSON parsing dominates this path either way:
 * on a 100-span request (55 KB) json_loadb takes about 1.1 ms and the encoding 0.07 ms.
 *
 * Duplicate keys are rejected (JSON_REJECT_DUPLICATES): parsers disagree on which one wins, so a
 * document with two "traceId"s would mean different spans to different readers of it. */

/* A key path, built on the stack as the walk descends and only rendered for an error. */
struct jpath {
    const struct jpath *up;
    const char *key; /* NULL: an array element */
    size_t index;
};

struct jdec {
    struct hs_buf *out;
    bool nomem;     /* sticky: an append failed; checked once at the end */
    unsigned depth; /* of messages, bounded so the stack is (jansson's 2048 is for JSON) */
    char shown[64]; /* show()'s room, here rather than on every level of the stack */
    const char *text;
    size_t len;
    char *err;
    size_t errlen;
};

static size_t path_render(const struct jpath *p, char *out, size_t outlen)
{
    if (!p)
        return 0;
    size_t n = path_render(p->up, out, outlen);
    int w;
    if (p->key)
        w = snprintf(out + n, outlen - n, "%s%s", n ? "." : "", p->key);
    else
        w = snprintf(out + n, outlen - n, "[%zu]", p->index);
    return w < 0 || (size_t)w >= outlen - n ? outlen - 1 : n + (size_t)w;
}

/* The text is known to be valid JSON (jansson accepted it), so these skips can be simple. */
static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end && *p != '"'; p++)
        if (*p == '\\')
            p++;
    return p < end ? p + 1 : end;
}

static const char *skip_value(const char *p, const char *end)
{
    if (p < end && *p == '"')
        return skip_string(p, end);
    int depth = 0;
    while (p < end) {
        if (*p == '"') {
            p = skip_string(p, end);
            continue;
        }
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
        } else if (depth == 0 &&
                   (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) {
            return p;
        }
        p++;
    }
    return p;
}

/* Finds the value at `p` (a path) in the text; NULL when a key is written with escapes, which
 * this simple walk does not decode (then the message goes without a position). */
static const char *locate(const struct jpath *p, const char *text, const char *end)
{
    const char *v = p->up ? locate(p->up, text, end) : skip_ws(text, end);
    if (!v || v >= end)
        return NULL;
    if (p->key && *v == '{') {
        size_t klen = strlen(p->key);
        for (const char *q = skip_ws(v + 1, end); q < end && *q == '"';) {
            const char *kend = skip_string(q, end);
            const char *val = skip_ws(skip_ws(kend, end) + 1, end);
            if ((size_t)(kend - q - 2) == klen && memcmp(q + 1, p->key, klen) == 0)
                return val;
            q = skip_ws(skip_value(val, end), end);
            if (q < end && *q == ',')
                q = skip_ws(q + 1, end);
        }
        return NULL;
    }
    if (!p->key && *v == '[') {
        const char *q = skip_ws(v + 1, end);
        for (size_t i = 0; q < end && *q != ']'; i++) {
            if (i == p->index)
                return q;
            q = skip_ws(skip_value(q, end), end);
            if (q < end && *q == ',')
                q = skip_ws(q + 1, end);
        }
    }
    return NULL;
}

__attribute__((format(printf, 3, 4))) static int fail(struct jdec *d, const struct jpath *p,
                                                      const char *fmt, ...)
{
    const char *at = p ? locate(p, d->text, d->text + d->len) : skip_ws(d->text, d->text + d->len);
    char where[64] = "", path[160] = "", msg[160];
    if (at) {
        unsigned line = 1, col = 1; /* columns count characters, as jansson's do */
        for (const char *c = d->text; c < at; c++) {
            if (*c == '\n') {
                line++;
                col = 1;
            } else if ((*c & 0xC0) != 0x80) {
                col++;
            }
        }
        snprintf(where, sizeof(where), "line %u col %u: ", line, col);
    }
    if (p && path_render(p, path, sizeof(path) - 2))
        strcat(path, ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(d->err, d->errlen, "%s%s%s", where, path, msg);
    return HS_EINVAL;
}

/* The offending value, short, for messages: "abc" (quoted, cut at 40 bytes), 12, true, array. */
static const char *show(struct jdec *d, const json_t *v)
{
    char *buf = d->shown;
    size_t len = sizeof(d->shown);
    switch (json_typeof(v)) {
    case JSON_STRING: {
        size_t n = json_string_length(v);
        snprintf(buf, len, "\"%.*s%s\"", (int)HS_MIN(n, 40), json_string_value(v),
                 n > 40 ? "..." : "");
        return buf;
    }
    case JSON_INTEGER:
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    case JSON_REAL:
        snprintf(buf, len, "%.17g", json_real_value(v));
        return buf;
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    default:
        return "null";
    }
}

/* The string's text if it holds no U+0000 (so C string functions see all of it), else NULL. */
static const char *plain_string(const json_t *v)
{
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

/* A 64-bit integer written as a JSON integer, an integral JSON real, or a decimal string. */
static int get_integer(struct jdec *d, const json_t *v, const struct jpath *p, bool *neg,
                       uint64_t *mag)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        *neg = i < 0;
        *mag = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        return 0;
    }
    if (json_is_real(v)) {
        double r = json_real_value(v);
        if (r != floor(r) || fabs(r) >= 18446744073709551616.0)
            return fail(d, p, "%s is not an integer", show(d, v));
        *neg = r < 0;
        *mag = (uint64_t)fabs(r);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = plain_string(v);
        if (!s)
            return fail(d, p, "%s is not a 64-bit integer", show(d, v));
        *neg = *s == '-';
        s += *neg;
        *mag = 0;
        if (!*s)
            return fail(d, p, "%s is not an integer", show(d, v));
        for (; *s; s++) {
            if (*s < '0' || *s > '9' || *mag > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
                return fail(d, p, "%s is not a 64-bit integer", show(d, v));
            *mag = *mag * 10 + (uint64_t)(*s - '0');
        }
        return 0;
    }
    return fail(d, p, "%s is not an integer", show(d, v));
}

static int get_enum(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                    const struct jpath *p, int32_t *out)
{
    if (json_is_string(v)) {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        const char *name = plain_string(v);
        const ProtobufCEnumValue *ev =
            name ? protobuf_c_enum_descriptor_get_value_by_name(e, name) : NULL;
        if (!ev)
            return fail(d, p, "%s is not a %s", show(d, v), e->short_name);
        *out = ev->value;
        return 0;
    }
    bool neg;
    uint64_t mag;
    int rc = get_integer(d, v, p, &neg, &mag);
    if (rc)
        return rc;
    if (neg ? mag > (uint64_t)INT32_MAX + 1 : mag > INT32_MAX)
        return fail(d, p, "%s%llu is out of range", neg ? "-" : "", (unsigned long long)mag);
    *out = neg ? (int32_t)(0 - mag) : (int32_t)mag;
    return 0;
}

/* The value's two's complement bits, range-checked for f's type. */
static int get_int(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                   const struct jpath *p, uint64_t *bits)
{
    bool neg;
    uint64_t mag;
    int rc = get_integer(d, v, p, &neg, &mag);
    if (rc)
        return rc;
    bool is64 = hs_json_elem_size(f->type) == 8;
    bool is_unsigned = f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_FIXED32 ||
                       f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_FIXED64;
    uint64_t max = is_unsigned ? (is64 ? UINT64_MAX : UINT32_MAX) : (is64 ? INT64_MAX : INT32_MAX);
    if ((neg && mag && is_unsigned) || (neg && mag > max + 1) || (!neg && mag > max))
        return fail(d, p, "%s%llu is out of range for %s", neg ? "-" : "", (unsigned long long)mag,
                    is_unsigned ? (is64 ? "uint64" : "uint32") : (is64 ? "int64" : "int32"));
    *bits = neg ? 0 - mag : mag;
    return 0;
}

static int get_double(struct jdec *d, const json_t *v, const struct jpath *p, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    const char *s = json_is_string(v) ? plain_string(v) : NULL;
    char *end;
    if (s && strcmp(s, "NaN") == 0)
        *out = NAN;
    else if (s && strcmp(s, "Infinity") == 0)
        *out = INFINITY;
    else if (s && strcmp(s, "-Infinity") == 0)
        *out = -INFINITY;
    else if (!s || !*s || (*out = strtod(s, &end), *end != '\0') || !isfinite(*out))
        goto bad; /* proto3 JSON allows finite numbers in strings too */
    return 0;
bad:
    return fail(d, p, "%s is not a number", show(d, v));
}

/* ---- writing the wire ---------------------------------------------------------------------- */

static void put(struct jdec *d, const void *p, size_t n)
{
    if (!d->nomem && hs_buf_append(d->out, p, n) != 0)
        d->nomem = true;
}

static void put_varint(struct jdec *d, uint64_t v)
{
    if (!d->nomem && hs_buf_put_varint(d->out, v) != 0)
        d->nomem = true;
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
    if (d->nomem)
        return;
    size_t n = d->out->len - start, extra = hs_varint_size(n) - 1;
    if (extra) {
        if (hs_buf_reserve(d->out, extra) != 0) {
            d->nomem = true;
            return;
        }
        memmove(d->out->data + start + extra, d->out->data + start, n);
        d->out->len += extra;
    }
    uint8_t *p = d->out->data + start - 1;
    for (; n >= 0x80; n >>= 7)
        *p++ = (uint8_t)(n | 0x80);
    *p = (uint8_t)n;
}

/* ---- JSON values to wire ------------------------------------------------------------------ */

static int scalar_bits(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                       const struct jpath *p, uint64_t *bits)
{
    int rc;
    switch (f->type) {
    case PROTOBUF_C_TYPE_ENUM: {
        int32_t e = 0;
        rc = get_enum(d, f, v, p, &e);
        *bits = (uint32_t)e;
        return rc;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return fail(d, p, "%s is not true or false", show(d, v));
        *bits = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FLOAT: {
        double x = 0;
        rc = get_double(d, v, p, &x);
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
        return get_int(d, f, v, p, bits);
    }
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

/* Ids are hex (OTLP's one deviation from proto3 JSON), other bytes base64. An empty string is an
 * absent id: a root span's parentSpanId is often "". */
static int encode_bytes(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                        const struct jpath *p, bool always)
{
    if (!json_is_string(v))
        return fail(d, p, "%s is not a string", show(d, v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), id = hs_json_hex_id_size(f);
    if (n == 0 && !always)
        return 0;
    put_tag(d, f, 2);
    if (id && n) {
        uint8_t raw[16];
        if (n != id * 2 || !hex_decode(s, id, raw))
            return fail(d, p, "%s is not %zu hex digits", show(d, v), id * 2);
        put_varint(d, id);
        put(d, raw, id);
        return 0;
    }
    size_t start = open_len(d);
    if (!d->nomem && hs_buf_reserve(d->out, n) != 0)
        d->nomem = true;
    if (!d->nomem) {
        long len = hs_base64_decode(s, n, d->out->data + d->out->len);
        if (len < 0)
            return fail(d, p, "%s is not base64", show(d, v));
        d->out->len += (size_t)len;
    }
    close_len(d, start);
    return 0;
}

static int encode_message(struct jdec *d, const ProtobufCMessageDescriptor *desc, const json_t *v,
                          const struct jpath *p);

/* One value of f with its tag. Proto3 leaves out defaults; `always` writes them anyway, for
 * oneof members ({"intValue": "0"} must stay an int) and elements of repeated fields. */
static int encode_value(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                        const struct jpath *p, bool always)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v))
            return fail(d, p, "%s is not a string", show(d, v));
        size_t n = json_string_length(v); /* may hold U+0000, which is valid UTF-8 */
        if (n || always) {
            put_tag(d, f, 2);
            put_varint(d, n);
            put(d, json_string_value(v), n);
        }
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return encode_bytes(d, f, v, p, always);
    case PROTOBUF_C_TYPE_MESSAGE: { /* a message given at all is written, even empty */
        put_tag(d, f, 2);
        size_t start = open_len(d);
        int rc = encode_message(d, f->descriptor, v, p);
        close_len(d, start);
        return rc;
    }
    default: {
        uint64_t bits = 0;
        int rc = scalar_bits(d, f, v, p, &bits);
        if (rc == 0 && (bits || always)) {
            put_tag(d, f, wire_type(f->type));
            put_scalar(d, f->type, bits);
        }
        return rc;
    }
    }
}

static int encode_repeated(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                           const struct jpath *p)
{
    if (!json_is_array(v))
        return fail(d, p, "%s is not an array", show(d, v));
    bool packed = (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) && wire_type(f->type) != 2;
    size_t mark = d->out->len, start = 0;
    if (packed) {
        put_tag(d, f, 2);
        start = open_len(d);
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e)) /* null is absent, here as everywhere */
            continue;
        struct jpath ep = {p, NULL, i};
        uint64_t bits = 0;
        int rc = packed ? scalar_bits(d, f, e, &ep, &bits) : encode_value(d, f, e, &ep, true);
        if (rc)
            return rc;
        if (packed)
            put_scalar(d, f->type, bits);
    }
    if (packed && !d->nomem && d->out->len == start)
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

enum {
    MAX_FIELDS = 32, /* OTLP's widest message, Span, has 17 */
    MAX_DEPTH = 400, /* the otlp receiver's deepest max_value_depth, 128, is 389 messages */
};

/* The object's keys are matched once against the fields (a handful per message, cheaper than
 * hash lookups for every declared field), then written in field number order. */
static int collect_fields(struct jdec *d, const ProtobufCMessageDescriptor *desc, const json_t *v,
                          const struct jpath *p, const json_t **vals, const char **keys)
{
    for (void *it = json_object_iter((json_t *)v); it;
         it = json_object_iter_next((json_t *)v, it)) {
        const char *key = json_object_iter_key(it); /* never holds U+0000: jansson refuses it */
        const json_t *fv = json_object_iter_value(it);
        int how;
        const ProtobufCFieldDescriptor *f = find_field(desc, key, &how);
        if (!f || json_is_null(fv)) /* unknown keys are ignored; null is absent */
            continue;
        size_t i = (size_t)(f - desc->fields);
        struct jpath fp = {p, key, 0};
        char other[64];
        if (vals[i]) {
            hs_json_camel_name(f->name, other, sizeof(other));
            return fail(d, &fp, "given twice (also as %s)", how == 1 ? other : f->name);
        }
        for (unsigned j = 0; (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && j < desc->n_fields; j++) {
            const ProtobufCFieldDescriptor *g = &desc->fields[j];
            if (vals[j] && (g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                g->quantifier_offset == f->quantifier_offset) {
                hs_json_camel_name(g->name, other, sizeof(other));
                return fail(d, &fp, "only one of its group may be set (also %s)", other);
            }
        }
        vals[i] = fv;
        keys[i] = key;
    }
    return 0;
}

static int encode_message(struct jdec *d, const ProtobufCMessageDescriptor *desc, const json_t *v,
                          const struct jpath *p)
{
    if (!json_is_object(v))
        return fail(d, p, "%s is not an object", show(d, v));
    const json_t *vals[MAX_FIELDS] = {0};
    const char *keys[MAX_FIELDS];
    if (desc->n_fields > MAX_FIELDS)
        return fail(d, p, "%s has more fields than this decoder handles", desc->name);
    if (d->depth >= MAX_DEPTH)
        return fail(d, p, "nested more than %d levels deep", MAX_DEPTH);
    d->depth++;
    int rc = collect_fields(d, desc, v, p, vals, keys);
    for (unsigned i = 0; i < desc->n_fields && rc == 0; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (!vals[i])
            continue;
        struct jpath fp = {p, keys[i], 0};
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
            rc = encode_repeated(d, f, vals[i], &fp);
        else
            rc = encode_value(d, f, vals[i], &fp,
                              (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
                                  f->label == PROTOBUF_C_LABEL_OPTIONAL);
    }
    d->depth--;
    return rc;
}

int hs_otlp_json_to_wire(const char *json, size_t len, struct hs_buf *out, char *err, size_t errlen)
{
    return hs_otlp_json_to_wire_desc(&HS_JSON_REQUEST_DESC, json, len, out, err, errlen);
}

int hs_otlp_json_to_wire_desc(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                              struct hs_buf *out, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) {
        snprintf(err, errlen, "line %d col %d: %s", je.line, je.column, je.text);
        return json_error_code(&je) == json_error_out_of_memory ? HS_ENOMEM : HS_EINVAL;
    }
    struct jdec d = {.out = out, .text = json, .len = len, .err = err, .errlen = errlen};
    size_t start = out->len;
    hs_buf_reserve(out, len / 2); /* the wire is about 40% of the JSON; a hint, may fail */
    int rc = encode_message(&d, desc, root, NULL);
    if (rc == 0 && d.nomem)
        rc = HS_ENOMEM;
    if (rc)
        out->len = start;
    if (rc == HS_ENOMEM)
        snprintf(err, errlen, "out of memory");
    json_decref(root);
    return rc;
}
