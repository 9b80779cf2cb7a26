/* service.c: builds the pipeline graph of a config (design.md §3, §9): receivers fan in,
 * processors chain (one instance per pipeline unless the type is shared), exporters fan out,
 * one receiver or exporter instance per id. Starts downstream first, stops upstream first. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "common.h"
#include "component.h"
#include "config.h"
#include "log.h"
#include "metrics.h"

struct pipeline_config {
    struct hs_strlist receivers, processors, exporters;
};

static const struct hs_config_field pipeline_fields[] = {
    {"receivers", HS_CFG_STRLIST, offsetof(struct pipeline_config, receivers), NULL,
     .required = true, .doc = "receiver ids feeding this pipeline"},
    {"processors", HS_CFG_STRLIST, offsetof(struct pipeline_config, processors), NULL,
     .doc = "processor ids, in order"},
    {"exporters", HS_CFG_STRLIST, offsetof(struct pipeline_config, exporters), NULL,
     .required = true, .doc = "exporter ids the pipeline fans out to"},
    {0},
};

/* A component instance and what the service knows of it. */
struct instance {
    struct hs_component *c;
    const struct hs_config_node *node; /* its config (may be NULL) */
    const struct hs_config_node *key;  /* for positioned errors */
    char *id;
    enum hs_kind kind;
    unsigned signals; /* shared processors: the signals of the pipelines using it */
    bool used, started, stopped;
};

struct pipeline {
    char *name;
    enum hs_signal signal;
    struct pipeline_config conf;
    struct instance **procs;         /* its processors: its own, or shared instances */
    size_t nprocs;
    struct hs_component **exporters; /* shared instances */
    size_t nexporters;
    struct hs_consumer *links;       /* links[i] feeds procs[i]'s output; links[nprocs] = exps */
    struct hs_consumer entry;        /* what a receiver delivers to */
};

struct hs_service {
    struct hs_config_doc doc;
    struct hs_metrics *metrics;
    const struct hs_telemetry_ops *tel_ops;
    struct hs_telemetry *tel;
    struct instance *receivers, *exporters;
    size_t nreceivers, nexporters;
    struct instance *shared; /* processors of `shared` types: one instance per id */
    size_t nshared, cap_shared;
    struct pipeline *pipelines;
    size_t npipelines;
    struct hs_admin *admin; /* telemetry's admin endpoint, for the components' pages */
    uv_loop_t *loop;
    uint64_t started_ms;
    uint64_t shutdown_ms; /* service.shutdown_timeout; 0 = wait until everything is sent */
    /* shutdown */
    int phase;             /* 0 receivers, 1 processors, 2 exporters, 3 done */
    size_t pending;        /* components whose done has not fired yet in this phase */
    size_t proc_cursor[2]; /* pipeline, processor index of the sequential processor drain */
    void (*done)(void *ud);
    void *done_ud;
};

static const char *const top_keys[] = {"receivers", "processors", "exporters", "service"};

static void check_top_keys(const struct hs_config_node *root, struct hs_error *err)
{
    for (const struct hs_config_node *n = root->child; n; n = n->next) {
        bool known = false;
        for (size_t i = 0; i < HS_ARRAY_SIZE(top_keys); i++)
            known |= strcmp(n->key, top_keys[i]) == 0;
        if (!known) {
            struct hs_config_node at = *n;
            at.line = n->key_line;
            at.col = n->key_col;
            hs_config_errorf(err, &at, n->key,
                             "unknown key (known: receivers, processors, exporters, service)");
        }
    }
}

/* "otlp/tempo" → type "otlp". */
static const struct hs_component_type *find_type(enum hs_kind kind, const char *id)
{
    char type[64];
    size_t n = strcspn(id, "/");
    if (n == 0 || n >= sizeof(type))
        return NULL;
    memcpy(type, id, n);
    type[n] = '\0';
    return hs_registry_find(kind, type);
}

