/* debug.c: the debug exporter (otelcol's debug): a human summary of each batch on stdout.
 * basic: one line per batch; normal: also one line per span (read by the wire scanner without
 * decoding) or per profile; detailed: also the batch as one line of OTLP/JSON, or a profile's
 * labels and its top functions (and an OTLP profiles request as OTLP/JSON); slow: nothing but
 * one readable line per slow span the correlator enriched (what `hotspan demo` shows). */
#include "exporters/debug.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/semconv.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"

/* slow is not a step on the basic..detailed scale but a different view, so it comes last and
 * is tested for by name, never with >= */
enum verbosity { VERBOSITY_BASIC, VERBOSITY_NORMAL, VERBOSITY_DETAILED, VERBOSITY_SLOW };

static const char *const verbosity_choices[] = {"basic", "normal", "detailed", "slow", NULL};

struct debug_config {
    char *verbosity;
};

static const struct hs_config_field debug_fields[] = {
    {"verbosity", HS_CFG_ENUM, offsetof(struct debug_config, verbosity), "basic",
     .choices = verbosity_choices,
     .doc = "basic: a line per batch; normal: and a line per span or profile; detailed: and the "
            "OTLP/JSON, or a profile's labels and top functions; slow: only a readable line per "
            "slow span the correlator annotated (service, span, duration, where the CPU went, "
            "N+1)"},
    {0},
};

struct debug_exp {
    struct hs_component base;
    struct debug_config conf;
    enum verbosity level;
    FILE *out;
    struct hs_buf text; /* one batch's lines, written with one fwrite */
    bool started, closing;
    struct hs_metrics *metrics;
    struct hs_counter *sent, *failed;                   /* spans */
    struct hs_counter *sent_profiles, *failed_profiles; /* profiles */
};

static int debug_create(const struct hs_config_node *cfg, const char *path,
                        struct hs_component **out, struct hs_error *err)
{
    struct debug_exp *d = hs_xcalloc(1, sizeof(*d));
    if (hs_config_decode(debug_fields, cfg, &d->conf, path, err) != 0) {
        hs_config_free_fields(debug_fields, &d->conf);
        free(d);
        return HS_EINVAL;
    }
    for (size_t i = 0; verbosity_choices[i]; i++)
        if (strcmp(d->conf.verbosity, verbosity_choices[i]) == 0)
            d->level = (enum verbosity)i;
    d->out = stdout;
    *out = &d->base;
    return 0;
}

void hs_exporter_debug_set_output(struct hs_component *c, FILE *out)
{
    hs_container_of(c, struct debug_exp, base)->out = out;
}

static const char *kind_name(uint32_t kind)
{
    static const char *const names[] = {"unspecified", "internal", "server",
                                        "client",      "producer", "consumer"};
    return kind < HS_ARRAY_SIZE(names) ? names[kind] : NULL;
}

static const char *status_name(uint32_t code)
{
    static const char *const names[] = {"unset", "ok", "error"};
    return code < HS_ARRAY_SIZE(names) ? names[code] : NULL;
}

/* Names come from clients: control bytes (a newline could forge a line of ours) become '?',
 * and an empty name is shown as "-" so the fields stay countable. */
static int put_name(struct hs_buf *b, struct hs_str s)
{
    if (s.len == 0)
        return hs_buf_putc(b, '-');
    size_t start = b->len;
    if (hs_buf_append(b, s.ptr, s.len) != 0)
        return HS_ENOMEM;
    for (size_t i = start; i < b->len; i++)
        if (b->data[i] < 0x20 || b->data[i] == 0x7f)
            b->data[i] = '?';
    return 0;
}

static int put_hex(struct hs_buf *b, const char *label, struct hs_str id)
{
    static const char digits[] = "0123456789abcdef";
    int rc = hs_buf_printf(b, " %s=", label);
    if (id.len == 0)
        return rc | hs_buf_putc(b, '-');
    for (size_t i = 0; i < id.len; i++) {
        rc |= hs_buf_putc(b, digits[(unsigned char)id.ptr[i] >> 4]);
        rc |= hs_buf_putc(b, digits[id.ptr[i] & 15]);
    }
    return rc;
}

static int put_cstr(struct hs_buf *b, const char *s)
{
    return put_name(b, s ? (struct hs_str){s, strlen(s)} : (struct hs_str){"", 0});
}

