/* config.c: the YAML config tree: libyaml events become hs_config_node with 1-based positions,
 * ${env:...} is expanded, and errors are positioned. Decoding by field tables is in
 * config_decode.c; the scalar syntaxes (durations, sizes, endpoints) are in config_scalar.c. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "buf.h"
#include "common.h"
#include "config_internal.h"

/* Real configs nest a handful of levels; the bound keeps a hostile file off our stack. */
#define MAX_DEPTH 64
#define MAX_FILE_SIZE (64u << 20)

struct parser {
    yaml_parser_t yp;
    yaml_event_t ev;
    bool have_ev;
    bool stop;        /* libyaml cannot go on after a syntax error, nor we past MAX_DEPTH */
    const char *file; /* doc->file */
    const char *text;
    size_t len;
    struct hs_error *err;
    size_t nerr;        /* errors this parse added */
    struct hs_buf path; /* key path of the node being read, NUL-terminated */
};

/* ---- errors --------------------------------------------------------------------------- */

void hs_config_verrorf(struct hs_error *err, const struct hs_config_node *node, const char *path,
                       const char *fmt, va_list ap)
{
    struct hs_buf b = {0};
    if (node && node->file)
        hs_buf_printf(&b, "%s:%u:%u: ", node->file, node->line, node->col);
    if (path && *path)
        hs_buf_printf(&b, "%s: ", path);
    hs_buf_vprintf(&b, fmt, ap);
    hs_error_addf(err, "%s", b.data ? (const char *)b.data : "");
    hs_buf_free(&b);
}

void hs_config_errorf(struct hs_error *err, const struct hs_config_node *node, const char *path,
                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_config_verrorf(err, node, path, fmt, ap);
    va_end(ap);
}

static const char *path_str(const struct parser *p)
{
    return p->path.len ? (const char *)p->path.data : "";
}

__attribute__((format(printf, 5, 6))) static void
perr_at(struct parser *p, unsigned line, unsigned col, bool with_path, const char *fmt, ...)
{
    struct hs_config_node at = {.file = p->file, .line = line, .col = col};
    va_list ap;
    va_start(ap, fmt);
    hs_config_verrorf(p->err, &at, with_path ? path_str(p) : NULL, fmt, ap);
    va_end(ap);
    p->nerr++;
}

#define perr(p, mark, ...)                                                                         \
    perr_at((p), (unsigned)(mark).line + 1, (unsigned)(mark).column + 1, true, __VA_ARGS__)

/* Reader errors (bad UTF-8, control characters) carry a byte offset, not a mark. */
static void offset_to_pos(const struct parser *p, size_t off, unsigned *line, unsigned *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < p->len; i++) {
        if (p->text[i] == '\n') {
            ++*line;
            *col = 1;
        } else if (((unsigned char)p->text[i] & 0xC0) != 0x80) {
            ++*col;
        }
    }
}

static void syntax_error(struct parser *p)
{
    const yaml_parser_t *y = &p->yp;
    const char *problem = y->problem ? y->problem : "invalid YAML";
    unsigned line, col;
    if (y->error == YAML_MEMORY_ERROR) {
        perr_at(p, 1, 1, false, "out of memory while parsing");
    } else if (y->error == YAML_READER_ERROR) {
        offset_to_pos(p, y->problem_offset, &line, &col);
        if (y->problem_value >= 0)
            perr_at(p, line, col, false, "%s (#x%X)", problem, (unsigned)y->problem_value);
        else
            perr_at(p, line, col, false, "%s", problem);
    } else if (y->context) {
        perr_at(p, (unsigned)y->problem_mark.line + 1, (unsigned)y->problem_mark.column + 1, false,
                "%s (%s at line %u, column %u)", problem, y->context,
                (unsigned)y->context_mark.line + 1, (unsigned)y->context_mark.column + 1);
    } else {
        perr_at(p, (unsigned)y->problem_mark.line + 1, (unsigned)y->problem_mark.column + 1, false,
                "%s", problem);
    }
}

/* ---- events and paths ----------------------------------------------------------------- */

static bool next(struct parser *p)
{
    if (p->have_ev) {
        yaml_event_delete(&p->ev);
        p->have_ev = false;
    }
    if (p->stop)
        return false;
    if (!yaml_parser_parse(&p->yp, &p->ev)) {
        syntax_error(p);
        p->stop = true;
        return false;
    }
    p->have_ev = true;
    return true;
}

static size_t path_push_key(struct parser *p, const char *key)
{
    size_t old = p->path.len;
    hs_buf_printf(&p->path, "%s%s", old ? "." : "", key);
    return old;
}