static void key_error(struct hs_error *err, const struct hs_config_node *n, const char *path,
                      const char *msg)
{
    struct hs_config_node at = *n;
    at.line = n->key_line;
    at.col = n->key_col;
    hs_config_errorf(err, &at, path, "%s", msg);
}

static void unknown_type_error(struct hs_error *err, const struct hs_config_node *n,
                               enum hs_kind kind, const char *path)
{
    char known[512] = "";
    size_t count, len = 0;
    const struct hs_component_type *const *all = hs_registry_all(&count);
    for (size_t i = 0; i < count; i++) {
        if (all[i]->kind != kind)
            continue;
        len += (size_t)snprintf(known + len, sizeof(known) - HS_MIN(len, sizeof(known)), "%s%s",
                                len ? ", " : "", all[i]->name);
    }
    char msg[640];
    snprintf(msg, sizeof(msg), "unknown %.*s type (known: %s)", (int)strlen(hs_kind_name(kind)) - 1,
             hs_kind_name(kind), known);
    key_error(err, n, path, msg);
}

static int create_instance(struct instance *in, const struct hs_component_type *type,
                           const char *path, struct hs_error *err)
{
    struct hs_component *c = NULL;
    size_t before = err->count;
    int rc = type->create(in->node, path, &c, err);
    if (rc || !c) {
        if (err->count == before)
            hs_config_errorf(err, in->key, path, "cannot create: %s", hs_strerror(rc));
        return rc ? rc : HS_EINVAL;
    }
    c->type = type;
    c->id = hs_xstrdup(in->id);
    in->c = c;
    return 0;
}

static void destroy_instance(struct instance *in)
{
    if (in->c) {
        free(in->c->id);
        free(in->c->pipeline);
        in->c->type->destroy(in->c);
        in->c = NULL;
    }
    free(in->id);
}

/* Declared components of one kind (receivers or exporters): one instance per id. */
static void load_section(struct hs_service *s, const struct hs_config_node *root, enum hs_kind kind,
                         struct instance **out, size_t *nout, struct hs_error *err)
{
    const char *name = hs_kind_name(kind);
    const struct hs_config_node *sec = hs_config_get(root, name);
    if (!sec || (sec->kind == HS_NODE_SCALAR && sec->is_null))
        return;
    if (sec->kind != HS_NODE_MAP) {
        hs_config_errorf(err, sec, name, "expected a map of component ids");
        return;
    }
    size_t n = 0;
    for (const struct hs_config_node *c = sec->child; c; c = c->next)
        n++;
    *out = hs_xcalloc(n, sizeof(**out));
    for (const struct hs_config_node *c = sec->child; c; c = c->next) {
        char path[256];
        snprintf(path, sizeof(path), "%s.%s", name, c->key);
        const struct hs_component_type *type = find_type(kind, c->key);
        if (!type) {
            unknown_type_error(err, c, kind, path);
            continue;
        }
        struct instance *in = &(*out)[(*nout)++];
        in->id = hs_xstrdup(c->key);
        in->kind = kind;
        in->key = c;
        in->node = c; /* a null node decodes as an empty map, with its position */
        create_instance(in, type, path, err);
    }
    (void)s;
}

static struct instance *find_instance(struct instance *arr, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(arr[i].id, id) == 0)
            return &arr[i];
    return NULL;
}

/* Finds the node of list item `i` in the pipeline's `key` list, for positioned errors. */
static const struct hs_config_node *list_item(const struct hs_config_node *pl, const char *key,
                                              size_t i)
{
    const struct hs_config_node *list = hs_config_get(pl, key);
    if (!list)
        return pl;
    const struct hs_config_node *n = list->child;
    while (n && i--)
        n = n->next;
    return n ? n : list;
}

static void add_target(struct hs_consumer *c, struct hs_component *t)
{
    c->targets = realloc(c->targets, (c->count + 1) * sizeof(*c->targets));
    if (!c->targets)
        abort();
    c->targets[c->count++] = t;
}

