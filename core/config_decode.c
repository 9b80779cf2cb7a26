/* config_decode.c: decodes config maps into structs by field tables (defaults through the same
 * parsers as user input, bounds, unknown and missing keys, every error collected), frees what
 * it allocated, and writes the Markdown reference of a table. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "common.h"
#include "config.h"
#include "config_internal.h"

struct dec {
    struct hs_error *err;
    size_t nerr;
    const char *def; /* decoding a field's default: its errors are ours, not the user's */
};

__attribute__((format(printf, 4, 5))) static void
dec_errorf(struct dec *d, const struct hs_config_node *n, const char *path, const char *fmt, ...)
{
    struct hs_buf msg = {0};
    va_list ap;
    va_start(ap, fmt);
    hs_buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    const char *m = msg.data ? (const char *)msg.data : "";
    if (d->def)
        hs_config_errorf(d->err, n, path, "invalid default \"%s\" in the field table: %s", d->def,
                         m);
    else
        hs_config_errorf(d->err, n, path, "%s", m);
    hs_buf_free(&msg);
    d->nerr++;
}

/* A section row without .sub (a table bug) reads as a section with no keys. */
static const struct hs_config_field no_fields[] = {{0}};

static const struct hs_config_field *sub_of(const struct hs_config_field *f)
{
    return f->sub ? f->sub : no_fields;
}

static char *join(const char *path, const char *key)
{
    struct hs_buf b = {0};
    hs_buf_printf(&b, "%s%s%s", path, *path ? "." : "", key);
    return (char *)b.data;
}

static const char *kind_name(const struct hs_config_node *n)
{
    if (n->kind == HS_NODE_MAP)
        return "a map";
    if (n->kind == HS_NODE_SEQ)
        return "a sequence";
    return n->is_null ? "nothing" : "a scalar value";
}

static const char *type_name(enum hs_config_type t)
{
    static const char *const names[] = {
        [HS_CFG_BOOL] = "bool",
        [HS_CFG_INT] = "int",
        [HS_CFG_UINT] = "uint",
        [HS_CFG_UINT64] = "uint64",
        [HS_CFG_DOUBLE] = "number",
        [HS_CFG_DURATION] = "duration",
        [HS_CFG_SIZE] = "size",
        [HS_CFG_STRING] = "string",
        [HS_CFG_ENUM] = "enum",
        [HS_CFG_ENDPOINT] = "host:port",
        [HS_CFG_URL] = "URL",
        [HS_CFG_STRLIST] = "list of strings",
        [HS_CFG_STRMAP] = "map of strings",
        [HS_CFG_SECTION] = "section",
        [HS_CFG_INLINE] = "inline",
    };
    return (size_t)t < HS_ARRAY_SIZE(names) && names[t] ? names[t] : "?";
}

/* ---- bounds --------------------------------------------------------------------------- */

/* Bounds print in the field's own units: "1h", "1GiB". */
static void format_bound(enum hs_config_type t, int64_t v, char *buf, size_t len)
{
    if (t == HS_CFG_DURATION && v >= 0)
        hs_cfg_format_duration((uint64_t)v, buf, len);
    else if (t == HS_CFG_SIZE && v >= 0)
        hs_cfg_format_size((uint64_t)v, buf, len);
    else
        snprintf(buf, len, "%" PRId64, v);
}

/* min and max both 0 mean no bounds; with a min, a max of 0 means no upper bound. */
static bool has_max(const struct hs_config_field *f)
{
    return f->max != 0;
}

static void check_unsigned(struct dec *d, const struct hs_config_field *f,
                           const struct hs_config_node *n, const char *path, uint64_t v)
{
    if (!f->min && !f->max)
        return;
    char val[64], b[64];
    if (f->type == HS_CFG_DURATION || f->type == HS_CFG_SIZE)
        snprintf(val, sizeof(val), "\"%.50s\"", n->value);
    else
        snprintf(val, sizeof(val), "%" PRIu64, v);
    if (f->min > 0 && v < (uint64_t)f->min) {
        format_bound(f->type, f->min, b, sizeof(b));
        dec_errorf(d, n, path, "%s is below the minimum %s", val, b);
    } else if (has_max(f) && (f->max < 0 || v > (uint64_t)f->max)) {
        format_bound(f->type, f->max, b, sizeof(b));
        dec_errorf(d, n, path, "%s is above the maximum %s", val, b);
    }
}

