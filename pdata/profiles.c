/* profiles.c: a profile (raw bytes, labels, summary in one arena) and the refcounted batch. */
#include "pdata/profiles.h"

#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/errors.h"

struct hs_profile *hs_profile_new(void)
{
    struct hs_arena *a = hs_arena_new(4096, 0);
    if (!a)
        return NULL;
    struct hs_profile *p = hs_arena_alloc(a, sizeof(*p));
    if (!p) {
        hs_arena_free(a);
        return NULL;
    }
    memset(p, 0, sizeof(*p));
    p->arena = a;
    return p;
}

void hs_profile_free(struct hs_profile *p)
{
    if (p) {
        free(p->labels);
        hs_arena_free(p->arena); /* p itself lives in it */
    }
}

int hs_profile_set_raw(struct hs_profile *p, const void *data, size_t len)
{
    uint8_t *raw = hs_arena_alloc(p->arena, len ? len : 1);
    if (!raw)
        return HS_ENOMEM;
    if (len) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(raw, data, len);
    p->raw = raw;
    p->raw_len = len;
    return 0;
}

const char *hs_profile_strdup(struct hs_profile *p, const char *s, size_t len)
{
    return hs_arena_strndup(p->arena, s, len);
}

static int label_cmp(const char *a, const char *b, size_t blen)
{
    int c = strncmp(a, b, blen);
    if (c != 0)
        return c;
    return a[blen] != '\0'; /* a is longer: it sorts after b */
}

int hs_profile_set_label(struct hs_profile *p, const char *name, size_t name_len,
                         const char *value, size_t value_len)
{
    const char *v = hs_arena_strndup(p->arena, value, value_len);
    if (!v)
        return HS_ENOMEM;
    uint32_t lo = 0, hi = p->nlabels;
    while (lo < hi) { /* first label not below name */
        uint32_t mid = lo + (hi - lo) / 2;
        if (label_cmp(p->labels[mid].name, name, name_len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->nlabels && label_cmp(p->labels[lo].name, name, name_len) == 0) {
        p->labels[lo].value = v;
        goto done;
    }
    if (p->nlabels == p->cap_labels) {
        uint32_t cap = p->cap_labels ? p->cap_labels * 2 : 8;
        struct hs_label *l = realloc(p->labels, cap * sizeof(*l));
        if (!l)
            return HS_ENOMEM;
        p->labels = l;
        p->cap_labels = cap;
    }
    const char *n = hs_arena_strndup(p->arena, name, name_len);
    if (!n)
        return HS_ENOMEM;
    memmove(&p->labels[lo + 1], &p->labels[lo], (p->nlabels - lo) * sizeof(*p->labels));
    p->labels[lo] = (struct hs_label){n, v};
    p->nlabels++;
done:
    if (name_len == 12 && memcmp(name, "service_name", 12) == 0)
        p->service = v;
    return 0;
}

const char *hs_profile_label(const struct hs_profile *p, const char *name)
{
    uint32_t lo = 0, hi = p->nlabels;
    size_t n = strlen(name);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = label_cmp(p->labels[mid].name, name, n);
        if (c == 0)
            return p->labels[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

struct hs_profiles *hs_profiles_new(const char *tenant)
{
    struct hs_profiles *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->refs = 1;
    if (tenant && !(b->tenant = strdup(tenant))) {
        free(b);
        return NULL;
    }
    return b;
}

int hs_profiles_add(struct hs_profiles *b, struct hs_profile *p)
{
    if (b->count == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 4;
        struct hs_profile **items = realloc(b->items, cap * sizeof(*items));
        if (!items) {
            hs_profile_free(p);
            return HS_ENOMEM;
        }
        b->items = items;
        b->cap = cap;
    }
    b->items[b->count++] = p;
    b->bytes += p->raw_len;
    return 0;
}

/* Not atomic, like hs_traces: a batch is shared only within one loop. */
struct hs_profiles *hs_profiles_ref(struct hs_profiles *b)
{
    b->refs++;
    return b;
}

void hs_profiles_unref(struct hs_profiles *b)
{
    if (!b || --b->refs > 0)
        return;
    for (uint32_t i = 0; i < b->count; i++)
        hs_profile_free(b->items[i]);
    free(b->items);
    free(b->request);
    free(b->tenant);
    free(b);
}

static void *ops_ref(void *b)
{
    return hs_profiles_ref(b);
}

static void ops_unref(void *b)
{
    hs_profiles_unref(b);
}

const struct hs_batch_ops hs_profiles_ops = {HS_SIGNAL_PROFILES, ops_ref, ops_unref};