static bool signal_of(const char *name, enum hs_signal *sig)
{
    size_t n = strcspn(name, "/");
    if (n == 6 && strncmp(name, "traces", 6) == 0) {
        *sig = HS_SIGNAL_TRACES;
        return true;
    }
    if (n == 8 && strncmp(name, "profiles", 8) == 0) {
        *sig = HS_SIGNAL_PROFILES;
        return true;
    }
    return false;
}

/* Where a component's output of the pipeline's signal goes. */
static struct hs_consumer **output_of(struct hs_component *c, enum hs_signal sig)
{
    return sig == HS_SIGNAL_PROFILES ? &c->next_profiles : &c->next;
}

/* The one instance of a shared processor id, created on first use. */
static struct instance *shared_instance(struct hs_service *s, const char *id,
                                        const struct hs_config_node *decl,
                                        const struct hs_component_type *type, struct hs_error *err)
{
    for (size_t i = 0; i < s->nshared; i++)
        if (strcmp(s->shared[i].id, id) == 0)
            return s->shared[i].c ? &s->shared[i] : NULL;
    if (s->nshared == s->cap_shared) {
        s->cap_shared = s->cap_shared ? 2 * s->cap_shared : 4;
        s->shared = realloc(s->shared, s->cap_shared * sizeof(*s->shared));
        if (!s->shared)
            abort();
    }
    struct instance *in = &s->shared[s->nshared++];
    *in = (struct instance){.id = hs_xstrdup(id), .kind = HS_KIND_PROCESSOR, .key = decl,
                            .node = decl};
    char path[256];
    snprintf(path, sizeof(path), "processors.%s", id);
    return create_instance(in, type, path, err) == 0 ? in : NULL;
}

/* A pipeline's processors: its own instances, or the one of a shared type's id. */
static void pipeline_processors(struct hs_service *s, struct pipeline *p,
                                const struct hs_config_node *pl,
                                const struct hs_config_node *procs_sec, bool create_procs,
                                struct hs_error *err)
{
    char path[256];
    struct pipeline_config *pc = &p->conf;

    p->procs = hs_xcalloc(pc->processors.count, sizeof(*p->procs));
    for (size_t i = 0; i < pc->processors.count; i++) {
        const char *id = pc->processors.items[i];
        const struct hs_config_node *decl = procs_sec ? hs_config_get(procs_sec, id) : NULL;
        const struct hs_config_node *at = list_item(pl, "processors", i);
        snprintf(path, sizeof(path), "service.pipelines.%s.processors", p->name);
        if (!decl) {
            hs_config_errorf(err, at, path, "processor \"%s\" is not defined under processors",
                             id);
            continue;
        }
        const struct hs_component_type *type = find_type(HS_KIND_PROCESSOR, id);
        if (!type)
            continue; /* reported where it is declared */
        if (!(type->signals & p->signal)) {
            hs_config_errorf(err, at, path, "processor \"%s\" does not handle %s", id, p->name);
            continue;
        }
        if (!create_procs)
            continue;
        if (type->shared) {
            struct instance *in = shared_instance(s, id, decl, type, err);
            if (!in)
                continue;
            if (in->signals & p->signal) {
                hs_config_errorf(err, at, path,
                                 "processor \"%s\" is shared by its pipelines and may appear in "
                                 "only one pipeline per signal", id);
                continue;
            }
            in->signals |= p->signal;
            p->procs[p->nprocs++] = in;
            continue;
        }
        struct instance *in = hs_xcalloc(1, sizeof(*in));
        p->procs[p->nprocs++] = in;
        in->id = hs_xstrdup(id);
        in->kind = HS_KIND_PROCESSOR;
        in->key = decl;
        in->node = decl;
        snprintf(path, sizeof(path), "processors.%s", id);
        if (create_instance(in, type, path, err) == 0)
            in->c->pipeline = hs_xstrdup(p->name);
    }
}