static void check_signed(struct dec *d, const struct hs_config_field *f,
                         const struct hs_config_node *n, const char *path, int64_t v)
{
    if (!f->min && !f->max)
        return;
    if (v < f->min)
        dec_errorf(d, n, path, "%" PRId64 " is below the minimum %" PRId64, v, f->min);
    else if (has_max(f) && v > f->max)
        dec_errorf(d, n, path, "%" PRId64 " is above the maximum %" PRId64, v, f->max);
}

static void check_double(struct dec *d, const struct hs_config_field *f,
                         const struct hs_config_node *n, const char *path, double v)
{
    if (!f->min && !f->max)
        return;
    if (v < (double)f->min)
        dec_errorf(d, n, path, "%g is below the minimum %" PRId64, v, f->min);
    else if (has_max(f) && v > (double)f->max)
        dec_errorf(d, n, path, "%g is above the maximum %" PRId64, v, f->max);
}

/* ---- scalars -------------------------------------------------------------------------- */

static void set_string(char **slot, const char *s)
{
    free(*slot);
    *slot = hs_xstrdup(s);
}

static void number_error(struct dec *d, const struct hs_config_node *n, const char *path, int rc,
                         const char *what)
{
    if (rc == HS_E2BIG)
        dec_errorf(d, n, path, "\"%s\" is out of range", n->value);
    else
        dec_errorf(d, n, path, "\"%s\" is not %s", n->value, what);
}

/* "30x" → try 30s; "soon" → examples. */
static void duration_error(struct dec *d, const struct hs_config_node *n, const char *path, int rc)
{
    const char *s = n->value;
    size_t num = strspn(s, "0123456789.");
    if (rc == HS_E2BIG)
        dec_errorf(d, n, path, "\"%s\" is too long a duration", s);
    else if (num > 0 && !strpbrk(s + num, "0123456789"))
        dec_errorf(d, n, path, "\"%s\" is not a duration (try %.*ss)", s, (int)num, s);
    else
        dec_errorf(d, n, path, "\"%s\" is not a duration (e.g. 500ms, 30s, 1m30s, 2h)", s);
}

static void decode_enum(struct dec *d, const struct hs_config_field *f,
                        const struct hs_config_node *n, char **slot, const char *path)
{
    for (const char *const *c = f->choices; c && *c; c++) {
        if (strcmp(n->value, *c) == 0) {
            set_string(slot, n->value);
            return;
        }
    }
    struct hs_buf b = {0};
    for (const char *const *c = f->choices; c && *c; c++)
        hs_buf_printf(&b, "%s%s", c == f->choices ? "" : ", ", *c);
    dec_errorf(d, n, path, "\"%s\" is not one of: %s", n->value, b.data ? (char *)b.data : "");
    hs_buf_free(&b);
}

static void decode_number(struct dec *d, const struct hs_config_field *f,
                          const struct hs_config_node *n, void *p, const char *path)
{
    uint64_t u = 0;
    int64_t i = 0;
    double x = 0;
    int rc;
    switch (f->type) {
    case HS_CFG_INT:
        if ((rc = hs_cfg_int(n->value, &i)) != 0)
            number_error(d, n, path, rc, "an integer");
        else
            check_signed(d, f, n, path, i);
        if (rc == 0)
            *(int64_t *)p = i;
        break;
    case HS_CFG_UINT:
    case HS_CFG_UINT64:
        rc = hs_cfg_uint(n->value, &u);
        if (rc == 0 && f->type == HS_CFG_UINT && u > UINT32_MAX)
            rc = HS_E2BIG;
        if (rc)
            number_error(d, n, path, rc, "a non-negative integer");
        else
            check_unsigned(d, f, n, path, u);
        if (rc == 0 && f->type == HS_CFG_UINT)
            *(uint32_t *)p = (uint32_t)u;
        else if (rc == 0)
            *(uint64_t *)p = u;
        break;
    case HS_CFG_DOUBLE:
        if ((rc = hs_cfg_double(n->value, &x)) != 0)
            number_error(d, n, path, rc, "a number");
        else
            check_double(d, f, n, path, x);
        if (rc == 0)
            *(double *)p = x;
        break;
    case HS_CFG_DURATION:
        if ((rc = hs_cfg_duration(n->value, &u)) != 0)
            duration_error(d, n, path, rc);
        else
            check_unsigned(d, f, n, path, u);
        if (rc == 0)
            *(uint64_t *)p = u;
        break;
    case HS_CFG_SIZE:
        if ((rc = hs_cfg_size(n->value, &u)) == HS_EINVAL)
            dec_errorf(d, n, path, "\"%s\" is not a size (e.g. 512MiB, 64KiB, 1GB, 1500)",
                       n->value);
        else if (rc)
            number_error(d, n, path, rc, "a size");
        else
            check_unsigned(d, f, n, path, u);
        if (rc == 0)
            *(uint64_t *)p = u;
        break;
    default:
        break;
    }
}

