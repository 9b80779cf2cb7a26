/* fuzz_config.c: libFuzzer target for the config loader: any bytes are parsed as YAML, decoded
 * against a nested table of every field type, and freed; the scalar parsers see them too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/errors.h"

struct fz_inner {
    char *endpoint;
    uint64_t timeout_ms;
    struct hs_strlist list;
    struct fz_leaf {
        double x;
        char *s;
    } leaf;
};

struct fz_cfg {
    bool b;
    int64_t i;
    uint32_t u;
    uint64_t u64;
    double d;
    uint64_t dur;
    uint64_t size;
    char *str;
    char *en;
    char *ep;
    char *url;
    struct hs_strlist list;
    struct hs_strmap map;
    bool inner_on;
    struct fz_inner inner;
};

static const char *const choices[] = {"a", "bb", "ccc", NULL};

static const struct hs_config_field leaf_fields[] = {
    {"x", HS_CFG_DOUBLE, offsetof(struct fz_leaf, x), "1.5", .min = -10, .max = 10},
    {"s", HS_CFG_STRING, offsetof(struct fz_leaf, s), NULL, .required = true},
    {0},
};

static const struct hs_config_field inner_fields[] = {
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct fz_inner, endpoint), ":4318"},
    {"timeout", HS_CFG_DURATION, offsetof(struct fz_inner, timeout_ms), "1s", .min = 1,
     .max = 60000},
    {"list", HS_CFG_STRLIST, offsetof(struct fz_inner, list), "[x, y]"},
    {"leaf", HS_CFG_SECTION, offsetof(struct fz_inner, leaf), .sub = leaf_fields},
    {0},
};

static const struct hs_config_field fz_fields[] = {
    {"b", HS_CFG_BOOL, offsetof(struct fz_cfg, b), "on"},
    {"i", HS_CFG_INT, offsetof(struct fz_cfg, i), "-1", .min = -1000, .max = 1000},
    {"u", HS_CFG_UINT, offsetof(struct fz_cfg, u), "7", .min = 1},
    {"u64", HS_CFG_UINT64, offsetof(struct fz_cfg, u64), NULL},
    {"d", HS_CFG_DOUBLE, offsetof(struct fz_cfg, d), "0.25"},
    {"dur", HS_CFG_DURATION, offsetof(struct fz_cfg, dur), "30s"},
    {"size", HS_CFG_SIZE, offsetof(struct fz_cfg, size), "1MiB", .min = 1, .max = 1 << 30},
    {"str", HS_CFG_STRING, offsetof(struct fz_cfg, str), "s"},
    {"en", HS_CFG_ENUM, offsetof(struct fz_cfg, en), "bb", .choices = choices},
    {"ep", HS_CFG_ENDPOINT, offsetof(struct fz_cfg, ep), NULL},
    {"url", HS_CFG_URL, offsetof(struct fz_cfg, url), NULL},
    {"list", HS_CFG_STRLIST, offsetof(struct fz_cfg, list), NULL},
    {"map", HS_CFG_STRMAP, offsetof(struct fz_cfg, map), NULL, .required = true},
    {"inner", HS_CFG_SECTION, offsetof(struct fz_cfg, inner), .sub = inner_fields,
     .has_presence = true, .presence_offset = offsetof(struct fz_cfg, inner_on)},
    {0},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hs_config_doc doc;
    struct hs_error err = {0};
    hs_config_parse("fuzz.yaml", (const char *)data, size, &doc, &err);
    struct fz_cfg cfg;
    hs_config_decode(fz_fields, doc.root, &cfg, "fz", &err);
    /* a component decodes its own subtree too */
    const struct hs_config_node *inner = hs_config_get(doc.root, "inner");
    struct fz_inner in;
    hs_config_decode(inner_fields, inner, &in, "fz.inner", &err);
    hs_config_free_fields(inner_fields, &in);
    hs_config_free_fields(fz_fields, &cfg);
    hs_config_doc_free(&doc);
    hs_error_free(&err);

    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    uint64_t v;
    char host[64];
    uint16_t port;
    hs_parse_duration_ms(s, &v);
    hs_parse_size(s, &v);
    hs_parse_endpoint(s, host, sizeof(host), &port);
    free(s);
    return 0;
}