static const char *profile_kind_name(unsigned kinds)
{
    return kinds & HS_PROFILES_KIND_PPROF ? "pprof" : "OTLP profiles";
}

/* Processors pass a batch on as it came, so what the receivers make reaches every exporter:
 * one that cannot take a kind they make is refused here, not found dropping data later. */
static void check_profile_kinds(struct hs_service *s, struct pipeline *p,
                                const struct hs_config_node *pl, struct hs_error *err)
{
    char path[256];
    snprintf(path, sizeof(path), "service.pipelines.%s.exporters", p->name);
    for (size_t i = 0; i < p->conf.receivers.count; i++) {
        struct instance *rin =
            find_instance(s->receivers, s->nreceivers, p->conf.receivers.items[i]);
        unsigned made = rin && rin->c ? rin->c->type->profile_kinds : 0;
        for (size_t j = 0; made && j < p->conf.exporters.count; j++) {
            struct instance *ein =
                find_instance(s->exporters, s->nexporters, p->conf.exporters.items[j]);
            unsigned taken = ein && ein->c ? ein->c->type->profile_kinds : 0;
            if (!taken || !(made & ~taken))
                continue;
            hs_config_errorf(err, list_item(pl, "exporters", j), path,
                             "exporter \"%s\" takes %s only, but receiver \"%s\" makes %s: "
                             "give that receiver a profiles pipeline of its own, with exporters "
                             "that take %s",
                             ein->id, profile_kind_name(taken), rin->id,
                             profile_kind_name(made & ~taken), profile_kind_name(made & ~taken));
        }
    }
}

/* `create_procs` is false when the declared processors already failed their check, so their
 * errors are not reported once per pipeline again. */
static void build_pipeline(struct hs_service *s, struct pipeline *p,
                           const struct hs_config_node *pl, const struct hs_config_node *procs_sec,
                           bool create_procs, struct hs_error *err)
{
    char path[256];
    struct pipeline_config *pc = &p->conf;

    pipeline_processors(s, p, pl, procs_sec, create_procs, err);
    p->exporters = hs_xcalloc(pc->exporters.count, sizeof(*p->exporters));
    snprintf(path, sizeof(path), "service.pipelines.%s.exporters", p->name);
    for (size_t i = 0; i < pc->exporters.count; i++) {
        struct instance *in = find_instance(s->exporters, s->nexporters, pc->exporters.items[i]);
        const struct hs_config_node *at = list_item(pl, "exporters", i);
        if (!in) {
            hs_config_errorf(err, at, path, "exporter \"%s\" is not defined under exporters",
                             pc->exporters.items[i]);
        } else if (in->c && !(in->c->type->signals & p->signal)) {
            hs_config_errorf(err, at, path, "exporter \"%s\" does not handle %s", in->id,
                             p->name);
        } else if (in->c) {
            in->used = true;
            in->c->signals |= p->signal;
            p->exporters[p->nexporters++] = in->c;
        }
    }
    if (pc->exporters.count == 0)
        hs_config_errorf(err, pl, path, "a pipeline needs at least one exporter");
    if (p->signal == HS_SIGNAL_PROFILES)
        check_profile_kinds(s, p, pl, err);

    snprintf(path, sizeof(path), "service.pipelines.%s.receivers", p->name);
    if (pc->receivers.count == 0)
        hs_config_errorf(err, pl, path, "a pipeline needs at least one receiver");
    for (size_t i = 0; i < pc->receivers.count; i++) {
        struct instance *in = find_instance(s->receivers, s->nreceivers, pc->receivers.items[i]);
        const struct hs_config_node *at = list_item(pl, "receivers", i);
        if (!in)
            hs_config_errorf(err, at, path, "receiver \"%s\" is not defined under receivers",
                             pc->receivers.items[i]);
        else if (in->c && !(in->c->type->signals & p->signal))
            hs_config_errorf(err, at, path, "receiver \"%s\" does not handle %s", in->id,
                             p->name);
        else if (in->c)
            in->c->signals |= p->signal;
    }
}

