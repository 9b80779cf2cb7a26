/* otlp_json.c: OTLP/JSON to wire bytes (wire.md §2.1), driven by protobuf-c's generated
 * descriptors, so every message of the schema follows one set of rules; accepts leniently
 * (snake_case keys, enum names, 64-bit numbers or strings). The other direction: otlp_json_write.c. */
#include "pdata/otlp_json.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "pdata/otlp_json_int.h"

/* jansson parses (it reports line and column for syntax errors, validates UTF-8 and limits
 * nesting to 2048); the tree is then mapped onto protobuf-c messages allocated in an arena and
 * packed. Encoding the wire directly would save the pack pass, but nested lengths would need a
 * second sizing walk of our own; JSON parsing dominates this path anyway, and packing through
 * protobuf-c keeps one encoder (oneof presence, packed scalars) for the whole project.
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
    struct hs_arena *arena;
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
        } else if (depth == 0 && (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' ||
                                  *p == '\r')) {
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
static const char *show(const json_t *v, char *buf, size_t len)
{
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

/* A 64-bit integer written as a JSON integer, an integral JSON real, or a decimal string. */
static int get_integer(struct jdec *d, const json_t *v, const struct jpath *p, bool *neg,
                       uint64_t *mag)
{
    char vb[64];
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        *neg = i < 0;
        *mag = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        return 0;
    }
    if (json_is_real(v)) {
        double r = json_real_value(v);
        if (r != floor(r) || fabs(r) >= 18446744073709551616.0)
            return fail(d, p, "%s is not an integer", show(v, vb, sizeof(vb)));
        *neg = r < 0;
        *mag = (uint64_t)fabs(r);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        *neg = *s == '-';
        s += *neg;
        *mag = 0;
        if (!*s)
            return fail(d, p, "%s is not an integer", show(v, vb, sizeof(vb)));
        for (; *s; s++) {
            if (*s < '0' || *s > '9' || *mag > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
                return fail(d, p, "%s is not a 64-bit integer", show(v, vb, sizeof(vb)));
            *mag = *mag * 10 + (uint64_t)(*s - '0');
        }
        return 0;
    }
    return fail(d, p, "%s is not an integer", show(v, vb, sizeof(vb)));
}

static int get_enum(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                    const struct jpath *p, int32_t *out)
{
    if (json_is_string(v)) {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value_by_name(e, json_string_value(v));
        char vb[64];
        if (!ev)
            return fail(d, p, "%s is not a %s", show(v, vb, sizeof(vb)), e->short_name);
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

static int get_int(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                   const struct jpath *p, void *dst)
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
        return fail(d, p, "%s%llu is out of range for %s", neg ? "-" : "",
                    (unsigned long long)mag, is_unsigned ? (is64 ? "uint64" : "uint32")
                                                         : (is64 ? "int64" : "int32"));
    uint64_t bits = neg ? 0 - mag : mag; /* two's complement, as the wire writes it */
    if (is64)
        memcpy(dst, &bits, 8);
    else
        *(uint32_t *)dst = (uint32_t)bits;
    return 0;
}

static int get_double(struct jdec *d, const json_t *v, const struct jpath *p, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        if (strcmp(s, "NaN") == 0)
            *out = NAN;
        else if (strcmp(s, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(s, "-Infinity") == 0)
            *out = -INFINITY;
        else if (*s && (*out = strtod(s, &end), *end == '\0') && isfinite(*out))
            return 0; /* proto3 JSON allows numbers in strings */
        else
            goto bad;
        return 0;
    }
bad:;
    char vb[64];
    return fail(d, p, "%s is not a number", show(v, vb, sizeof(vb)));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-') /* the URL-safe alphabet too, as proto3 JSON parsers accept */
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* Standard base64, padded or not. Returns the decoded length, or -1. */
static long b64_decode(const char *s, size_t n, uint8_t *out)
{
    while (n && s[n - 1] == '=' && n % 4 != 1)
        n--;
    if (n % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64val(s[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            out[o++] = (uint8_t)(acc >> 16);
            out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
        }
    }
    if (n % 4 == 2)
        out[o++] = (uint8_t)(acc >> 4);
    else if (n % 4 == 3) {
        out[o++] = (uint8_t)(acc >> 10);
        out[o++] = (uint8_t)(acc >> 2);
    }
    return (long)o;
}

static int get_bytes(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                     const struct jpath *p, ProtobufCBinaryData *out)
{
    char vb[64];
    if (!json_is_string(v))
        return fail(d, p, "%s is not a string", show(v, vb, sizeof(vb)));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), id = hs_json_hex_id_size(f);
    *out = (ProtobufCBinaryData){0};
    if (n == 0)
        return 0; /* an empty id is an absent one (a root span's parentSpanId: "") */
    if (!(out->data = hs_arena_alloc(d->arena, n)))
        return HS_ENOMEM;
    if (id) {
        if (n != id * 2)
            goto bad_hex;
        for (size_t i = 0; i < id; i++) {
            int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
            if (hi < 0 || lo < 0)
                goto bad_hex;
            out->data[i] = (uint8_t)(hi << 4 | lo);
        }
        out->len = id;
        return 0;
    }
    long len = b64_decode(s, n, out->data);
    if (len < 0)
        return fail(d, p, "%s is not base64", show(v, vb, sizeof(vb)));
    out->len = (size_t)len;
    return 0;
bad_hex:
    return fail(d, p, "%s is not %zu hex digits", show(v, vb, sizeof(vb)), id * 2);
}

static int decode_message(struct jdec *d, const ProtobufCMessageDescriptor *desc, const json_t *v,
                          const struct jpath *p, void **out);

/* One value of field f (an element, for repeated fields) into dst. */
static int decode_value(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                        const struct jpath *p, void *dst)
{
    char vb[64];
    switch (f->type) {
    case PROTOBUF_C_TYPE_ENUM:
        return get_enum(d, f, v, p, dst);
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return fail(d, p, "%s is not true or false", show(v, vb, sizeof(vb)));
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return get_double(d, v, p, dst);
    case PROTOBUF_C_TYPE_FLOAT: {
        double x;
        int rc = get_double(d, v, p, &x);
        *(float *)dst = (float)x;
        return rc;
    }
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v))
            return fail(d, p, "%s is not a string", show(v, vb, sizeof(vb)));
        *(char **)dst = hs_arena_strndup(d->arena, json_string_value(v), json_string_length(v));
        return *(char **)dst ? 0 : HS_ENOMEM;
    case PROTOBUF_C_TYPE_BYTES:
        return get_bytes(d, f, v, p, dst);
    case PROTOBUF_C_TYPE_MESSAGE:
        return decode_message(d, f->descriptor, v, p, dst);
    default:
        return get_int(d, f, v, p, dst);
    }
}