struct span_ctx {
    struct hs_buf *b;
    const uint8_t *data; /* the batch's bytes, for attribute lookups */
};

/* The correlator's verdict on a slow span, when it left one: what an operator reading the
 * console wants to see without switching to `detailed`. */
static int put_annotations(struct hs_buf *b, const uint8_t *data, const struct hs_span_view *s)
{
    static const struct {
        const char *attr, *label;
    } shown[] = {
        {HS_ATTR_SLOW_REASON, "slow"},        {HS_ATTR_PROFILE_MATCH, "match"},
        {HS_ATTR_PROFILE_MATCH_REASON, "why"}, {HS_ATTR_PROFILE_HOT_PATH, "hot_path"},
        {HS_ATTR_PATTERN, "pattern"},         {HS_ATTR_N_PLUS_ONE_STATEMENT, "statement"},
    };
    struct hs_str v;
    if (s->attributes == 0 || !hs_span_attr_str(data, s, HS_ATTR_PROFILE_MATCH, &v))
        return 0;
    int rc = 0;
    for (size_t i = 0; i < HS_ARRAY_SIZE(shown); i++) {
        if (!hs_span_attr_str(data, s, shown[i].attr, &v))
            continue;
        rc |= hs_buf_printf(b, " %s=\"", shown[i].label);
        rc |= put_name(b, v);
        rc |= hs_buf_putc(b, '"');
    }
    return rc;
}

/* <service> <name> trace=<hex> span=<hex> parent=<hex|-> kind=<k> dur=<ms> status=<s>
 * attrs=<n> events=<n> [slow="..." match="..." hot_path="..." ...]. Returning nonzero stops the
 * scan, which then returns that code. */
static int debug_span_line(void *ud, const struct hs_span_view *s)
{
    const struct span_ctx *ctx = ud;
    struct hs_buf *b = ctx->b;
    int rc = put_name(b, s->service_name);
    rc |= hs_buf_putc(b, ' ');
    rc |= put_name(b, s->name);
    rc |= put_hex(b, "trace", s->trace_id);
    rc |= put_hex(b, "span", s->span_id);
    rc |= put_hex(b, "parent", s->parent_span_id);
    const char *kind = kind_name(s->kind), *status = status_name(s->status_code);
    if (kind)
        rc |= hs_buf_printf(b, " kind=%s", kind);
    else
        rc |= hs_buf_printf(b, " kind=%" PRIu32, s->kind);
    bool neg = s->end_ns < s->start_ns;
    uint64_t ns = neg ? s->start_ns - s->end_ns : s->end_ns - s->start_ns;
    rc |= hs_buf_printf(b, " dur=%s%" PRIu64 ".%03" PRIu64 "ms", neg ? "-" : "", ns / 1000000,
                        ns / 1000 % 1000);
    if (status)
        rc |= hs_buf_printf(b, " status=%s", status);
    else
        rc |= hs_buf_printf(b, " status=%" PRIu32, s->status_code);
    rc |= hs_buf_printf(b, " attrs=%" PRIu32 " events=%" PRIu32, s->attributes, s->events);
    rc |= put_annotations(b, ctx->data, s);
    rc |= hs_buf_putc(b, '\n');
    return rc ? HS_ENOMEM : 0;
}

/* ---- slow: one readable line per enriched slow span ------------------------------------- */

typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

static const AnyValue *span_attr(const Span *sp, const char *key)
{
    for (size_t i = 0; i < sp->n_attributes; i++)
        if (sp->attributes[i]->key && strcmp(sp->attributes[i]->key, key) == 0)
            return sp->attributes[i]->value;
    return NULL;
}

static const char *attr_cstr(const Span *sp, const char *key)
{
    const AnyValue *v = span_attr(sp, key);
    return v && v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
               ? v->string_value
               : NULL;
}

/* A frame's short name: "UserRepository.findByEmail" -> "findByEmail", "./app.js:find:54" ->
 * "find"; the console line has room for a path, not for packages. */
