/* otlp_json_write.c: wire bytes to strict OTLP/JSON (wire.md §2.1): lowerCamelCase, hex ids,
 * 64-bit ints as strings, enums as integers, defaults omitted as the Collector's marshaller does,
 * and output that is valid JSON whatever bytes the strings hold. */
#include "pdata/otlp_json.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "pdata/otlp_json_int.h"

/* protobuf-c unpacks into an arena and a small writer walks the messages into the hs_buf.
 * Measured on a 100-span request (22 KB wire, 55 KB JSON, -O2, a shared 2-core machine): the
 * writer takes 0.15-0.25 ms, unpack included; building a jansson tree of the same messages and
 * json_dumpb'ing it took 1.4-2.1 ms, with a malloc per value. */

struct jw {
    struct hs_buf *b;
    int rc; /* sticky: the first failure; later writes are skipped */
};

static void put(struct jw *w, const void *p, size_t n)
{
    if (!w->rc)
        w->rc = hs_buf_append(w->b, p, n);
}

static void puts_lit(struct jw *w, const char *s)
{
    put(w, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one (overlong forms,
 * surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const uint8_t *p, const uint8_t *end)
{
    size_t n = end - p;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0))
            return 0;
        return 3;
    }
    if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

/* A JSON string; each byte that is not part of valid UTF-8 becomes U+FFFD (as Go's encoding/json
 * does), so no input can make the output invalid JSON. */
static void put_string(struct jw *w, const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s, *end = p + n;
    put(w, "\"", 1);
    while (p < end) {
        const uint8_t *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        put(w, run, (size_t)(p - run));
        if (p == end)
            break;
        char esc[8];
        size_t u = *p >= 0x80 ? utf8_len(p, end) : 0;
        if (u) {
            put(w, p, u);
            p += u;
        } else if (*p >= 0x80) {
            put(w, "\xEF\xBF\xBD", 3);
            p++;
        } else {
            const char *named = *p == '"'    ? "\\\""
                                : *p == '\\' ? "\\\\"
                                : *p == '\n' ? "\\n"
                                : *p == '\r' ? "\\r"
                                : *p == '\t' ? "\\t"
                                             : NULL;
            if (!named)
                snprintf(esc, sizeof(esc), "\\u%04x", *p);
            puts_lit(w, named ? named : esc);
            p++;
        }
    }
    put(w, "\"", 1);
}

int hs_json_put_string(struct hs_buf *out, const char *s, size_t n)
{
    struct jw w = {.b = out};
    put_string(&w, s, n);
    return w.rc;
}

static void put_bytes(struct jw *w, const ProtobufCBinaryData *bd, bool hex)
{
    static const char hexd[] = "0123456789abcdef";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char chunk[256];
    size_t n = 0;
    put(w, "\"", 1);
    for (size_t i = 0; i < bd->len; i += hex ? 1 : 3) {
        const uint8_t *s = bd->data + i;
        if (hex) {
            chunk[n++] = hexd[s[0] >> 4];
            chunk[n++] = hexd[s[0] & 15];
        } else {
            size_t left = bd->len - i;
            uint32_t v = (uint32_t)s[0] << 16 | (left > 1 ? s[1] << 8 : 0) | (left > 2 ? s[2] : 0);
            chunk[n++] = b64[v >> 18];
            chunk[n++] = b64[(v >> 12) & 63];
            chunk[n++] = left > 1 ? b64[(v >> 6) & 63] : '=';
            chunk[n++] = left > 2 ? b64[v & 63] : '=';
        }
        if (n > sizeof(chunk) - 4) {
            put(w, chunk, n);
            n = 0;
        }
    }
    put(w, chunk, n);
    put(w, "\"", 1);
}

