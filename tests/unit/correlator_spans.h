/* correlator_spans.h: spans in and out of the correlator for its unit tests: spans built with
 * otlp_build.h, requests of one service (and tenant), the delivered spans decoded, their
 * attributes read, the correlator's counters, and a service shown long ago. Include after
 * correlator_fixture.h. */
#ifndef HS_TEST_CORRELATOR_SPANS_H
#define HS_TEST_CORRELATOR_SPANS_H

static inline uint64_t metric(struct fx *f, const char *name, const char *extra)
{
    char l[256];
    snprintf(l, sizeof(l), "processor=\"correlator\"%s", extra);
    return hs_metrics_counter(f->m, name, "", l)->value;
}

/* ---- traces in and out ------------------------------------------------------------------ */

static inline Span *mkspan(const char *name, uint8_t seed, uint64_t start, uint64_t dur_ns)
{
    Span *s = span(name, seed);
    s->start_time_unix_nano = start;
    s->end_time_unix_nano = start + dur_ns;
    return s;
}

static inline void child_of(Span *child, const Span *parent)
{
    child->trace_id = parent->trace_id;
    child->parent_span_id = parent->span_id;
}

static inline void set_attr(Span *s, const char *k, const char *v)
{
    KV **a = zalloc((s->n_attributes + 1) * sizeof(*a));
    if (s->n_attributes)
        memcpy(a, s->attributes, s->n_attributes * sizeof(*a));
    a[s->n_attributes++] = kv(k, any_str(v));
    s->attributes = a;
}

/* A request of one resource (service, and a tenant.id attribute when tenant is set). */
static inline struct hs_traces *traces_of(const char *service, const char *tenant, size_t n,
                                          Span **sp)
{
    Request *r = request(service, 1, (ScopeSpans **)list(1, scope_spans("sc", n, sp)));
    if (tenant) {
        Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_spans[0]->resource;
        res->n_attributes = 3;
        res->attributes = (KV **)list(3, res->attributes[0], res->attributes[1],
                                      kv("tenant.id", any_str(tenant)));
    }
    struct bytes b = pack(r);
    uint8_t *p = malloc(b.len);
    memcpy(p, b.p, b.len);
    return hs_traces_wrap(p, b.len, b.len, (uint32_t)n, 1);
}

/* Every span delivered so far, decoded. */
static inline Span *out_span(struct fx *f, const char *name, int *batch)
{
    ProtobufCAllocator alloc = hs_arena_pb_allocator(build_arena);
    for (int i = 0; i < f->traces.n; i++) {
        Request *r =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                &alloc, f->traces.t[i]->len, f->traces.t[i]->data);
        assert_non_null(r);
        for (size_t a = 0; a < r->n_resource_spans; a++)
            for (size_t b = 0; b < r->resource_spans[a]->n_scope_spans; b++)
                for (size_t k = 0; k < r->resource_spans[a]->scope_spans[b]->n_spans; k++) {
                    Span *s = r->resource_spans[a]->scope_spans[b]->spans[k];
                    if (strcmp(s->name, name) == 0) {
                        if (batch)
                            *batch = i;
                        return s;
                    }
                }
    }
    return NULL;
}

static inline Any *attr(const Span *s, const char *key)
{
    for (size_t i = 0; i < s->n_attributes; i++)
        if (strcmp(s->attributes[i]->key, key) == 0)
            return s->attributes[i]->value;
    return NULL;
}

static inline const char *astr(const Span *s, const char *key)
{
    Any *v = attr(s, key);
    return v ? v->string_value : NULL;
}

/* The string array attribute joined with " | ". */
static inline const char *alist(const Span *s, const char *key)
{
    Any *v = attr(s, key);
    if (!v)
        return NULL;
    assert_int_equal(v->value_case, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
    char *out = zalloc(4096);
    for (size_t i = 0; i < v->array_value->n_values; i++) {
        if (i)
            strcat(out, " | ");
        strcat(out, v->array_value->values[i]->string_value);
    }
    return out;
}

/* The service has shown (spans) for first_profile_wait without a profile: its slow spans no
 * longer wait for a first one, and leave at once. */
static inline void shown_long_ago(struct fx *f, const char *tenant, const char *service)
{
    struct correlator *c = hs_container_of(f->c, struct correlator, base);
    hs_corr_seen_touch(&c->seen, (struct hs_str){tenant, strlen(tenant)},
                       (struct hs_str){service, strlen(service)}, fake_now);
    fake_now += c->conf.first_profile_wait_ms;
}

#endif
