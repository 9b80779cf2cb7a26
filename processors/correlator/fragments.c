/* fragments.c: a small bounded index of recent trace fragments, (tenant, trace id, parent span id)
 * -> children counted by name and by normalized db.statement, to tell a slow span that it made
 * the same call many times (N+1). A ring: the oldest fragment is overwritten first (counted).
 * The tenant is in the key because a trace id crosses tenants when services of two tenants
 * pass trace context: one tenant's span must never be told another's statements. */
#include <stdlib.h>
#include <string.h>

#include "processors/correlator/correlator_int.h"

#define CHAIN_MASK (CORR_FRAG_ENTRIES * 2 - 1)

/* A statement as it came (raw, its hash) and normalized: children repeat a few statements (an
 * ORM's parameterized one), so most are normalized once. */
struct corr_stmt_memo {
    uint64_t raw, hash; /* hash: of the whole normalized text, as groups key it */
    uint32_t len;       /* of text */
    bool used;
    char text[CORR_FRAG_TEXT]; /* the normalized text as a group keeps it */
};

void hs_corr_fragments_init(struct corr_fragments *f, struct corr_stats *stats)
{
    memset(f, 0, sizeof(*f));
    f->stats = stats;
}

void hs_corr_fragments_free(struct corr_fragments *f)
{
    free(f->entries);
    free(f->texts);
    free(f->chains);
    free(f->memo);
    memset(f, 0, sizeof(*f));
}

size_t hs_corr_fragments_bytes(const struct corr_fragments *f)
{
    return f->cap * (sizeof(*f->entries) + sizeof(*f->texts)) +
           (f->memo ? CORR_FRAG_MEMO * sizeof(*f->memo) : 0);
}

/* The C locale's classes (hotspan sets no other), without ctype's lookups through the locale:
 * every statement of every child span passes here. */
static bool is_space(uint8_t c)
{
    return c == ' ' || (unsigned)(c - '\t') < 5; /* \t \n \v \f \r */
}

static bool is_digit(uint8_t c)
{
    return (unsigned)(c - '0') < 10;
}

static bool is_alnum(uint8_t c)
{
    return is_digit(c) || (unsigned)((c | 0x20) - 'a') < 26;
}

size_t hs_corr_normalize_statement(struct hs_str in, char *out, size_t cap)
{
    const uint8_t *p = (const uint8_t *)in.ptr;
    size_t n = 0;
    bool space = false, word = false; /* word: the last byte written is alphanumeric or _ */
    for (size_t i = 0; i < in.len && n + 1 < cap;) {
        uint8_t ch = p[i];
        if (is_space(ch)) {
            space = n > 0;
            i++;
            continue;
        }
        if (space) {
            out[n++] = ' ';
            space = word = false;
            if (n + 1 >= cap)
                break;
        }
        if (ch == '\'' || ch == '"') { /* a quoted string ('' escapes a quote in SQL) */
            size_t j = i + 1;
            for (; j < in.len; j++)
                if (p[j] == ch) {
                    if (j + 1 < in.len && p[j + 1] == ch) {
                        j++;
                        continue;
                    }
                    break;
                }
            out[n++] = '?';
            word = false;
            i = j < in.len ? j + 1 : in.len;
        } else if (is_digit(ch) && !word) { /* a number, not a digit inside a name */
            size_t j = i;
            while (j < in.len && (is_alnum(p[j]) || p[j] == '.'))
                j++;
            out[n++] = '?';
            word = false;
            i = j;
        } else {
            out[n++] = (char)ch;
            word = is_alnum(ch) || ch == '_';
            i++;
        }
    }
    out[n] = '\0';
    return n;
}

static bool frag_is(const struct corr_frag *e, const uint8_t key[CORR_FRAG_KEY], uint64_t h)
{
    return e->hash == h && memcmp(e->key, key, CORR_FRAG_KEY) == 0;
}

/* Children of one parent come together: the entries used last are asked first (their lines
 * are warm), then the chain, whose head is a cold line of a 32 KiB table between batches (perf:
 * most of a lookup's time). */
static struct corr_frag *frag_find(struct corr_fragments *f, const uint8_t key[CORR_FRAG_KEY],
                                   uint64_t h)
{
    if (!f->chains)
        return NULL;
    for (size_t k = 0; k < HS_ARRAY_SIZE(f->recent); k++)
        if (f->recent[k] && frag_is(&f->entries[f->recent[k] - 1], key, h))
            return &f->entries[f->recent[k] - 1];
    for (uint32_t i = f->chains[h & CHAIN_MASK]; i; i = f->entries[i - 1].hnext)
        if (frag_is(&f->entries[i - 1], key, h))
            return &f->entries[i - 1];
    return NULL;
}