static int decode_repeated(struct jdec *d, const ProtobufCFieldDescriptor *f, const json_t *v,
                           const struct jpath *p, void *msg)
{
    char vb[64];
    if (!json_is_array(v))
        return fail(d, p, "%s is not an array", show(v, vb, sizeof(vb)));
    size_t n = json_array_size(v), es = hs_json_elem_size(f->type), count = 0;
    if (n == 0)
        return 0;
    char *arr = hs_arena_alloc(d->arena, n * es);
    if (!arr)
        return HS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e)) /* null is absent, here as everywhere */
            continue;
        struct jpath ep = {p, NULL, i};
        int rc = decode_value(d, f, e, &ep, arr + count * es);
        if (rc)
            return rc;
        count++;
    }
    *(size_t *)hs_json_member(msg, f->quantifier_offset) = count;
    *(void **)hs_json_member(msg, f->offset) = arr;
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

static int decode_field(struct jdec *d, const ProtobufCMessageDescriptor *desc,
                        const ProtobufCFieldDescriptor *f, const json_t *v,
                        const struct jpath *p, void *msg)
{
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return decode_repeated(d, f, v, p, msg);
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = hs_json_member(msg, f->quantifier_offset);
        if (*which) {
            char other[64];
            hs_json_camel_name(protobuf_c_message_descriptor_get_field(desc, *which)->name, other,
                       sizeof(other));
            return fail(d, p, "only one of its group may be set (also %s)", other);
        }
        *which = f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
               f->type != PROTOBUF_C_TYPE_MESSAGE) {
        *(protobuf_c_boolean *)hs_json_member(msg, f->quantifier_offset) = 1;
    }
    return decode_value(d, f, v, p, hs_json_member(msg, f->offset));
}

/* Keys are walked once, each matched against the fields (a handful per message), which costs
 * less than two hash lookups per declared field; unknown keys are skipped. */
static int decode_message(struct jdec *d, const ProtobufCMessageDescriptor *desc, const json_t *v,
                          const struct jpath *p, void **out)
{
    char vb[64];
    if (!json_is_object(v))
        return fail(d, p, "%s is not an object", show(v, vb, sizeof(vb)));
    ProtobufCMessage *msg = hs_arena_alloc(d->arena, desc->sizeof_message);
    if (!msg)
        return HS_ENOMEM;
    desc->message_init(msg);
    uint64_t seen = 0; /* by field index; OTLP messages have at most 17 fields */
    const char *key;
    json_t *fv;
    json_object_foreach((json_t *)v, key, fv) {
        int how;
        const ProtobufCFieldDescriptor *f = find_field(desc, key, &how);
        if (!f || json_is_null(fv)) /* unknown keys are ignored; null is absent */
            continue;
        struct jpath fp = {p, key, 0};
        uint64_t bit = (uint64_t)1 << ((unsigned)(f - desc->fields) & 63);
        if (seen & bit) {
            char camel[64];
            hs_json_camel_name(f->name, camel, sizeof(camel));
            return fail(d, &fp, "given twice (also as %s)", how == 1 ? camel : f->name);
        }
        seen |= bit;
        int rc = decode_field(d, desc, f, fv, &fp, msg);
        if (rc)
            return rc;
    }
    *out = msg;
    return 0;
}

int hs_otlp_json_to_wire(const char *json, size_t len, struct hs_buf *out, char *err,
                         size_t errlen)
{
    char dummy[1];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "line %d col %d: %s", je.line, je.column, je.text);
        return json_error_code(&je) == json_error_out_of_memory ? HS_ENOMEM : HS_EINVAL;
    }
    struct jdec d = {.text = json, .len = len, .err = err, .errlen = errlen};
    int rc = HS_ENOMEM;
    if (!(d.arena = hs_arena_new(len + 4096, 0)))
        goto done;
    void *req;
    if ((rc = decode_message(&d, &HS_JSON_REQUEST_DESC, root, NULL, &req)) != 0)
        goto done;
    size_t size = protobuf_c_message_get_packed_size(req);
    if ((rc = hs_buf_reserve(out, size)) != 0)
        goto done;
    out->len += protobuf_c_message_pack(req, out->data + out->len);
done:
    if (rc == HS_ENOMEM && !err[0])
        snprintf(err, errlen, "out of memory");
    hs_arena_free(d.arena);
    json_decref(root);
    return rc;
}