/* Shortest form that reads back as the same double; non-finite values as proto3 JSON's strings. */
static void put_double(struct jw *w, double x)
{
    if (isnan(x)) {
        puts_lit(w, "\"NaN\"");
        return;
    }
    if (isinf(x)) {
        puts_lit(w, x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    if (x == 0 && signbit(x)) { /* "-0" would read back as the integer 0 and lose the sign */
        puts_lit(w, "-0.0");
        return;
    }
    char num[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(num, sizeof(num), "%.*g", prec, x);
        if (strtod(num, NULL) == x)
            break;
    }
    puts_lit(w, num);
}

static void emit_message(struct jw *w, const ProtobufCMessage *m, unsigned depth);

/* protobuf-c hands out strings as C strings, which end at a U+0000 the wire may hold. It
 * allocates exactly len + 1 bytes for each string it decodes, so an allocator that keeps each
 * size in front of the block gives the true length back (test_otlp_json checks this). */
struct sized {
    size_t size;
    size_t pad; /* keeps the arena's 16-byte alignment */
};

static void *sized_alloc(void *arena, size_t n)
{
    struct sized *h = hs_arena_alloc(arena, sizeof(*h) + n);
    if (!h)
        return NULL;
    h->size = n;
    return h + 1;
}

static void sized_free(void *arena, void *p)
{
    (void)arena;
    (void)p; /* freed with the arena */
}

static size_t string_len(const char *s)
{
    size_t n = strlen(s);
    if (s == protobuf_c_empty_string) /* the default of an absent string, not allocated */
        return 0;
    const struct sized *h = (const struct sized *)(const void *)s - 1;
    return h->size > n + 1 && s[h->size - 1] == '\0' ? h->size - 1 : n;
}

/* Decimal digits of v, optionally negative and in quotes (64-bit ints are JSON strings);
 * snprintf cost more than the rest of the writer together. */
static void put_int(struct jw *w, uint64_t v, bool neg, bool quoted)
{
    char num[24], *p = num + sizeof(num);
    if (quoted)
        *--p = '"';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg)
        *--p = '-';
    if (quoted)
        *--p = '"';
    put(w, p, (size_t)(num + sizeof(num) - p));
}

static void put_signed(struct jw *w, int64_t v, bool quoted)
{
    put_int(w, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, v < 0, quoted);
}

static void emit_value(struct jw *w, const ProtobufCFieldDescriptor *f, const void *v,
                       unsigned depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: /* enums as integers, as the spec requires */
        put_signed(w, *(const int32_t *)v, false);
        return;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        put_int(w, *(const uint32_t *)v, false, false);
        return;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        put_signed(w, *(const int64_t *)v, true);
        return;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        put_int(w, *(const uint64_t *)v, false, true);
        return;
    case PROTOBUF_C_TYPE_BOOL:
        puts_lit(w, *(const protobuf_c_boolean *)v ? "true" : "false");
        return;
    case PROTOBUF_C_TYPE_DOUBLE:
        put_double(w, *(const double *)v);
        return;
    case PROTOBUF_C_TYPE_FLOAT:
        put_double(w, *(const float *)v);
        return;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)v;
        put_string(w, s ? s : "", s ? string_len(s) : 0);
        return;
    }
    case PROTOBUF_C_TYPE_BYTES:
        put_bytes(w, v, hs_json_hex_id_size(f) != 0);
        return;
    case PROTOBUF_C_TYPE_MESSAGE:
        emit_message(w, *(ProtobufCMessage *const *)v, depth + 1);
        return;
    }
}

/* Whether the Collector's marshaller would write f: proto3 omits defaults, except oneof members
 * (explicit presence: {"intValue":"0"}) and sub-messages that are present at all. */
static bool field_present(const ProtobufCFieldDescriptor *f, const void *msg)
{
    const void *v = (const char *)msg + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return *(const size_t *)((const char *)msg + f->quantifier_offset) > 0;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)((const char *)msg + f->quantifier_offset) == f->id;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
        f->type != PROTOBUF_C_TYPE_MESSAGE)
        return *(const protobuf_c_boolean *)((const char *)msg + f->quantifier_offset);
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)v;
        return s && string_len(s) > 0; /* "\0x" is not empty */
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)v)->len > 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)v != NULL;
    case PROTOBUF_C_TYPE_BOOL:
        return *(const protobuf_c_boolean *)v != 0;
    default: /* doubles by their bits, as protobuf-c packs them: -0.0 is written */
        return hs_json_elem_size(f->type) == 8 ? *(const uint64_t *)v != 0
                                               : *(const uint32_t *)v != 0;
    }
}

static void emit_message(struct jw *w, const ProtobufCMessage *m, unsigned depth)
{
    if (depth > 256) { /* validated input nests far less; this only guards the stack */
        if (!w->rc)
            w->rc = HS_EINVAL;
        return;
    }
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    bool first = true;
    put(w, "{", 1);
    for (unsigned i = 0; i < desc->n_fields && !w->rc; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (!field_present(f, m))
            continue;
        char key[72];
        key[0] = ',';
        key[1] = '"';
        size_t n = hs_json_camel_name(f->name, key + 2, sizeof(key) - 4) + 2;
        key[n++] = '"';
        key[n++] = ':';
        put(w, key + first, n - first); /* no comma before the first */
        first = false;
        const char *v = (const char *)m + f->offset;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            emit_value(w, f, v, depth);
            continue;
        }
        size_t count = *(const size_t *)((const char *)m + f->quantifier_offset);
        size_t es = hs_json_elem_size(f->type);
        const char *arr = *(char *const *)v;
        put(w, "[", 1);
        for (size_t j = 0; j < count; j++) {
            if (j)
                put(w, ",", 1);
            emit_value(w, f, arr + j * es, depth);
        }
        put(w, "]", 1);
    }
    put(w, "}", 1);
}

int hs_otlp_wire_to_json(const uint8_t *p, size_t len, struct hs_buf *out)
{
    return hs_otlp_wire_to_json_desc(&HS_JSON_REQUEST_DESC, p, len, out);
}

int hs_otlp_wire_to_json_desc(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                              struct hs_buf *out)
{
    struct hs_arena *arena = hs_arena_new(len * 2 + 4096, 0);
    if (!arena)
        return HS_ENOMEM;
    ProtobufCAllocator alloc = {.alloc = sized_alloc, .free = sized_free, .allocator_data = arena};
    ProtobufCMessage *req = protobuf_c_message_unpack(desc, &alloc, len, p);
    size_t start = out->len;
    struct jw w = {.b = out};
    hs_buf_reserve(out, len * 5 / 2 + 64); /* JSON runs ~2.5x the wire; a hint, may fail */
    if (req)
        emit_message(&w, req, 0);
    else
        w.rc = HS_EINVAL; /* the arena has no limit, so only bad bytes get here */
    if (w.rc)
        out->len = start;
    hs_arena_free(arena);
    return w.rc;
}
