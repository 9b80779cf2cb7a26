/* fragments.c: a small bounded index of recent trace fragments, (tenant, trace id, parent span id)
 * -> children counted by name and by normalized db.statement, to tell a slow span that it made
 * the same call many times (N+1). A ring: the oldest fragment is overwritten first (counted).
 * The tenant is in the key because a trace id crosses tenants when services of two tenants
 * pass trace context: one tenant's span must never be told another's statements. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "processors/correlator/correlator_int.h"

static uint64_t frag_hash(const uint8_t *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

#define CHAIN_MASK (CORR_FRAG_ENTRIES * 2 - 1)

void hs_corr_fragments_init(struct corr_fragments *f, struct corr_stats *stats)
{
    memset(f, 0, sizeof(*f));
    f->stats = stats;
}

void hs_corr_fragments_free(struct corr_fragments *f)
{
    free(f->entries);
    free(f->chains);
    memset(f, 0, sizeof(*f));
}

size_t hs_corr_normalize_statement(struct hs_str in, char *out, size_t cap)
{
    size_t n = 0;
    bool space = false;
    for (size_t i = 0; i < in.len && n + 1 < cap;) {
        unsigned char ch = (unsigned char)in.ptr[i];
        if (isspace(ch)) {
            space = n > 0;
            i++;
            continue;
        }
        if (space) {
            out[n++] = ' ';
            space = false;
            if (n + 1 >= cap)
                break;
        }
        bool word_before = n > 0 && (isalnum((unsigned char)out[n - 1]) || out[n - 1] == '_');
        if (ch == '\'' || ch == '"') { /* a quoted string ('' escapes a quote in SQL) */
            size_t j = i + 1;
            for (; j < in.len; j++)
                if ((unsigned char)in.ptr[j] == ch) {
                    if (j + 1 < in.len && (unsigned char)in.ptr[j + 1] == ch) {
                        j++;
                        continue;
                    }
                    break;
                }
            out[n++] = '?';
            i = j < in.len ? j + 1 : in.len;
        } else if (isdigit(ch) && !word_before) { /* a number, not a digit inside a name */
            size_t j = i;
            while (j < in.len && (isalnum((unsigned char)in.ptr[j]) || in.ptr[j] == '.'))
                j++;
            out[n++] = '?';
            i = j;
        } else {
            out[n++] = (char)ch;
            i++;
        }
    }
    out[n] = '\0';
    return n;
}

static struct corr_frag *frag_find(struct corr_fragments *f, const uint8_t key[CORR_FRAG_KEY],
                                   uint64_t h)
{
    if (!f->chains)
        return NULL;
    for (uint32_t i = f->chains[h & CHAIN_MASK]; i; i = f->entries[i - 1].hnext)
        if (f->entries[i - 1].hash == h && memcmp(f->entries[i - 1].key, key, CORR_FRAG_KEY) == 0)
            return &f->entries[i - 1];
    return NULL;
}

static void chain_unlink(struct corr_fragments *f, uint32_t idx)
{
    uint32_t *pp = &f->chains[f->entries[idx].hash & CHAIN_MASK];
    while (*pp != idx + 1)
        pp = &f->entries[*pp - 1].hnext;
    *pp = f->entries[idx].hnext;
}

static struct corr_frag *frag_new(struct corr_fragments *f, const uint8_t key[CORR_FRAG_KEY],
                                  uint64_t h)
{
    if (!f->chains)
        f->chains = hs_xcalloc(CORR_FRAG_ENTRIES * 2, sizeof(*f->chains));
    uint32_t idx;
    if (f->n < CORR_FRAG_ENTRIES) {
        if (f->n == f->cap) { /* grows with use, so a quiet sidecar stays small */
            uint32_t cap = f->cap ? f->cap * 2 : 64;
            f->entries = realloc(f->entries, cap * sizeof(*f->entries));
            if (!f->entries)
                abort();
            f->cap = cap;
        }
        idx = f->n++;
    } else {
        idx = f->head;
        f->head = (f->head + 1) % CORR_FRAG_ENTRIES;
        chain_unlink(f, idx);
        hs_counter_add(f->stats->ev_fragment, 1);
    }
    struct corr_frag *e = &f->entries[idx];
    memset(e, 0, sizeof(*e));
    memcpy(e->key, key, CORR_FRAG_KEY);
    e->hash = h;
    e->hnext = f->chains[h & CHAIN_MASK];
    f->chains[h & CHAIN_MASK] = idx + 1;
    return e;
}

/* trace id (16), span id (8), a hash of the tenant (8) */
static uint64_t make_key(struct hs_str tenant, struct hs_str trace_id, struct hs_str span,
                         uint8_t key[CORR_FRAG_KEY])
{
    memset(key, 0, CORR_FRAG_KEY);
    memcpy(key, trace_id.ptr, HS_MIN(trace_id.len, 16));
    memcpy(key + 16, span.ptr, HS_MIN(span.len, 8));
    uint64_t th = frag_hash((const uint8_t *)tenant.ptr, tenant.len, 0x84222325cbf29ce4ULL);
    memcpy(key + 24, &th, 8);
    return frag_hash(key, CORR_FRAG_KEY, 0xcbf29ce484222325ULL);
}

static void group_add(struct corr_frag *e, const char *text, size_t len, bool stmt)
{
    uint64_t h = frag_hash((const uint8_t *)text, len, stmt ? 0x1234567ULL : 0x7654321ULL);
    for (uint32_t i = 0; i < e->ngroups; i++)
        if (e->groups[i].hash == h && e->groups[i].stmt == stmt) {
            e->groups[i].count++;
            return;
        }
    struct corr_frag_group *g;
    if (e->ngroups < CORR_FRAG_GROUPS) {
        g = &e->groups[e->ngroups++];
    } else { /* a parent with many kinds of children: the least seen group gives way */
        g = &e->groups[0];
        for (uint32_t i = 1; i < e->ngroups; i++)
            if (e->groups[i].count < g->count)
                g = &e->groups[i];
        if (g->count > 1)
            return;
    }
    g->hash = h;
    g->count = 1;
    g->stmt = stmt;
    len = HS_MIN(len, CORR_FRAG_TEXT - 1);
    memcpy(g->text, text, len);
    g->text[len] = '\0';
}

void hs_corr_fragments_add(struct corr_fragments *f, struct hs_str tenant, struct hs_str trace_id,
                           struct hs_str parent, struct hs_str name, struct hs_str statement)
{
    uint8_t key[CORR_FRAG_KEY];
    uint64_t h = make_key(tenant, trace_id, parent, key);
    struct corr_frag *e = frag_find(f, key, h);
    if (!e)
        e = frag_new(f, key, h);
    group_add(e, name.ptr, name.len, false);
    if (statement.len) {
        char norm[512];
        size_t n = hs_corr_normalize_statement(statement, norm, sizeof(norm));
        group_add(e, norm, n, true);
    }
}

const struct corr_frag_group *hs_corr_fragments_best(struct corr_fragments *f, struct hs_str tenant,
                                                     struct hs_str trace_id, struct hs_str span_id)
{
    uint8_t key[CORR_FRAG_KEY];
    struct corr_frag *e = frag_find(f, key, make_key(tenant, trace_id, span_id, key));
    if (!e)
        return NULL;
    const struct corr_frag_group *best = NULL;
    for (uint32_t i = 0; i < e->ngroups; i++) /* a statement wins a tie: it says more */
        if (!best || e->groups[i].count > best->count ||
            (e->groups[i].count == best->count && e->groups[i].stmt))
            best = &e->groups[i];
    return best;
}