/* Wires a pipeline whose components all exist: processors chain, the last fans out. */
static void link_pipeline(struct hs_service *s, struct pipeline *p)
{
    p->links = hs_xcalloc(p->nprocs + 1, sizeof(*p->links));
    struct hs_consumer *exps = &p->links[p->nprocs];
    for (size_t i = 0; i < p->nexporters; i++)
        add_target(exps, p->exporters[i]);
    for (size_t i = 0; i < p->nprocs; i++) {
        p->procs[i]->used = true;
        if (i + 1 < p->nprocs)
            add_target(&p->links[i], p->procs[i + 1]->c);
        *output_of(p->procs[i]->c, p->signal) = i + 1 < p->nprocs ? &p->links[i] : exps;
    }
    if (p->nprocs)
        add_target(&p->entry, p->procs[0]->c);
    else
        for (size_t i = 0; i < p->nexporters; i++)
            add_target(&p->entry, p->exporters[i]);
    for (size_t i = 0; i < p->conf.receivers.count; i++) {
        struct instance *in = find_instance(s->receivers, s->nreceivers, p->conf.receivers.items[i]);
        in->used = true;
        struct hs_consumer **out = output_of(in->c, p->signal);
        if (!*out)
            *out = hs_xcalloc(1, sizeof(**out));
        for (size_t t = 0; t < p->entry.count; t++)
            add_target(*out, p->entry.targets[t]);
    }
}

static void load_pipelines(struct hs_service *s, const struct hs_config_node *svc,
                           const struct hs_config_node *procs_sec, bool create_procs,
                           struct hs_error *err)
{
    const struct hs_config_node *pls = hs_config_get(svc, "pipelines");
    if (!pls || pls->kind != HS_NODE_MAP || !pls->child) {
        hs_config_errorf(err, pls ? pls : svc, "service.pipelines",
                         "at least one pipeline is needed, e.g. traces: {receivers: [otlp], "
                         "exporters: [debug]}");
        return;
    }
    size_t n = 0;
    for (const struct hs_config_node *c = pls->child; c; c = c->next)
        n++;
    s->pipelines = hs_xcalloc(n, sizeof(*s->pipelines));
    for (const struct hs_config_node *c = pls->child; c; c = c->next) {
        char path[256];
        snprintf(path, sizeof(path), "service.pipelines.%s", c->key);
        struct pipeline *p = &s->pipelines[s->npipelines++];
        p->name = hs_xstrdup(c->key);
        if (!signal_of(c->key, &p->signal)) {
            key_error(err, c, path,
                      "unknown pipeline signal (known: traces, traces/NAME, profiles, "
                      "profiles/NAME)");
            continue;
        }
        if (hs_config_decode(pipeline_fields, c, &p->conf, path, err) == 0)
            build_pipeline(s, p, c, procs_sec, create_procs, err);
    }
}

/* Processors declared but used by no pipeline are still checked, once. */
static void check_declared_processors(const struct hs_config_node *procs, struct hs_error *err)
{
    if (!procs || (procs->kind == HS_NODE_SCALAR && procs->is_null))
        return;
    if (procs->kind != HS_NODE_MAP) {
        hs_config_errorf(err, procs, "processors", "expected a map of component ids");
        return;
    }
    for (const struct hs_config_node *c = procs->child; c; c = c->next) {
        char path[256];
        snprintf(path, sizeof(path), "processors.%s", c->key);
        const struct hs_component_type *type = find_type(HS_KIND_PROCESSOR, c->key);
        if (!type) {
            unknown_type_error(err, c, HS_KIND_PROCESSOR, path);
            continue;
        }
        struct instance in = {.id = hs_xstrdup(c->key), .key = c,
                              .node = c};
        create_instance(&in, type, path, err);
        destroy_instance(&in);
    }
}

/* Checks the parsed document in s->doc and creates the components; takes `s`, freeing it on
 * failure. */