static struct hs_str short_name(const char *s, size_t n)
{
    size_t end = n;
    while (end > 0 && s[end - 1] >= '0' && s[end - 1] <= '9')
        end--;
    if (end == n || end == 0 || s[end - 1] != ':')
        end = n; /* no ":<line>" suffix */
    else
        end--;
    size_t start = end;
    while (start > 0 && !strchr(".:/\\", s[start - 1]))
        start--;
    if (start == end)
        start = 0;
    return (struct hs_str){s + start, end - start};
}

/* profile.top_functions' entries, "<function> <share>%[ (in <library>)]", split. */
static void top_entry(const char *e, struct hs_str *fn, struct hs_str *pct, struct hs_str *lib)
{
    size_t n = strlen(e);
    const char *in = n && e[n - 1] == ')' ? strstr(e, "% (in ") : NULL;
    *lib = in ? (struct hs_str){in + 6, (size_t)(e + n - 1 - (in + 6))} : (struct hs_str){"", 0};
    if (in)
        n = (size_t)(in + 1 - e);
    const char *sp = memrchr(e, ' ', n);
    *fn = sp ? (struct hs_str){e, (size_t)(sp - e)} : (struct hs_str){e, n};
    *pct = sp ? (struct hs_str){sp + 1, n - (size_t)(sp + 1 - e)} : (struct hs_str){"", 0};
}

/* Is frame the span's own function ("UserRepository.findByEmail" for a span so named, or
 * named "findByEmail")? */
static bool is_own(struct hs_str frame, struct hs_str name)
{
    return hs_str_ends_with_name(frame, name) ||
           hs_str_ends_with_name(name, short_name(frame.ptr, frame.len));
}

