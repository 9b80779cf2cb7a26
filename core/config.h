/* config.h: the YAML config model. A file is parsed (libyaml) into a tree of nodes that keep
 * their line and column; components declare their keys in field tables (name, type, offsetof,
 * default as a string, bounds, doc) which drive decoding, defaults, unknown-key errors, bounds,
 * `hotspan validate` and docs/reference.md's config reference (redis's static_configs, fluent-bit's
 * config_map). Every error of a file is collected, each as `FILE:LINE:COL: key.path: message`. */
#ifndef HS_CONFIG_H
#define HS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

enum hs_config_node_kind { HS_NODE_SCALAR, HS_NODE_MAP, HS_NODE_SEQ };

struct hs_config_node {
    enum hs_config_node_kind kind;
    const char *file;  /* shared, owned by the document */
    unsigned line;     /* 1-based, of the value */
    unsigned col;      /* 1-based */
    char *value;       /* SCALAR: after ${env:...} expansion */
    bool is_null;      /* SCALAR: `~`, `null`, or empty plain value */
    bool quoted;       /* SCALAR: written in quotes (never null) */
    /* MAP: children are the values, each with its key; SEQ: children without keys. */
    char *key;         /* set on children of a MAP */
    unsigned key_line, key_col;
    struct hs_config_node *child; /* first child */
    struct hs_config_node *next;  /* next sibling */
};

struct hs_config_doc {
    char *file;
    struct hs_config_node *root; /* NULL for an empty document */
};

/* Parse YAML text (the file name is used in messages). Syntax errors, duplicate keys, anchors,
 * tags and ${env:...} problems go into err; returns 0 or HS_EINVAL. */
int hs_config_parse(const char *file, const char *text, size_t len, struct hs_config_doc *doc,
                    struct hs_error *err);
int hs_config_parse_file(const char *path, struct hs_config_doc *doc, struct hs_error *err);
void hs_config_doc_free(struct hs_config_doc *doc);

/* Look up a key of a MAP node; NULL if absent or if `map` is not a MAP. */
const struct hs_config_node *hs_config_get(const struct hs_config_node *map, const char *key);

/* Report an error positioned at `node`: `FILE:LINE:COL: path: message`. */
void hs_config_errorf(struct hs_error *err, const struct hs_config_node *node, const char *path,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

enum hs_config_type {
    HS_CFG_BOOL,     /* bool */
    HS_CFG_INT,      /* int64_t */
    HS_CFG_UINT,     /* uint32_t (bounds-checked into 32 bits) */
    HS_CFG_UINT64,   /* uint64_t */
    HS_CFG_DOUBLE,   /* double */
    HS_CFG_DURATION, /* uint64_t milliseconds: "500ms", "30s", "5m", "1h", or "0" */
    HS_CFG_SIZE,     /* uint64_t bytes: "512MiB", "20MiB", "64KiB", "1GB", or a plain integer */
    HS_CFG_STRING,   /* char * (malloc'd; freed by hs_config_free_fields) */
    HS_CFG_ENUM,     /* char * restricted to .choices */
    HS_CFG_ENDPOINT, /* char * "host:port" (also "[v6]:port", ":port"); port 0..65535 */
    HS_CFG_URL,      /* char * absolute http:// or https:// URL */
    HS_CFG_STRLIST,  /* struct hs_strlist */
    HS_CFG_STRMAP,   /* struct hs_strmap (e.g. headers) */
    HS_CFG_SECTION,  /* a nested map decoded with .sub into the struct at offset */
    HS_CFG_INLINE,   /* .sub's rows written at this level, decoded into the struct at offset
                      * (an embedded struct, e.g. the HTTP listener options every receiver
                      * shares); its name is only for the reader, and its rows cannot be
                      * required */
};

struct hs_strlist {
    char **items;
    size_t count;
};

struct hs_strmap {
    char **keys;
    char **values;
    size_t count;
};

struct hs_config_field {
    const char *name;
    enum hs_config_type type;
    size_t offset;
    const char *def; /* default, in the same syntax a user writes; NULL = none (zero/NULL) */
    int64_t min, max; /* bounds for numbers, durations (ms) and sizes (bytes); 0,0 = none */
    const char *doc;
    const struct hs_config_field *sub;  /* HS_CFG_SECTION */
    const char *const *choices;         /* HS_CFG_ENUM, NULL-terminated */
    bool required;                      /* error if absent */
    /* HS_CFG_SECTION: when has_presence, the bool at presence_offset says whether the key was
     * written (otelcol's `protocols: {http: {}}` enables http, leaving grpc off). */
    bool has_presence;
    size_t presence_offset;
};

/* Decode `map` (may be NULL: all defaults) into `out` by `fields`. Defaults are parsed by the
 * same code as user values. `path` is the key path for messages ("exporters.otlp/tempo").
 * Unknown keys are errors listing the known ones. Returns 0 or HS_EINVAL (errors in err). */
int hs_config_decode(const struct hs_config_field *fields, const struct hs_config_node *map,
                     void *out, const char *path, struct hs_error *err);
/* Free what hs_config_decode allocated in `out` (strings, lists, maps, nested sections). */
void hs_config_free_fields(const struct hs_config_field *fields, void *out);
/* After a struct copy of a decoded config (*dst = *src), gives dst its own copies of what the
 * pointers of `fields` own, so that src and dst are each freed with hs_config_free_fields (an
 * exporter made per backend from one decoded template). Aborts when out of memory. */
void hs_config_dup_fields(const struct hs_config_field *fields, void *out);

/* Scalar parsers shared with the command line and tests. Return 0 or HS_EINVAL. */
int hs_parse_duration_ms(const char *s, uint64_t *out);
int hs_parse_size(const char *s, uint64_t *out);
int hs_parse_endpoint(const char *s, char *host, size_t hostlen, uint16_t *port);

/* Write the reference of a field table as Markdown rows (for `hotspan config-reference`). */
struct hs_buf;
void hs_config_reference(const struct hs_config_field *fields, const char *prefix,
                         struct hs_buf *out);

#endif