static int load_doc(struct hs_service *s, size_t before, struct hs_service **out,
                    struct hs_error *err)
{
    const char *file = s->doc.file;
    const struct hs_config_node *root = s->doc.root;
    if (!root || root->kind != HS_NODE_MAP) {
        hs_error_addf(err, "%s:1:1: the config must be a map with receivers, exporters and "
                           "service", file);
        goto fail;
    }
    check_top_keys(root, err);
    const struct hs_config_node *svc = hs_config_get(root, "service");
    const struct hs_config_node *procs = hs_config_get(root, "processors");
    const struct hs_config_node *tel = svc ? hs_config_get(svc, "telemetry") : NULL;
    for (const struct hs_config_node *n = svc ? svc->child : NULL; n; n = n->next) {
        if (strcmp(n->key, "shutdown_timeout") == 0) {
            if (n->kind != HS_NODE_SCALAR || hs_parse_duration_ms(n->value, &s->shutdown_ms))
                hs_config_errorf(err, n, "service.shutdown_timeout",
                                 "not a duration (e.g. 30s; 0 waits until all is sent)");
        } else if (strcmp(n->key, "telemetry") != 0 && strcmp(n->key, "pipelines") != 0) {
            key_error(err, n, "service",
                      "unknown key (known: pipelines, shutdown_timeout, telemetry)");
        }
    }
    s->tel = s->tel_ops->load(tel, err);
    load_section(s, root, HS_KIND_RECEIVER, &s->receivers, &s->nreceivers, err);
    load_section(s, root, HS_KIND_EXPORTER, &s->exporters, &s->nexporters, err);
    size_t before_procs = err->count;
    check_declared_processors(procs, err);
    bool procs_ok = err->count == before_procs;
    if (!svc)
        hs_error_addf(err, "%s:1:1: service: missing required key \"service\" (with pipelines)",
                      file);
    else
        load_pipelines(s, svc, procs, procs_ok, err);
    if (err->count > before)
        goto fail;
    for (size_t i = 0; i < s->npipelines; i++)
        link_pipeline(s, &s->pipelines[i]);
    *out = s;
    return 0;
fail:
    hs_service_free(s);
    return HS_EINVAL;
}

int hs_service_load(const char *file, const char *text, size_t len,
                    const struct hs_telemetry_ops *tel, struct hs_service **out,
                    struct hs_error *err)
{
    struct hs_service *s = hs_xcalloc(1, sizeof(*s));
    s->tel_ops = tel;
    size_t before = err->count;
    if (hs_config_parse(file, text, len, &s->doc, err) != 0) {
        hs_service_free(s);
        return HS_EINVAL;
    }
    return load_doc(s, before, out, err);
}

int hs_service_load_file(const char *path, const struct hs_telemetry_ops *tel,
                         struct hs_service **out, struct hs_error *err)
{
    struct hs_service *s = hs_xcalloc(1, sizeof(*s));
    s->tel_ops = tel;
    size_t before = err->count;
    if (hs_config_parse_file(path, &s->doc, err) != 0) {
        hs_service_free(s);
        return HS_EINVAL;
    }
    return load_doc(s, before, out, err);
}

void hs_service_reference(const struct hs_telemetry_ops *tel, struct hs_buf *out)
{
    hs_buf_printf(out, "\n### service\n\n| key | type | default | bounds | doc |\n"
                       "|---|---|---|---|---|\n"
                       "| `pipelines.traces[/NAME]` | section | required |  | `receivers`, "
                       "`processors` (optional), `exporters`: lists of component ids |\n"
                       "| `pipelines.profiles[/NAME]` | section |  |  | the same for profiles; "
                       "a shared processor (`correlator`) may be in one traces and one profiles "
                       "pipeline: one instance sees both |\n"
                       "| `shutdown_timeout` | duration | `0` |  | longest drain on SIGTERM "
                       "before exiting 1; 0 waits until everything accepted is sent |\n");
    hs_config_reference(tel->fields, "telemetry", out);
}