static bool str_same(struct hs_str a, struct hs_str b)
{
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* Every function the span's attributes name, so a short name is shown only when no other of
 * them shortens alike ("Write" of crypto/sha256 and of crypto/md5: the full names are shown). */
struct names {
    struct hs_str v[128];
    size_t n;
};

static void names_add(struct names *ns, struct hs_str s)
{
    for (size_t i = 0; i < ns->n; i++)
        if (str_same(ns->v[i], s))
            return;
    if (ns->n < HS_ARRAY_SIZE(ns->v))
        ns->v[ns->n++] = s;
}

static int put_short(struct hs_buf *b, const struct names *ns, struct hs_str full)
{
    struct hs_str s = short_name(full.ptr, full.len);
    for (size_t i = 0; i < ns->n; i++)
        if (!str_same(ns->v[i], full) && str_same(short_name(ns->v[i].ptr, ns->v[i].len), s))
            return put_name(b, full);
    return put_name(b, s);
}

/* The hot path's frames, root first. */
static size_t path_frames(const char *hot, struct hs_str *frames, size_t cap)
{
    size_t nf = 0;
    for (const char *p = hot; p && *p && nf < cap;) {
        const char *sep = strstr(p, " > ");
        size_t n = sep ? (size_t)(sep - p) : strlen(p);
        frames[nf++] = (struct hs_str){p, n};
        p = sep ? sep + 3 : p + n;
    }
    return nf;
}

static const Opentelemetry__Proto__Common__V1__ArrayValue *attr_array(const Span *sp,
                                                                      const char *key)
{
    const AnyValue *v = span_attr(sp, key);
    return v && v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE
               ? v->array_value
               : NULL;
}

static void names_of(const Span *sp, const char *top_key, const char *hot_key, struct names *ns)
{
    const Opentelemetry__Proto__Common__V1__ArrayValue *arr = attr_array(sp, top_key);
    for (size_t i = 0; arr && i < arr->n_values; i++)
        if (arr->values[i]->value_case ==
            OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE) {
            struct hs_str f, p, l;
            top_entry(arr->values[i]->string_value, &f, &p, &l);
            names_add(ns, f);
        }
    struct hs_str frames[64];
    size_t nf = path_frames(attr_cstr(sp, hot_key), frames, HS_ARRAY_SIZE(frames));
    for (size_t i = 0; i < nf; i++)
        names_add(ns, frames[i]);
}

/* "65% findByEmail > loadPreferences (in crypto/sha256)": the heaviest function of the top list
 * (top_key) other than the span's own (which holds all of an exact match: it says nothing),
 * with its share, shown as the hot path (hot_key) from the span's own function down to it when
 * it lies on the hot path. Falls back to the hot path's last frame. */
static int put_verdict(struct hs_buf *b, const Span *sp, const char *top_key, const char *hot_key,
                       const struct names *ns)
{
    const Opentelemetry__Proto__Common__V1__ArrayValue *arr = attr_array(sp, top_key);
    struct hs_str name = {sp->name ? sp->name : "", sp->name ? strlen(sp->name) : 0};
    struct hs_str fn = {0}, pct = {0}, lib = {0};
    bool fn_own = false;
    for (size_t i = 0; arr && i < arr->n_values; i++) {
        const AnyValue *v = arr->values[i];
        if (v->value_case != OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
            continue;
        struct hs_str f, p, l;
        top_entry(v->string_value, &f, &p, &l);
        bool own = is_own(f, name);
        if (!fn.len || (fn_own && !own)) {
            fn = f;
            pct = p;
            lib = l;
            fn_own = own;
        }
    }
    struct hs_str frames[64];
    size_t nf = path_frames(attr_cstr(sp, hot_key), frames, HS_ARRAY_SIZE(frames));
    size_t to = nf, from = nf;
    for (size_t i = 0; i < nf && fn.len; i++)
        if (str_same(frames[i], fn))
            to = from = i;
    for (size_t i = 0; i < to; i++) /* the span's own function, above the top one */
        if (is_own(frames[i], name))
            from = i;
    int rc = 0;
    if (!fn.len && nf) { /* no ranking: the hot path's end says where the time went */
        rc |= hs_buf_printf(b, "hot ");
        fn = frames[nf - 1];
    } else if (pct.len) {
        rc |= put_name(b, pct);
        rc |= hs_buf_putc(b, ' ');
    }
    if (!fn.len)
        return rc | hs_buf_printf(b, "no stacks");
    if (to == nf) {
        rc |= put_short(b, ns, fn);
    } else {
        for (size_t i = from; i <= to; i++) {
            if (i > from)
                rc |= hs_buf_printf(b, " > ");
            rc |= put_short(b, ns, frames[i]);
        }
    }
    if (lib.len) {
        rc |= hs_buf_printf(b, " (in ");
        rc |= put_name(b, lib);
        rc |= hs_buf_putc(b, ')');
    }
    return rc;
}

/* "; off CPU (mutex): 100% findByEmail > Cache.get (in sync)": what the profile type that
 * measures waiting said, when the correlator found CPU did not explain the span. */
static int put_offcpu(struct hs_buf *b, const Span *sp, const struct names *ns)
{
    const char *type = attr_cstr(sp, HS_ATTR_PROFILE_OFFCPU_TYPE);
    if (!type)
        return 0;
    const char *colon = strchr(type, ':');
    int rc = hs_buf_printf(b, "; off CPU (");
    rc |= put_name(b, (struct hs_str){type, colon ? (size_t)(colon - type) : strlen(type)});
    rc |= hs_buf_printf(b, "): ");
    return rc | put_verdict(b, sp, HS_ATTR_PROFILE_OFFCPU_TOP_FUNCTIONS,
                            HS_ATTR_PROFILE_OFFCPU_HOT_PATH, ns);
}

/* <service>  <span>  <ms> ms — [<n>% on CPU; ]<verdict>[; off CPU (<type>): <verdict>] — N+1:
 * <n> queries  trace=<hex>: the columns two spaces apart, as span names have spaces of their
 * own */
static int slow_line(struct hs_buf *b, const uint8_t *data, const struct hs_span_view *s)
{
    struct hs_str match;
    if (s->attributes == 0 || !hs_span_attr_str(data, s, HS_ATTR_PROFILE_MATCH, &match))
        return 0; /* not a span the correlator annotated */
    Span *sp = opentelemetry__proto__trace__v1__span__unpack(NULL, s->len, data + s->offset);
    if (!sp) /* the scanner accepted it, so only memory can be short */
        return HS_ENOMEM;
    int rc = put_name(b, s->service_name);
    rc |= hs_buf_printf(b, "  ");
    rc |= put_name(b, s->name);
    uint64_t ns = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
    rc |= hs_buf_printf(b, "  %" PRIu64 " ms \u2014 ", (ns + 500000) / 1000000);
    if (hs_str_eq(match, "none")) {
        const char *why = attr_cstr(sp, HS_ATTR_PROFILE_MATCH_REASON);
        rc |= hs_buf_printf(b, "no profile (");
        rc |= put_cstr(b, why);
        rc |= hs_buf_putc(b, ')');
    } else {
        /* an exact match knows how much of the span was on CPU: a span that mostly waited
         * (on a callee, a lock, the network) says so before where its little CPU went */
        const AnyValue *cpu = span_attr(sp, HS_ATTR_PROFILE_CPU_SHARE);
        if (cpu &&
            cpu->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE &&
            cpu->double_value >= 0 && cpu->double_value < 0.5)
            rc |= hs_buf_printf(b, "%.0f%% on CPU; ", cpu->double_value * 100);
        struct names named = {.n = 0};
        names_of(sp, HS_ATTR_PROFILE_TOP_FUNCTIONS, HS_ATTR_PROFILE_HOT_PATH, &named);
        names_of(sp, HS_ATTR_PROFILE_OFFCPU_TOP_FUNCTIONS, HS_ATTR_PROFILE_OFFCPU_HOT_PATH, &named);
        rc |= put_verdict(b, sp, HS_ATTR_PROFILE_TOP_FUNCTIONS, HS_ATTR_PROFILE_HOT_PATH, &named);
        rc |= put_offcpu(b, sp, &named);
    }
    const AnyValue *n = span_attr(sp, HS_ATTR_N_PLUS_ONE_COUNT);
    if (n && n->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE)
        rc |= hs_buf_printf(b, " \u2014 N+1: %" PRId64 " queries", n->int_value);
    rc |= put_hex(b, " trace", s->trace_id);
    rc |= hs_buf_putc(b, '\n');
    opentelemetry__proto__trace__v1__span__free_unpacked(sp, NULL);
    return rc ? HS_ENOMEM : 0;
}

static int debug_slow_line(void *ud, const struct hs_span_view *s)
{
    const struct span_ctx *ctx = ud;
    return slow_line(ctx->b, ctx->data, s);
}

static int debug_format(struct debug_exp *d, const struct hs_traces *t)
{
    struct hs_buf *b = &d->text;
    hs_buf_reset(b);
    if (d->level == VERBOSITY_SLOW) {
        struct hs_otlp_scan scan = {0};
        const struct hs_otlp_limits lim = {.max_value_depth = 128};
        struct span_ctx ctx = {b, t->data};
        int rc = hs_otlp_traces_scan(t->data, t->len, &lim, debug_slow_line, &ctx, &scan);
        return rc == HS_ENOMEM ? rc : 0; /* unreadable: nothing slow to show (see below) */
    }
    int rc = hs_buf_printf(b, "traces: %" PRIu32 " resource spans, %" PRIu32 " spans\n",
                           t->resource_spans, t->spans);
    if (rc == 0 && d->level >= VERBOSITY_NORMAL) {
        struct hs_otlp_scan scan = {0};
        /* the batch passed its receiver's limits already: allow the deepest any can set */
        const struct hs_otlp_limits lim = {.max_value_depth = 128};
        struct span_ctx ctx = {b, t->data};
        rc = hs_otlp_traces_scan(t->data, t->len, &lim, debug_span_line, &ctx, &scan);
        if (rc && rc != HS_ENOMEM) /* the batch was scanned on the way in; this is a bug */
            rc = hs_buf_printf(b, "traces: unreadable batch: %s\n", scan.err);
    }
    if (rc == 0 && d->level >= VERBOSITY_DETAILED) {
        rc = hs_otlp_wire_to_json(t->data, t->len, b);
        if (rc == 0)
            rc = hs_buf_putc(b, '\n');
    }
    return rc;
}

/* Writes d->text and counts the outcome for `items` spans or profiles. */
static void debug_emit(struct debug_exp *d, int rc, uint32_t items, struct hs_counter *sent,
                       struct hs_counter *failed)
{
    /* at slow most batches have nothing to show (and the buffer may never have been made) */
    if (rc == 0 && d->text.len &&
        (fwrite(d->text.data, 1, d->text.len, d->out) != d->text.len || fflush(d->out) != 0))
        rc = HS_EIO;
    if (rc) {
        hs_counter_add(failed, items);
        hs_metrics_drop(d->metrics, d->base.id,
                        rc == HS_EIO      ? "write_failed"
                        : rc == HS_ENOMEM ? "out_of_memory"
                                          : "format_failed",
                        items);
    } else {
        hs_counter_add(sent, items);
    }
    if (d->text.cap > (4u << 20))
        hs_buf_free(&d->text);
}

static int debug_consume(struct hs_component *c, struct hs_traces *t)
{
    struct debug_exp *d = hs_container_of(c, struct debug_exp, base);
    if (!d->started || d->closing) {
        hs_traces_unref(t);
        return HS_EAGAIN;
    }
    uint32_t spans = t->spans;
    int rc = debug_format(d, t);
    hs_traces_unref(t);
    debug_emit(d, rc, spans, d->sent, d->failed);
    return 0;
}

/* ---- profiles --------------------------------------------------------------------------- */

/* <service> types=<id>,<id> samples=<n> from=<ns> dur=<ms>ms bytes=<n>; an OTLP profile that
 * no exporter has converted yet has no pprof bytes, and says which Profile of the request it is
 * instead. */
static int profile_line(struct hs_buf *b, const struct hs_profiles *batch,
                        const struct hs_profile *p)
{
    const struct hs_profile_summary *s = &p->summary;
    const char *service = p->service ? p->service : hs_profile_label(p, "service_name");
    int rc = put_cstr(b, service);
    rc |= hs_buf_printf(b, " types=");
    for (uint32_t i = 0; i < s->ntypes; i++) {
        if (i)
            rc |= hs_buf_putc(b, ',');
        rc |= put_cstr(b, s->type_ids ? s->type_ids[i] : NULL);
    }
    if (s->ntypes == 0)
        rc |= hs_buf_putc(b, '-');
    int64_t dur = p->until_ns - p->from_ns;
    bool neg = dur < 0;
    uint64_t ns = neg ? (uint64_t)0 - (uint64_t)dur : (uint64_t)dur;
    rc |=
        hs_buf_printf(b, " samples=%" PRIu32 " from=%" PRId64 " dur=%s%" PRIu64 ".%03" PRIu64 "ms",
                      s->samples, p->from_ns, neg ? "-" : "", ns / 1000000, ns / 1000 % 1000);
    if (batch->format == HS_PROFILES_OTLP && !p->raw)
        rc |= hs_buf_printf(b, " otlp_profile=%" PRIu32 "\n", p->otlp_index);
    else
        rc |= hs_buf_printf(b, " bytes=%zu\n", p->raw_len);
    return rc ? HS_ENOMEM : 0;
}

static int self_desc(const void *a, const void *b, void *ud)
{
    const struct hs_profile_summary *s = ud;
    const struct hs_profile_func *fa = &s->funcs[*(const uint32_t *)a];
    const struct hs_profile_func *fb = &s->funcs[*(const uint32_t *)b];
    int64_t va = fa->self ? fa->self[s->main_type] : 0, vb = fb->self ? fb->self[s->main_type] : 0;
    if (va != vb)
        return va > vb ? -1 : 1;
    return strcmp(fa->name ? fa->name : "", fb->name ? fb->name : "");
}

#define TOP_FUNCTIONS 10

/*   labels: k=v k=v
 *   self <share>% <value> <function> (<file>)   for the heaviest functions by self */
static int profile_details(struct hs_buf *b, const struct hs_profile *p)
{
    const struct hs_profile_summary *s = &p->summary;
    int rc = hs_buf_printf(b, "  labels:");
    for (uint32_t i = 0; i < p->nlabels; i++) {
        rc |= hs_buf_putc(b, ' ');
        rc |= put_cstr(b, p->labels[i].name);
        rc |= hs_buf_putc(b, '=');
        rc |= put_cstr(b, p->labels[i].value);
    }
    rc |= hs_buf_putc(b, '\n');
    if (rc || s->ntypes == 0 || s->nfuncs == 0)
        return rc ? HS_ENOMEM : 0;
    uint32_t *order = malloc(s->nfuncs * sizeof(*order));
    if (!order)
        return HS_ENOMEM;
    for (uint32_t i = 0; i < s->nfuncs; i++)
        order[i] = i;
    qsort_r(order, s->nfuncs, sizeof(*order), self_desc, (void *)s);
    int64_t total = s->totals ? s->totals[s->main_type] : 0;
    for (uint32_t i = 0; i < s->nfuncs && i < TOP_FUNCTIONS; i++) {
        const struct hs_profile_func *fn = &s->funcs[order[i]];
        int64_t v = fn->self ? fn->self[s->main_type] : 0;
        double share = total > 0 ? 100.0 * (double)v / (double)total : 0.0;
        rc |= hs_buf_printf(b, "  self %5.1f%% %" PRId64 " ", share, v);
        rc |= put_cstr(b, fn->name);
        if (fn->file && fn->file[0]) {
            rc |= hs_buf_printf(b, " (");
            rc |= put_cstr(b, fn->file);
            rc |= hs_buf_putc(b, ')');
        }
        rc |= hs_buf_putc(b, '\n');
    }
    free(order);
    return rc ? HS_ENOMEM : 0;
}

static int debug_format_profiles(struct debug_exp *d, const struct hs_profiles *batch)
{
    struct hs_buf *b = &d->text;
    hs_buf_reset(b);
    if (d->level == VERBOSITY_SLOW) /* profiles show through the spans they enrich */
        return 0;
    bool otlp = batch->format == HS_PROFILES_OTLP;
    int rc = hs_buf_printf(b, "profiles: %" PRIu32 " (tenant ", batch->count);
    rc = rc ? rc : put_cstr(b, batch->tenant);
    if (rc == 0 && otlp)
        rc = hs_buf_printf(b, "; OTLP request of %" PRIu32 " profiles, %zu bytes",
                           batch->request_profiles, batch->request_len);
    rc = rc ? rc : hs_buf_printf(b, ")\n");
    for (uint32_t i = 0; i < batch->count && rc == 0 && d->level != VERBOSITY_BASIC; i++) {
        rc = profile_line(b, batch, batch->items[i]);
        if (rc == 0 && d->level >= VERBOSITY_DETAILED)
            rc = profile_details(b, batch->items[i]);
    }
    if (rc == 0 && otlp && d->level >= VERBOSITY_DETAILED) {
        rc = hs_otlp_wire_to_json_desc(
            &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
            batch->request, batch->request_len, b);
        rc = rc ? rc : hs_buf_putc(b, '\n');
    }
    return rc;
}

static int debug_consume_profiles(struct hs_component *c, struct hs_profiles *batch)
{
    struct debug_exp *d = hs_container_of(c, struct debug_exp, base);
    if (!d->started || d->closing) {
        hs_profiles_unref(batch);
        return HS_EAGAIN;
    }
    uint32_t n = batch->format == HS_PROFILES_OTLP ? batch->request_profiles : batch->count;
    int rc = debug_format_profiles(d, batch);
    hs_profiles_unref(batch);
    debug_emit(d, rc, n, d->sent_profiles, d->failed_profiles);
    return 0;
}

static bool debug_ready(struct hs_component *c)
{
    struct debug_exp *d = hs_container_of(c, struct debug_exp, base);
    return d->started && !d->closing;
}

static int debug_start(struct hs_component *c, const struct hs_host *host)
{
    struct debug_exp *d = hs_container_of(c, struct debug_exp, base);
    d->metrics = host->metrics;
    struct hs_exporter_counters counters = hs_metrics_exporter(host->metrics, c->id);
    d->sent = counters.sent;
    d->failed = counters.failed;
    counters = hs_metrics_exporter_signal(host->metrics, c->id, HS_SIGNAL_PROFILES);
    d->sent_profiles = counters.sent;
    d->failed_profiles = counters.failed;
    d->started = true;
    return 0;
}

/* Nothing of ours is in the loop, so done can be called at once. */
static void debug_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct debug_exp *d = hs_container_of(c, struct debug_exp, base);
    if (d->closing)
        return;
    d->closing = true;
    done(c);
}

static void debug_destroy(struct hs_component *c)
{
    struct debug_exp *d = hs_container_of(c, struct debug_exp, base);
    hs_buf_free(&d->text);
    hs_config_free_fields(debug_fields, &d->conf);
    free(d);
}

const struct hs_component_type hs_exporter_debug = {
    .name = "debug",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Prints a summary of each batch on stdout (and each span or profile, or details).",
    .fields = debug_fields,
    .create = debug_create,
    .start = debug_start,
    .consume_traces = debug_consume,
    .consume_profiles = debug_consume_profiles,
    .ready = debug_ready,
    .shutdown = debug_shutdown,
    .destroy = debug_destroy,
};