static void decode_scalar(struct dec *d, const struct hs_config_field *f,
                          const struct hs_config_node *n, void *p, const char *path)
{
    const char *why = NULL;
    char host[256];
    if (n->kind != HS_NODE_SCALAR) {
        dec_errorf(d, n, path, "expected a scalar value, got %s", kind_name(n));
        return;
    }
    if (n->is_null && (f->type != HS_CFG_STRING || f->required)) {
        dec_errorf(d, n, path, "missing value (expected a %s)", type_name(f->type));
        return;
    }
    switch (f->type) {
    case HS_CFG_BOOL:
        if (hs_cfg_bool(n->value, (bool *)p) != 0)
            dec_errorf(d, n, path, "\"%s\" is not a boolean (use true or false)", n->value);
        break;
    case HS_CFG_STRING:
        set_string((char **)p, n->value);
        break;
    case HS_CFG_ENUM:
        decode_enum(d, f, n, (char **)p, path);
        break;
    case HS_CFG_ENDPOINT:
    case HS_CFG_URL:
        why = f->type == HS_CFG_URL ? hs_cfg_url_problem(n->value)
                                    : hs_cfg_endpoint_problem(n->value, host, sizeof(host), NULL);
        if (why)
            dec_errorf(d, n, path, "\"%s\": %s", n->value, why);
        else
            set_string((char **)p, n->value);
        break;
    default:
        decode_number(d, f, n, p, path);
        break;
    }
}

/* ---- lists, maps, sections ------------------------------------------------------------ */

static void strlist_clear(struct hs_strlist *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    *l = (struct hs_strlist){0};
}

static void strmap_clear(struct hs_strmap *m)
{
    for (size_t i = 0; i < m->count; i++) {
        free(m->keys[i]);
        free(m->values[i]);
    }
    free(m->keys);
    free(m->values);
    *m = (struct hs_strmap){0};
}

static size_t count_children(const struct hs_config_node *n)
{
    size_t count = 0;
    for (const struct hs_config_node *c = n->child; c; c = c->next)
        count++;
    return count;
}

static void decode_strlist(struct dec *d, const struct hs_config_node *n, struct hs_strlist *l,
                           const char *path)
{
    strlist_clear(l);
    if (n->kind == HS_NODE_SCALAR && n->is_null)
        return;
    if (n->kind != HS_NODE_SEQ) {
        dec_errorf(d, n, path, "expected a sequence, got %s", kind_name(n));
        return;
    }
    l->items = hs_xcalloc(count_children(n), sizeof(*l->items));
    size_t i = 0;
    for (const struct hs_config_node *c = n->child; c; c = c->next, i++) {
        char item[32];
        snprintf(item, sizeof(item), "[%zu]", i);
        struct hs_buf ip = {0};
        hs_buf_printf(&ip, "%s%s", path, item);
        if (c->kind != HS_NODE_SCALAR)
            dec_errorf(d, c, (char *)ip.data, "expected a scalar value, got %s", kind_name(c));
        else if (c->is_null)
            dec_errorf(d, c, (char *)ip.data, "empty list item");
        else
            l->items[l->count++] = hs_xstrdup(c->value);
        hs_buf_free(&ip);
    }
}