uint64_t hs_service_shutdown_timeout(const struct hs_service *s)
{
    return s->shutdown_ms;
}

struct hs_component *hs_service_component(struct hs_service *s, enum hs_kind kind, const char *id)
{
    struct instance *in = kind == HS_KIND_RECEIVER ? find_instance(s->receivers, s->nreceivers, id)
                          : kind == HS_KIND_EXPORTER
                              ? find_instance(s->exporters, s->nexporters, id)
                              : NULL;
    return in ? in->c : NULL;
}

void hs_service_free(struct hs_service *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->npipelines; i++) {
        struct pipeline *p = &s->pipelines[i];
        for (size_t j = 0; j < p->nprocs; j++) {
            if (p->procs[j]->c && p->procs[j]->c->type->shared)
                continue; /* freed once, below */
            destroy_instance(p->procs[j]);
            free(p->procs[j]);
        }
        for (size_t j = 0; p->links && j <= p->nprocs; j++)
            free(p->links[j].targets);
        free(p->links);
        free(p->entry.targets);
        free(p->procs);
        free(p->exporters);
        hs_config_free_fields(pipeline_fields, &p->conf);
        free(p->name);
    }
    free(s->pipelines);
    for (size_t i = 0; i < s->nshared; i++)
        destroy_instance(&s->shared[i]);
    free(s->shared);
    for (size_t i = 0; i < s->nreceivers; i++) {
        struct hs_component *c = s->receivers[i].c;
        for (int sig = 0; c && sig < 2; sig++) {
            struct hs_consumer *out = sig ? c->next_profiles : c->next;
            if (out) {
                free(out->targets);
                free(out);
            }
        }
        destroy_instance(&s->receivers[i]);
    }
    free(s->receivers);
    for (size_t i = 0; i < s->nexporters; i++)
        destroy_instance(&s->exporters[i]);
    free(s->exporters);
    if (s->tel)
        s->tel_ops->free(s->tel);
    hs_config_doc_free(&s->doc);
    hs_metrics_free(s->metrics);
    free(s);
}

/* ---- start and ordered shutdown ---------------------------------------------------------- */

static void for_each_instance(struct hs_service *s, void (*fn)(struct hs_service *, struct instance *))
{
    for (size_t i = 0; i < s->nexporters; i++)
        fn(s, &s->exporters[i]);
    for (size_t i = 0; i < s->npipelines; i++)
        for (size_t j = 0; j < s->pipelines[i].nprocs; j++)
            if (!s->pipelines[i].procs[j]->c->type->shared)
                fn(s, s->pipelines[i].procs[j]);
    for (size_t i = 0; i < s->nshared; i++)
        fn(s, &s->shared[i]);
    for (size_t i = 0; i < s->nreceivers; i++)
        fn(s, &s->receivers[i]);
}

static void attach(struct hs_service *s, struct instance *in)
{
    in->c->loop = s->loop;
    in->c->metrics = s->metrics;
    in->c->service = s;
    if (!in->used)
        hs_log_warn(in->id, "defined but used by no pipeline: not started");
}

static int start_one(struct hs_service *s, struct instance *in, struct hs_error *err)
{
    if (!in->used || in->started)
        return 0;
    const struct hs_host host = {.loop = s->loop, .metrics = s->metrics, .admin = s->admin};
    int rc = in->c->type->start(in->c, &host);
    if (rc) {
        if (err->count == 0)
            hs_error_addf(err, "%s: cannot start: %s", in->id, hs_strerror(rc));
        return rc;
    }
    in->started = true;
    return 0;
}

static double gauge_uptime(void *ud)
{
    struct hs_service *s = ud;
    return (double)(hs_now_ms() - s->started_ms) / 1000.0;
}