/* e was used: first of the recent ones. */
static void frag_used(struct corr_fragments *f, const struct corr_frag *e)
{
    uint32_t v = (uint32_t)(e - f->entries) + 1;
    size_t k = 0;
    while (k + 1 < HS_ARRAY_SIZE(f->recent) && f->recent[k] != v)
        k++;
    for (; k > 0; k--)
        f->recent[k] = f->recent[k - 1];
    f->recent[0] = v;
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
            f->texts = realloc(f->texts, cap * sizeof(*f->texts));
            if (!f->entries || !f->texts)
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
    struct corr_frag *e = &f->entries[idx]; /* its groups are written as they are added */
    memcpy(e->key, key, CORR_FRAG_KEY);
    e->hash = h;
    e->ngroups = 0;
    e->hnext = f->chains[h & CHAIN_MASK];
    f->chains[h & CHAIN_MASK] = idx + 1;
    return e;
}

uint64_t hs_corr_fragments_tenant(struct hs_str tenant)
{
    return corr_hash_bytes(tenant.ptr, tenant.len, 0x84222325cbf29ce4ULL);
}

/* trace id (16), span id (8), the tenant's hash (8) */
static uint64_t make_key(uint64_t tenant, struct hs_str trace_id, struct hs_str span,
                         uint8_t key[CORR_FRAG_KEY])
{
    memset(key, 0, CORR_FRAG_KEY);
    if (trace_id.len == 16 && span.len == 8) { /* ids as they should be: copies of fixed size */
        memcpy(key, trace_id.ptr, 16);
        memcpy(key + 16, span.ptr, 8);
    } else {
        memcpy(key, trace_id.ptr, HS_MIN(trace_id.len, 16));
        memcpy(key + 16, span.ptr, HS_MIN(span.len, 8));
    }
    memcpy(key + 24, &tenant, 8);
    return corr_hash_bytes(key, CORR_FRAG_KEY, 0xcbf29ce484222325ULL);
}

/* Counts a child of entry e in the group of hash h (its name's, or its normalized statement's),
 * made when new. */
static void group_add(struct corr_fragments *f, struct corr_frag *e, uint64_t h, bool stmt,
                      const char *text, size_t len)
{
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
    char *t = f->texts[e - f->entries][g - e->groups];
    len = HS_MIN(len, CORR_FRAG_TEXT - 1);
    memcpy(t, text, len);
    t[len] = '\0';
}

/* The statement normalized: remembered by its hash as it came, else worked out (and kept in
 * place of the one of its slot). */
static const struct corr_stmt_memo *statement_memo(struct corr_fragments *f,
                                                   struct hs_str statement)
{
    uint64_t raw = corr_hash_bytes(statement.ptr, statement.len, 0x5eed57a7e3e47ULL);
    if (!f->memo)
        f->memo = hs_xcalloc(CORR_FRAG_MEMO, sizeof(*f->memo));
    struct corr_stmt_memo *m = &f->memo[raw % CORR_FRAG_MEMO];
    if (m->used && m->raw == raw)
        return m;
    char norm[512];
    size_t n = hs_corr_normalize_statement(statement, norm, sizeof(norm));
    m->used = true;
    m->raw = raw;
    m->hash = corr_hash_bytes(norm, n, 0x1234567ULL);
    m->len = (uint32_t)HS_MIN(n, CORR_FRAG_TEXT - 1);
    memcpy(m->text, norm, m->len);
    return m;
}

void hs_corr_fragments_add(struct corr_fragments *f, uint64_t tenant, struct hs_str trace_id,
                           struct hs_str parent, struct hs_str name, struct hs_str statement)
{
    uint8_t key[CORR_FRAG_KEY];
    uint64_t h = make_key(tenant, trace_id, parent, key);
    struct corr_frag *e = frag_find(f, key, h);
    if (!e)
        e = frag_new(f, key, h);
    frag_used(f, e);
    group_add(f, e, corr_hash_bytes(name.ptr, name.len, 0x7654321ULL), false, name.ptr,
              name.len);
    if (statement.len) {
        const struct corr_stmt_memo *m = statement_memo(f, statement);
        group_add(f, e, m->hash, true, m->text, m->len);
    }
}

struct corr_frag_best hs_corr_fragments_best(struct corr_fragments *f, struct hs_str tenant,
                                             struct hs_str trace_id, struct hs_str span_id)
{
    uint8_t key[CORR_FRAG_KEY];
    struct corr_frag *e =
        frag_find(f, key, make_key(hs_corr_fragments_tenant(tenant), trace_id, span_id, key));
    if (!e)
        return (struct corr_frag_best){0};
    const struct corr_frag_group *best = NULL;
    for (uint32_t i = 0; i < e->ngroups; i++) /* a statement wins a tie: it says more */
        if (!best || e->groups[i].count > best->count ||
            (e->groups[i].count == best->count && e->groups[i].stmt))
            best = &e->groups[i];
    if (!best)
        return (struct corr_frag_best){0};
    return (struct corr_frag_best){best->count, best->stmt,
                                   f->texts[e - f->entries][best - e->groups]};
}