static void decode_strmap(struct dec *d, const struct hs_config_node *n, struct hs_strmap *m,
                          const char *path)
{
    strmap_clear(m);
    if (n->kind == HS_NODE_SCALAR && n->is_null)
        return;
    if (n->kind != HS_NODE_MAP) {
        dec_errorf(d, n, path, "expected a map, got %s", kind_name(n));
        return;
    }
    size_t count = count_children(n);
    m->keys = hs_xcalloc(count, sizeof(*m->keys));
    m->values = hs_xcalloc(count, sizeof(*m->values));
    for (const struct hs_config_node *c = n->child; c; c = c->next) {
        if (c->kind != HS_NODE_SCALAR) {
            char *kp = join(path, c->key);
            dec_errorf(d, c, kp, "expected a scalar value, got %s", kind_name(c));
            free(kp);
            continue;
        }
        m->keys[m->count] = hs_xstrdup(c->key);
        m->values[m->count++] = hs_xstrdup(c->value);
    }
}

static void apply_map(struct dec *d, const struct hs_config_field *fields,
                      const struct hs_config_node *map, const struct hs_config_node *at, void *out,
                      const char *path);

/* One field from one node; `out` is the struct the table describes. */
static void set_value(struct dec *d, const struct hs_config_field *f,
                      const struct hs_config_node *n, void *out, const char *path)
{
    void *p = (char *)out + f->offset;
    switch (f->type) {
    case HS_CFG_STRLIST:
        decode_strlist(d, n, p, path);
        break;
    case HS_CFG_STRMAP:
        decode_strmap(d, n, p, path);
        break;
    case HS_CFG_SECTION:
        if (n->kind == HS_NODE_MAP || (n->kind == HS_NODE_SCALAR && n->is_null)) {
            if (f->has_presence)
                *(bool *)((char *)out + f->presence_offset) = true;
            apply_map(d, sub_of(f), n->kind == HS_NODE_MAP ? n : NULL, n, p, path);
        } else {
            dec_errorf(d, n, path, "expected a map, got %s", kind_name(n));
        }
        break;
    default:
        decode_scalar(d, f, n, p, path);
        break;
    }
}

/* The row for `key`, looking through inline rows; *off gets the offset of the struct the row
 * is relative to. */
static const struct hs_config_field *find_field(const struct hs_config_field *fields,
                                                const char *key, size_t *off)
{
    for (const struct hs_config_field *f = fields; f->name; f++) {
        if (f->type == HS_CFG_INLINE) {
            size_t sub_off = 0;
            const struct hs_config_field *g = find_field(sub_of(f), key, &sub_off);
            if (g) {
                *off = f->offset + sub_off;
                return g;
            }
        } else if (strcmp(f->name, key) == 0) {
            *off = 0;
            return f;
        }
    }
    return NULL;
}

static void list_keys(const struct hs_config_field *fields, struct hs_buf *known)
{
    for (const struct hs_config_field *f = fields; f->name; f++) {
        if (f->type == HS_CFG_INLINE)
            list_keys(sub_of(f), known);
        else
            hs_buf_printf(known, "%s%s", known->len ? ", " : "", f->name);
    }
}

static void unknown_key(struct dec *d, const struct hs_config_field *fields,
                        const struct hs_config_node *c, const char *path)
{
    struct hs_config_node at = *c;
    at.line = c->key_line;
    at.col = c->key_col;
    struct hs_buf known = {0};
    list_keys(fields, &known);
    dec_errorf(d, &at, path, "unknown key (known: %s)", known.data ? (char *)known.data : "none");
    hs_buf_free(&known);
}

/* The user's keys over the defaults already in place; `at` positions missing-key errors. */
static void apply_map(struct dec *d, const struct hs_config_field *fields,
                      const struct hs_config_node *map, const struct hs_config_node *at, void *out,
                      const char *path)
{
    size_t nfields = 0;
    while (fields[nfields].name)
        nfields++;
    bool *seen = hs_xcalloc(nfields, sizeof(*seen));
    for (const struct hs_config_node *c = map ? map->child : NULL; c; c = c->next) {
        char *kp = join(path, c->key);
        size_t off = 0;
        const struct hs_config_field *f = find_field(fields, c->key, &off);
        if (!f) {
            unknown_key(d, fields, c, kp);
        } else {
            if (f >= fields && f < fields + nfields)
                seen[f - fields] = true;
            set_value(d, f, c, (char *)out + off, kp);
        }
        free(kp);
    }
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].required && !seen[i])
            dec_errorf(d, at, path, "missing required key \"%s\"", fields[i].name);
    free(seen);
}