int hs_service_start(struct hs_service *s, uv_loop_t *loop, struct hs_error *err)
{
    s->loop = loop;
    s->started_ms = hs_now_ms();
    s->metrics = hs_metrics_new();
    hs_metrics_gauge(s->metrics, "process_uptime_seconds", "Seconds since the loop started", "",
                     gauge_uptime, s);
    /* logging, then the admin endpoint, so components can add pages to it (struct hs_host) */
    int rc = s->tel_ops->start(s->tel, loop, s->metrics, &s->admin, err);
    for_each_instance(s, attach); /* also when telemetry failed: shutdown needs it */
    /* downstream first: exporters, then processors back to front, then receivers */
    for (size_t i = 0; i < s->nexporters && !rc; i++)
        rc = start_one(s, &s->exporters[i], err);
    /* (a shared processor is started once: start_one skips a started instance) */
    for (size_t i = 0; i < s->npipelines && !rc; i++)
        for (size_t j = s->pipelines[i].nprocs; j-- > 0 && !rc;)
            rc = start_one(s, s->pipelines[i].procs[j], err);
    for (size_t i = 0; i < s->nreceivers && !rc; i++)
        rc = start_one(s, &s->receivers[i], err);
    if (!rc) {
        s->tel_ops->set_ready(s->tel, true); /* /healthz/ready answered 503 until now */
        hs_log_info(NULL, "hotspan %s started: %zu receivers, %zu pipelines, %zu exporters",
                    HS_VERSION, s->nreceivers, s->npipelines, s->nexporters);
    }
    return rc;
}

static void shutdown_step(struct hs_service *s);

static void component_done(struct hs_component *c)
{
    struct hs_service *s = c->service;
    if (--s->pending == 0)
        shutdown_step(s);
}

static void telemetry_closed(void *ud)
{
    struct hs_service *s = ud;
    s->admin = NULL;
    hs_metrics_gauge_remove(s->metrics, s);
    hs_log_info(NULL, "shutdown complete");
    s->done(s->done_ud);
}

static void stop_all(struct hs_service *s, struct instance *arr, size_t n)
{
    s->pending = 1; /* held until every shutdown below has been called */
    for (size_t i = 0; i < n; i++) {
        if (arr[i].stopped || !arr[i].c)
            continue;
        arr[i].stopped = true;
        s->pending++;
        arr[i].c->type->shutdown(arr[i].c, component_done);
    }
    component_done(&(struct hs_component){.service = s});
}

/* Processors drain one at a time, each pipeline front to back, so every flush finds what is
 * downstream of it still running. */
static bool stop_next_processor(struct hs_service *s)
{
    while (s->proc_cursor[0] < s->npipelines) {
        struct pipeline *p = &s->pipelines[s->proc_cursor[0]];
        if (s->proc_cursor[1] < p->nprocs) {
            struct instance *in = p->procs[s->proc_cursor[1]++]; /* shared: stopped once */
            if (in->stopped || !in->c)
                continue;
            in->stopped = true;
            s->pending = 1;
            in->c->type->shutdown(in->c, component_done);
            return true;
        }
        s->proc_cursor[0]++;
        s->proc_cursor[1] = 0;
    }
    return false;
}

static void shutdown_step(struct hs_service *s)
{
    switch (s->phase) {
    case 0:
        s->phase = 1;
        hs_log_info(NULL, "receivers stopped; draining processors");
        /* fall through */
    case 1:
        if (stop_next_processor(s))
            return;
        s->phase = 2;
        hs_log_info(NULL, "processors drained; flushing exporters");
        stop_all(s, s->exporters, s->nexporters);
        return;
    case 2:
        s->phase = 3;
        s->tel_ops->close(s->tel, telemetry_closed, s);
        return;
    }
}

void hs_service_shutdown(struct hs_service *s, void (*done)(void *ud), void *ud)
{
    s->done = done;
    s->done_ud = ud;
    s->phase = 0;
    s->tel_ops->set_ready(s->tel, false);
    hs_log_info(NULL, "shutting down: receivers stop accepting");
    stop_all(s, s->receivers, s->nreceivers);
}