static size_t path_push_index(struct parser *p, size_t i)
{
    size_t old = p->path.len;
    hs_buf_printf(&p->path, "[%zu]", i);
    return old;
}

static void path_pop(struct parser *p, size_t old)
{
    p->path.len = old;
    if (p->path.data)
        p->path.data[old] = '\0';
}

/* Skips the rest of the node whose first event is current. */
static void skip_node(struct parser *p)
{
    int level = 0;
    do {
        switch (p->ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            level++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            level--;
            break;
        default:
            break;
        }
    } while (level > 0 && next(p));
}

/* ---- ${env:...} ----------------------------------------------------------------------- */

static bool is_env_name(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* One `${...}` whose inside is in[0..n): appends its value, or reports why it is not one. */
static bool expand_one(struct parser *p, const yaml_mark_t *m, const char *in, size_t n,
                       struct hs_buf *out)
{
    if (n < 4 || memcmp(in, "env:", 4) != 0) {
        size_t colon = strcspn(in, ":");
        if (colon < n && is_env_name(in, colon))
            perr(p, *m, "\"${%.*s}\": unsupported provider \"%.*s\" (only ${env:NAME})", (int)n, in,
                 (int)colon, in);
        else
            perr(p, *m, "\"${%.*s}\" is not supported (write ${env:NAME})", (int)n, in);
        return false;
    }
    const char *name = in + 4;
    size_t rest = n - 4;
    size_t nlen = 0;
    while (nlen < rest && name[nlen] != ':')
        nlen++;
    if (!is_env_name(name, nlen)) {
        perr(p, *m, "\"${%.*s}\": bad environment variable name \"%.*s\"", (int)n, in, (int)nlen,
             name);
        return false;
    }
    const char *def = NULL;
    size_t dlen = 0;
    if (nlen < rest) {
        if (rest - nlen < 2 || name[nlen + 1] != '-') {
            perr(p, *m, "\"${%.*s}\": expected \"}\" or \":-default\" after the name", (int)n, in);
            return false;
        }
        def = name + nlen + 2;
        dlen = rest - nlen - 2;
    }
    char var[256];
    const char *v = NULL;
    if (nlen < sizeof(var)) {
        memcpy(var, name, nlen);
        var[nlen] = '\0';
        v = getenv(var);
    }
    if (v && *v)
        hs_buf_append(out, v, strlen(v));
    else if (def)
        hs_buf_append(out, def, dlen);
    return true; /* unset without a default is empty, as in the OpenTelemetry Collector */
}

/* A new string: raw with `${env:NAME}`, `${env:NAME:-default}` and `$$` replaced. */
static char *expand(struct parser *p, const yaml_mark_t *m, const char *raw, size_t n)
{
    if (!memchr(raw, '$', n))
        return hs_xstrndup(raw, n);
    struct hs_buf out = {0};
    bool ok = true;
    for (size_t i = 0; i < n && ok;) {
        if (raw[i] != '$' || i + 1 == n || (raw[i + 1] != '$' && raw[i + 1] != '{')) {
            hs_buf_putc(&out, raw[i++]);
        } else if (raw[i + 1] == '$') {
            hs_buf_putc(&out, '$');
            i += 2;
        } else {
            const char *close = memchr(raw + i + 2, '}', n - i - 2);
            if (!close) {
                perr(p, *m, "unterminated \"${\" (missing \"}\")");
                ok = false;
                break;
            }
            ok = expand_one(p, m, raw + i + 2, (size_t)(close - raw - i - 2), &out);
            i = (size_t)(close - raw) + 1;
        }
    }
    char *s =
        ok ? hs_xstrndup(out.data ? (const char *)out.data : "", out.len) : hs_xstrndup(raw, n);
    hs_buf_free(&out);
    return s;
}

/* ---- nodes ---------------------------------------------------------------------------- */

static void node_free(struct hs_config_node *n)
{
    while (n) {
        struct hs_config_node *next_sibling = n->next;
        node_free(n->child);
        free(n->value);
        free(n->key);
        free(n);
        n = next_sibling;
    }
}

static struct hs_config_node *node_new(struct parser *p, enum hs_config_node_kind kind,
                                       const yaml_mark_t *m)
{
    struct hs_config_node *n = hs_xcalloc(1, sizeof(*n));
    n->kind = kind;
    n->file = p->file;
    n->line = (unsigned)m->line + 1;
    n->col = (unsigned)m->column + 1;
    return n;
}

/* Anchors and aliases would make one key mean two places; tags would mean other types. */
static void check_props(struct parser *p, const yaml_char_t *anchor, const yaml_char_t *tag,
                        const yaml_mark_t *m)
{
    if (anchor)
        perr(p, *m, "anchors (&%s) are not supported", (const char *)anchor);
    if (tag)
        perr(p, *m, "tags (%s) are not supported", (const char *)tag);
}

static bool is_null_word(const char *s)
{
    return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

static struct hs_config_node *read_scalar(struct parser *p)
{
    const yaml_event_t *ev = &p->ev;
    const char *raw = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    check_props(p, ev->data.scalar.anchor, ev->data.scalar.tag, &ev->start_mark);
    if (memchr(raw, '\0', len)) {
        perr(p, ev->start_mark, "NUL characters are not allowed");
        len = strlen(raw);
    }
    struct hs_config_node *n = node_new(p, HS_NODE_SCALAR, &ev->start_mark);
    yaml_scalar_style_t style = ev->data.scalar.style;
    n->quoted =
        style == YAML_SINGLE_QUOTED_SCALAR_STYLE || style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    bool plain = style == YAML_PLAIN_SCALAR_STYLE;
    if (plain && is_null_word(raw)) {
        n->is_null = true;
        n->value = hs_xstrdup("");
        return n;
    }
    n->value = expand(p, &ev->start_mark, raw, len);
    n->is_null = plain && !n->value[0]; /* `key: ${env:UNSET}` reads as `key:` */
    return n;
}

static struct hs_config_node *read_node(struct parser *p, unsigned depth);

static bool too_deep(struct parser *p, unsigned depth)
{
    if (depth < MAX_DEPTH)
        return false;
    /* no path here: it would be MAX_DEPTH segments long */
    perr_at(p, (unsigned)p->ev.start_mark.line + 1, (unsigned)p->ev.start_mark.column + 1, false,
            "nested deeper than %d levels", MAX_DEPTH);
    p->stop = true;
    return true;
}

static struct hs_config_node *read_seq(struct parser *p, unsigned depth)
{
    check_props(p, p->ev.data.sequence_start.anchor, p->ev.data.sequence_start.tag,
                &p->ev.start_mark);
    if (too_deep(p, depth))
        return NULL;
    struct hs_config_node *n = node_new(p, HS_NODE_SEQ, &p->ev.start_mark);
    struct hs_config_node **tail = &n->child;
    for (size_t i = 0; next(p) && p->ev.type != YAML_SEQUENCE_END_EVENT; i++) {
        size_t old = path_push_index(p, i);
        struct hs_config_node *c = read_node(p, depth + 1);
        path_pop(p, old);
        if (c) {
            *tail = c;
            tail = &c->next;
        }
    }
    return n;
}

/* The key whose first event is current, or NULL (reported, and its events skipped). */
static char *read_key(struct parser *p)
{
    const yaml_event_t *ev = &p->ev;
    if (ev->type != YAML_SCALAR_EVENT) {
        perr(p, ev->start_mark, "keys must be plain strings, not %s",
             ev->type == YAML_ALIAS_EVENT           ? "aliases"
             : ev->type == YAML_MAPPING_START_EVENT ? "maps"
                                                    : "sequences");
        skip_node(p);
        return NULL;
    }
    check_props(p, ev->data.scalar.anchor, ev->data.scalar.tag, &ev->start_mark);
    const char *raw = (const char *)ev->data.scalar.value;
    if (ev->data.scalar.length == 0 || memchr(raw, '\0', ev->data.scalar.length)) {
        perr(p, ev->start_mark, "%s", ev->data.scalar.length ? "NUL in a key" : "empty key");
        return NULL;
    }
    return hs_xstrndup(raw, ev->data.scalar.length);
}

static bool is_duplicate(struct parser *p, const struct hs_config_node *map, const char *key,
                         const yaml_mark_t *m)
{
    for (const struct hs_config_node *c = map->child; c; c = c->next) {
        if (strcmp(c->key, key) == 0) {
            perr(p, *m, "duplicate key (first at line %u)", c->key_line);
            return true;
        }
    }
    return false;
}

static struct hs_config_node *read_map(struct parser *p, unsigned depth)
{
    check_props(p, p->ev.data.mapping_start.anchor, p->ev.data.mapping_start.tag,
                &p->ev.start_mark);
    if (too_deep(p, depth))
        return NULL;
    struct hs_config_node *n = node_new(p, HS_NODE_MAP, &p->ev.start_mark);
    struct hs_config_node **tail = &n->child;
    while (next(p) && p->ev.type != YAML_MAPPING_END_EVENT) {
        yaml_mark_t km = p->ev.start_mark;
        char *key = read_key(p);
        if (!next(p)) {
            free(key);
            break;
        }
        if (!key) {
            skip_node(p);
            continue;
        }
        size_t old = path_push_key(p, key);
        bool dup = is_duplicate(p, n, key, &km);
        struct hs_config_node *v = read_node(p, depth + 1);
        path_pop(p, old);
        if (!v || dup) {
            node_free(v);
            free(key);
            continue;
        }
        v->key = key;
        v->key_line = (unsigned)km.line + 1;
        v->key_col = (unsigned)km.column + 1;
        *tail = v;
        tail = &v->next;
    }
    return n;
}

/* Reads the node whose first event is current; leaves its last event current. */
static struct hs_config_node *read_node(struct parser *p, unsigned depth)
{
    switch (p->ev.type) {
    case YAML_SCALAR_EVENT:
        return read_scalar(p);
    case YAML_SEQUENCE_START_EVENT:
        return read_seq(p, depth);
    case YAML_MAPPING_START_EVENT:
        return read_map(p, depth);
    case YAML_ALIAS_EVENT:
        perr(p, p->ev.start_mark, "aliases (*%s) are not supported",
             (const char *)p->ev.data.alias.anchor);
        return NULL;
    default:
        perr(p, p->ev.start_mark, "unexpected YAML event %d", (int)p->ev.type);
        p->stop = true;
        return NULL;
    }
}

/* ---- documents ------------------------------------------------------------------------ */

static void read_stream(struct parser *p, struct hs_config_doc *doc)
{
    int docs = 0;
    while (next(p) && p->ev.type != YAML_STREAM_END_EVENT) {
        switch (p->ev.type) {
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                perr(p, p->ev.start_mark, "only one YAML document is allowed");
                p->stop = true;
            }
            break;
        default:
            doc->root = read_node(p, 0);
            break;
        }
    }
    if (doc->root && doc->root->kind == HS_NODE_SCALAR && doc->root->is_null) {
        node_free(doc->root); /* `---` alone or `~`: nothing configured */
        doc->root = NULL;
    }
}

int hs_config_parse(const char *file, const char *text, size_t len, struct hs_config_doc *doc,
                    struct hs_error *err)
{
    *doc = (struct hs_config_doc){.file = hs_xstrdup(file ? file : "<config>")};
    struct parser p = {
        .file = doc->file, .text = text ? text : "", .len = text ? len : 0, .err = err};
    if (!yaml_parser_initialize(&p.yp)) {
        hs_error_addf(err, "%s: out of memory", doc->file);
        return HS_ENOMEM;
    }
    yaml_parser_set_input_string(&p.yp, (const unsigned char *)p.text, p.len);
    read_stream(&p, doc);
    if (p.have_ev)
        yaml_event_delete(&p.ev);
    yaml_parser_delete(&p.yp);
    hs_buf_free(&p.path);
    /* The tree stays, even with errors, so a caller may report more; it frees it either way. */
    return p.nerr ? HS_EINVAL : 0;
}

int hs_config_parse_file(const char *path, struct hs_config_doc *doc, struct hs_error *err)
{
    *doc = (struct hs_config_doc){0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        hs_error_addf(err, "%s: cannot read: %s", path, strerror(errno));
        return HS_EINVAL;
    }
    struct hs_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len <= MAX_FILE_SIZE)
        hs_buf_append(&b, chunk, n);
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    int rc;
    if (rerr)
        hs_error_addf(err, "%s: cannot read: %s", path, strerror(rerr));
    else if (b.len > MAX_FILE_SIZE)
        hs_error_addf(err, "%s: cannot read: larger than %u MiB", path, MAX_FILE_SIZE >> 20);
    if (rerr || b.len > MAX_FILE_SIZE)
        rc = HS_EINVAL;
    else
        rc = hs_config_parse(path, (const char *)b.data, b.len, doc, err);
    hs_buf_free(&b);
    return rc;
}

void hs_config_doc_free(struct hs_config_doc *doc)
{
    if (!doc)
        return;
    node_free(doc->root);
    free(doc->file);
    *doc = (struct hs_config_doc){0};
}

const struct hs_config_node *hs_config_get(const struct hs_config_node *map, const char *key)
{
    if (!map || map->kind != HS_NODE_MAP)
        return NULL;
    for (const struct hs_config_node *c = map->child; c; c = c->next)
        if (strcmp(c->key, key) == 0)
            return c;
    return NULL;
}