/* Lists and maps have YAML defaults ("[a, b]"); read them with the user's parser too. */
static void apply_yaml_default(struct dec *d, const struct hs_config_field *f, void *out,
                               const char *path)
{
    struct hs_config_doc doc;
    struct hs_error perr = {0};
    if (hs_config_parse("<default>", f->def, strlen(f->def), &doc, &perr) != 0)
        dec_errorf(d, NULL, path, "%s", perr.count ? perr.lines[0] : "cannot parse");
    else if (doc.root)
        set_value(d, f, doc.root, out, path);
    hs_error_free(&perr);
    hs_config_doc_free(&doc);
}

static void apply_defaults(struct dec *d, const struct hs_config_field *fields, void *out,
                           const char *path)
{
    for (const struct hs_config_field *f = fields; f->name; f++) {
        char *fp = join(path, f->name);
        if (f->type == HS_CFG_INLINE) {
            apply_defaults(d, sub_of(f), (char *)out + f->offset, path);
        } else if (f->type == HS_CFG_SECTION) {
            apply_defaults(d, sub_of(f), (char *)out + f->offset, fp);
        } else if (f->def) {
            d->def = f->def;
            if (f->type == HS_CFG_STRLIST || f->type == HS_CFG_STRMAP) {
                apply_yaml_default(d, f, out, fp);
            } else {
                /* Quoted, so "" is an empty string rather than no value. */
                struct hs_config_node n = {
                    .kind = HS_NODE_SCALAR, .value = (char *)f->def, .quoted = true};
                set_value(d, f, &n, out, fp);
            }
            d->def = NULL;
        }
        free(fp);
    }
}

/* Zero what the table describes, so a struct of any past can be decoded and freed. */
static void zero_fields(const struct hs_config_field *fields, void *out)
{
    static const size_t sizes[] = {
        [HS_CFG_BOOL] = sizeof(bool),
        [HS_CFG_INT] = sizeof(int64_t),
        [HS_CFG_UINT] = sizeof(uint32_t),
        [HS_CFG_UINT64] = sizeof(uint64_t),
        [HS_CFG_DOUBLE] = sizeof(double),
        [HS_CFG_DURATION] = sizeof(uint64_t),
        [HS_CFG_SIZE] = sizeof(uint64_t),
        [HS_CFG_STRING] = sizeof(char *),
        [HS_CFG_ENUM] = sizeof(char *),
        [HS_CFG_ENDPOINT] = sizeof(char *),
        [HS_CFG_URL] = sizeof(char *),
        [HS_CFG_STRLIST] = sizeof(struct hs_strlist),
        [HS_CFG_STRMAP] = sizeof(struct hs_strmap),
    };
    for (const struct hs_config_field *f = fields; f->name; f++) {
        if (f->type == HS_CFG_INLINE) {
            zero_fields(sub_of(f), (char *)out + f->offset);
        } else if (f->type == HS_CFG_SECTION) {
            zero_fields(sub_of(f), (char *)out + f->offset);
            if (f->has_presence)
                *(bool *)((char *)out + f->presence_offset) = false;
        } else if ((size_t)f->type < HS_ARRAY_SIZE(sizes)) {
            memset((char *)out + f->offset, 0, sizes[f->type]);
        }
    }
}

int hs_config_decode(const struct hs_config_field *fields, const struct hs_config_node *map,
                     void *out, const char *path, struct hs_error *err)
{
    struct dec d = {.err = err};
    path = path ? path : "";
    zero_fields(fields, out);
    apply_defaults(&d, fields, out, path);
    if (map && map->kind != HS_NODE_MAP && !(map->kind == HS_NODE_SCALAR && map->is_null))
        dec_errorf(&d, map, path, "expected a map, got %s", kind_name(map));
    else
        apply_map(&d, fields, map && map->kind == HS_NODE_MAP ? map : NULL, map, out, path);
    return d.nerr ? HS_EINVAL : 0;
}

void hs_config_free_fields(const struct hs_config_field *fields, void *out)
{
    if (!fields || !out)
        return;
    for (const struct hs_config_field *f = fields; f->name; f++) {
        void *p = (char *)out + f->offset;
        switch (f->type) {
        case HS_CFG_STRING:
        case HS_CFG_ENUM:
        case HS_CFG_ENDPOINT:
        case HS_CFG_URL:
            free(*(char **)p);
            *(char **)p = NULL;
            break;
        case HS_CFG_STRLIST:
            strlist_clear(p);
            break;
        case HS_CFG_STRMAP:
            strmap_clear(p);
            break;
        case HS_CFG_SECTION:
        case HS_CFG_INLINE:
            hs_config_free_fields(f->sub, p);
            break;
        default:
            break;
        }
    }
}

static char **dup_strings(char *const *v, size_t n)
{
    if (!v)
        return NULL;
    char **out = hs_xcalloc(n ? n : 1, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out[i] = v[i] ? hs_xstrdup(v[i]) : NULL;
    return out;
}

void hs_config_dup_fields(const struct hs_config_field *fields, void *out)
{
    if (!fields || !out)
        return;
    for (const struct hs_config_field *f = fields; f->name; f++) {
        void *p = (char *)out + f->offset;
        switch (f->type) {
        case HS_CFG_STRING:
        case HS_CFG_ENUM:
        case HS_CFG_ENDPOINT:
        case HS_CFG_URL:
            if (*(char **)p)
                *(char **)p = hs_xstrdup(*(char **)p);
            break;
        case HS_CFG_STRLIST: {
            struct hs_strlist *l = p;
            l->items = dup_strings(l->items, l->count);
            break;
        }
        case HS_CFG_STRMAP: {
            struct hs_strmap *m = p;
            m->keys = dup_strings(m->keys, m->count);
            m->values = dup_strings(m->values, m->count);
            break;
        }
        case HS_CFG_SECTION:
        case HS_CFG_INLINE:
            hs_config_dup_fields(f->sub, p);
            break;
        default:
            break;
        }
    }
}

/* ---- reference ------------------------------------------------------------------------ */

/* Markdown table cells cannot hold a bare "|" or a newline. */
static void put_cell(struct hs_buf *out, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            hs_buf_append(out, "\\|", 2);
        else
            hs_buf_putc(out, *s == '\n' ? ' ' : *s);
    }
}

static void reference_bounds(const struct hs_config_field *f, struct hs_buf *out)
{
    char lo[64], hi[64];
    if (!f->min && !f->max)
        return;
    format_bound(f->type, f->min, lo, sizeof(lo));
    format_bound(f->type, f->max, hi, sizeof(hi));
    if (!has_max(f))
        hs_buf_printf(out, "at least %s", lo);
    else
        hs_buf_printf(out, "%s to %s", lo, hi);
}

static void reference_row(const struct hs_config_field *f, const char *key, struct hs_buf *out)
{
    hs_buf_printf(out, "| `%s` | %s", key, type_name(f->type));
    if (f->type == HS_CFG_ENUM) {
        for (const char *const *c = f->choices; c && *c; c++)
            hs_buf_printf(out, "%s`%s`", c == f->choices ? ": " : ", ", *c);
    }
    hs_buf_printf(out, " | ");
    if (f->def) {
        hs_buf_putc(out, '`');
        put_cell(out, f->def);
        hs_buf_putc(out, '`');
    } else if (f->required) {
        hs_buf_printf(out, "required");
    } else if (f->type == HS_CFG_SECTION && f->has_presence) {
        hs_buf_printf(out, "off unless written");
    }
    hs_buf_printf(out, " | ");
    reference_bounds(f, out);
    hs_buf_printf(out, " | ");
    put_cell(out, f->doc);
    hs_buf_printf(out, " |\n");
}

void hs_config_reference(const struct hs_config_field *fields, const char *prefix,
                         struct hs_buf *out)
{
    if (!fields)
        return;
    prefix = prefix ? prefix : "";
    for (const struct hs_config_field *f = fields; f->name; f++) {
        if (f->type == HS_CFG_INLINE) {
            hs_config_reference(f->sub, prefix, out);
            continue;
        }
        char *key = join(prefix, f->name);
        reference_row(f, key, out);
        if (f->type == HS_CFG_SECTION)
            hs_config_reference(f->sub, key, out);
        free(key);
    }
}
