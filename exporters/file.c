/* file.c: the file exporter (otelcol's fileexporter): each traces batch is appended to `path` as
 * one line of OTLP/JSON, each profile as one line of its own JSON shape (below), an OTLP
 * profiles request as one line of OTLP/JSON (as otelcol writes profiles), and the file is
 * rotated by size into path.1 ... path.N. Writes are
 * synchronous write(2) on the loop thread, as Fluent Bit's out_file does: a local append is short,
 * and doing it inline keeps lines in order and every drop counted where it happens. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

struct rotation_config {
    uint32_t max_megabytes;
    uint32_t max_backups;
};

struct file_config {
    char *path;
    bool rotate; /* the `rotation` key was written */
    struct rotation_config rotation;
};

static const struct hs_config_field rotation_fields[] = {
    {"max_megabytes", HS_CFG_UINT, offsetof(struct rotation_config, max_megabytes), "100", .min = 1,
     .max = 1 << 20, .doc = "size in MiB a file may reach before it is rotated"},
    {"max_backups", HS_CFG_UINT, offsetof(struct rotation_config, max_backups), "100", .min = 1,
     .max = 10000, .doc = "rotated files kept (path.1 is the newest); older ones are deleted"},
    {0},
};

static const struct hs_config_field file_fields[] = {
    {"path", HS_CFG_STRING, offsetof(struct file_config, path), NULL, .required = true,
     .doc = "file the JSON lines are appended to (created with mode 0644)"},
    {"rotation", HS_CFG_SECTION, offsetof(struct file_config, rotation), NULL,
     .sub = rotation_fields, .has_presence = true,
     .presence_offset = offsetof(struct file_config, rotate),
     .doc = "rotate by size; without this key the file grows without bound"},
    {0},
};

struct file_exp {
    struct hs_component base;
    struct file_config conf;
    int fd;                /* -1 when closed */
    uint64_t size;         /* bytes in the current file */
    uint64_t rotate_bytes; /* max_megabytes in bytes; 0 without rotation */
    uint64_t rotate_at;    /* rotate before a write would take size past this */
    struct hs_buf line;
    char *name_a, *name_b; /* room for "path.N" while rotating */
    bool started, closing;
    struct hs_metrics *metrics;
    struct hs_counter *sent, *failed;                   /* spans */
    struct hs_counter *sent_profiles, *failed_profiles; /* profiles */
    struct hs_ratelimit log_rl;
};

static int file_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct file_exp *f = hs_xcalloc(1, sizeof(*f));
    f->fd = -1;
    f->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    if (hs_config_decode(file_fields, cfg, &f->conf, path, err) != 0)
        goto fail;
    if (!f->conf.path || !f->conf.path[0]) {
        char kp[256];
        snprintf(kp, sizeof(kp), "%s.path", path);
        hs_config_errorf(err, hs_config_get(cfg, "path"), kp, "must not be empty");
        goto fail;
    }
    if (f->conf.rotate)
        f->rotate_bytes = (uint64_t)f->conf.rotation.max_megabytes << 20;
    size_t n = strlen(f->conf.path) + 16;
    f->name_a = hs_xmalloc(n);
    f->name_b = hs_xmalloc(n);
    *out = &f->base;
    return 0;
fail:
    hs_config_free_fields(file_fields, &f->conf);
    free(f);
    return HS_EINVAL;
}

static int file_open(struct file_exp *f)
{
    f->fd = open(f->conf.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (f->fd < 0)
        return -errno;
    struct stat st;
    f->size = fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    f->rotate_at = f->rotate_bytes;
    return 0;
}

static void backup_name(const struct file_exp *f, char *out, unsigned i)
{
    sprintf(out, "%s.%u", f->conf.path, i); /* sized at create: path + 16 */
}

/* path -> path.1, path.1 -> path.2, ...; the one past max_backups is deleted, and the caller
 * opens a new path. If path itself cannot be renamed we keep appending to it and try again
 * after another max_megabytes, rather than shifting the backups out on every write. */
static void file_rotate(struct file_exp *f)
{
    unsigned max = f->conf.rotation.max_backups;
    backup_name(f, f->name_a, max);
    if (unlink(f->name_a) != 0 && errno != ENOENT)
        hs_log_warn(f->base.id, "rotate: delete %s: %s", f->name_a, strerror(errno));
    for (unsigned i = max - 1; i >= 1; i--) {
        backup_name(f, f->name_a, i);
        backup_name(f, f->name_b, i + 1);
        if (rename(f->name_a, f->name_b) != 0 && errno != ENOENT)
            hs_log_warn(f->base.id, "rotate: %s -> %s: %s", f->name_a, f->name_b, strerror(errno));
    }
    backup_name(f, f->name_a, 1);
    if (rename(f->conf.path, f->name_a) != 0) {
        hs_log_error(f->base.id, "rotate: %s -> %s: %s", f->conf.path, f->name_a, strerror(errno));
        f->rotate_at = f->size + f->rotate_bytes;
        return;
    }
    close(f->fd); /* what we wrote is in path.1 now */
    f->fd = -1;
}

static void log_errno(struct file_exp *f, const char *what, int code)
{
    uint32_t suppressed = 0;
    if (!hs_ratelimit_allow(&f->log_rl, hs_now_ms(), &suppressed))
        return;
    if (suppressed)
        hs_log_error(f->base.id, "%s %s: %s (%u similar messages suppressed)", what, f->conf.path,
                     strerror(-code), suppressed);
    else
        hs_log_error(f->base.id, "%s %s: %s", what, f->conf.path, strerror(-code));
}

/* Appends f->line whole or not at all: a short write is cut back off, so the file stays a
 * sequence of complete JSON lines even when the disk fills up. */
static int file_write_line(struct file_exp *f)
{
    if (f->fd >= 0 && f->rotate_bytes && f->size > 0 && f->size + f->line.len > f->rotate_at)
        file_rotate(f);
    int rc;
    if (f->fd < 0 && (rc = file_open(f)) != 0) {
        log_errno(f, "open", rc);
        return rc;
    }
    for (size_t done = 0; done < f->line.len;) {
        ssize_t n = write(f->fd, f->line.data + done, f->line.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : HS_EIO;
            if (done && ftruncate(f->fd, (off_t)f->size) != 0)
                f->size += done; /* the partial line stays; count it toward rotation */
            log_errno(f, "write", rc);
            return rc;
        }
        done += (size_t)n;
    }
    f->size += f->line.len;
    return 0;
}

static void file_drop(struct file_exp *f, struct hs_counter *failed, const char *reason,
                      uint32_t items)
{
    hs_counter_add(failed, items);
    hs_metrics_drop(f->metrics, f->base.id, reason, items);
}

static int file_consume(struct hs_component *c, struct hs_traces *t)
{
    struct file_exp *f = hs_container_of(c, struct file_exp, base);
    if (!f->started || f->closing) {
        hs_traces_unref(t);
        return HS_EAGAIN;
    }
    uint32_t spans = t->spans;
    hs_buf_reset(&f->line);
    int rc = hs_otlp_wire_to_json(t->data, t->len, &f->line);
    if (rc == 0)
        rc = hs_buf_putc(&f->line, '\n');
    hs_traces_unref(t);
    if (rc) {
        file_drop(f, f->failed, rc == HS_ENOMEM ? "out_of_memory" : "encode_failed", spans);
    } else if (file_write_line(f) != 0) {
        /* a local disk that failed is not the client's to retry: drop, count, carry on */
        file_drop(f, f->failed, "write_failed", spans);
    } else {
        hs_counter_add(f->sent, spans);
    }
    if (f->line.cap > (4u << 20)) /* one huge batch should not pin its buffer for good */
        hs_buf_free(&f->line);
    return 0;
}

/* ---- profiles: one JSON line each ------------------------------------------------------- */

static int put_str_or_null(struct hs_buf *b, const char *s)
{
    return s ? hs_json_put_string(b, s, strlen(s)) : hs_buf_printf(b, "null");
}

/* int64 as a decimal string, as OTLP/JSON writes it: JSON readers lose precision past 2^53. */
static int put_i64(struct hs_buf *b, int64_t v)
{
    return hs_buf_printf(b, "\"%" PRId64 "\"", v);
}

static int put_i64_array(struct hs_buf *b, const int64_t *v, uint32_t n)
{
    int rc = hs_buf_putc(b, '[');
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        if (i)
            rc = hs_buf_putc(b, ',');
        if (rc == 0)
            rc = put_i64(b, v ? v[i] : 0);
    }
    return rc ? rc : hs_buf_putc(b, ']');
}

/* Functions by total of the main type, heaviest first, then by name. */
static int func_cmp(const void *a, const void *b, void *ud)
{
    const struct hs_profile_summary *s = ud;
    const struct hs_profile_func *fa = &s->funcs[*(const uint32_t *)a];
    const struct hs_profile_func *fb = &s->funcs[*(const uint32_t *)b];
    int64_t ta = fa->total ? fa->total[s->main_type] : 0;
    int64_t tb = fb->total ? fb->total[s->main_type] : 0;
    if (ta != tb)
        return ta > tb ? -1 : 1;
    return strcmp(fa->name ? fa->name : "", fb->name ? fb->name : "");
}

static int put_functions(struct hs_buf *b, const struct hs_profile_summary *s)
{
    uint32_t *order = malloc((s->nfuncs ? s->nfuncs : 1) * sizeof(*order));
    if (!order)
        return HS_ENOMEM;
    for (uint32_t i = 0; i < s->nfuncs; i++)
        order[i] = i;
    if (s->ntypes > 0)
        qsort_r(order, s->nfuncs, sizeof(*order), func_cmp, (void *)s);
    int rc = hs_buf_printf(b, ",\"functions\":[");
    for (uint32_t i = 0; i < s->nfuncs && rc == 0; i++) {
        const struct hs_profile_func *fn = &s->funcs[order[i]];
        rc = hs_buf_printf(b, "%s{\"name\":", i ? "," : "");
        rc = rc ? rc : put_str_or_null(b, fn->name ? fn->name : "");
        rc = rc ? rc : hs_buf_printf(b, ",\"file\":");
        rc = rc ? rc : put_str_or_null(b, fn->file ? fn->file : "");
        rc = rc ? rc : hs_buf_printf(b, ",\"self\":");
        rc = rc ? rc : put_i64_array(b, fn->self, s->ntypes);
        rc = rc ? rc : hs_buf_printf(b, ",\"total\":");
        rc = rc ? rc : put_i64_array(b, fn->total, s->ntypes);
        rc = rc ? rc : hs_buf_putc(b, '}');
    }
    free(order);
    return rc ? rc : hs_buf_putc(b, ']');
}

static int put_summary(struct hs_buf *b, const struct hs_profile_summary *s)
{
    int rc = hs_buf_printf(b, ",\"samples\":%" PRIu32 ",\"period_type\":", s->samples);
    rc = rc ? rc : put_str_or_null(b, s->period_type);
    rc = rc ? rc : hs_buf_printf(b, ",\"period_unit\":");
    rc = rc ? rc : put_str_or_null(b, s->period_unit);
    rc = rc ? rc : hs_buf_printf(b, ",\"period\":");
    rc = rc ? rc : put_i64(b, s->period);
    rc = rc ? rc : hs_buf_printf(b, ",\"types\":[");
    for (uint32_t i = 0; i < s->ntypes && rc == 0; i++) {
        rc = hs_buf_printf(b, "%s{\"type\":", i ? "," : "");
        rc = rc ? rc : put_str_or_null(b, s->types ? s->types[i] : NULL);
        rc = rc ? rc : hs_buf_printf(b, ",\"unit\":");
        rc = rc ? rc : put_str_or_null(b, s->units ? s->units[i] : NULL);
        rc = rc ? rc : hs_buf_printf(b, ",\"id\":");
        rc = rc ? rc : put_str_or_null(b, s->type_ids ? s->type_ids[i] : NULL);
        rc = rc ? rc : hs_buf_printf(b, ",\"total\":");
        rc = rc ? rc : put_i64(b, s->totals ? s->totals[i] : 0);
        rc = rc ? rc : hs_buf_putc(b, '}');
    }
    rc = rc ? rc : hs_buf_printf(b, "],\"main_type\":%" PRIu32, s->main_type);
    rc = rc ? rc : put_functions(b, s);
    rc = rc ? rc : hs_buf_printf(b, ",\"spans\":[");
    for (uint32_t i = 0; i < s->nspans && rc == 0; i++) {
        const uint8_t *id = s->spans[i].id;
        rc = hs_buf_printf(b, "%s{\"span_id\":\"%02x%02x%02x%02x%02x%02x%02x%02x\",\"values\":",
                           i ? "," : "", id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]);
        rc = rc ? rc : put_i64_array(b, s->spans[i].values, s->ntypes);
        rc = rc ? rc : hs_buf_putc(b, '}');
    }
    return rc ? rc : hs_buf_putc(b, ']');
}

/* {"profile":{"tenant":..,"labels":{..},"from_ns":"..","until_ns":"..","id":..,<summary>,
 * "pprof":"<base64 of the bytes as received>"}} and a newline. */
static int profile_line(const char *tenant, const struct hs_profile *p, struct hs_buf *b)
{
    int rc = hs_buf_printf(b, "{\"profile\":{\"tenant\":");
    rc = rc ? rc : put_str_or_null(b, tenant);
    rc = rc ? rc : hs_buf_printf(b, ",\"labels\":{");
    for (uint32_t i = 0; i < p->nlabels && rc == 0; i++) {
        rc = i ? hs_buf_putc(b, ',') : 0;
        rc = rc ? rc : put_str_or_null(b, p->labels[i].name);
        rc = rc ? rc : hs_buf_putc(b, ':');
        rc = rc ? rc : put_str_or_null(b, p->labels[i].value);
    }
    rc = rc ? rc : hs_buf_printf(b, "},\"from_ns\":");
    rc = rc ? rc : put_i64(b, p->from_ns);
    rc = rc ? rc : hs_buf_printf(b, ",\"until_ns\":");
    rc = rc ? rc : put_i64(b, p->until_ns);
    rc = rc ? rc : hs_buf_printf(b, ",\"id\":");
    rc = rc ? rc : put_str_or_null(b, p->id);
    rc = rc ? rc : put_summary(b, &p->summary);
    rc = rc ? rc : hs_buf_printf(b, ",\"pprof\":\"");
    rc = rc ? rc : hs_buf_put_base64(b, p->raw, p->raw_len);
    rc = rc ? rc : hs_buf_printf(b, "\"}}\n");
    return rc;
}

/* An OTLP request: {"resourceProfiles":[...],"dictionary":{...}}, the ProfilesData a Collector's
 * otlpjsonfile receiver reads back, whether or not an exporter converted its profiles. */
static void file_write_otlp(struct file_exp *f, const struct hs_profiles *batch)
{
    uint32_t n = batch->request_profiles;
    hs_buf_reset(&f->line);
    int rc = hs_otlp_wire_to_json_desc(
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
        batch->request, batch->request_len, &f->line);
    if (rc == 0)
        rc = hs_buf_putc(&f->line, '\n');
    if (rc)
        file_drop(f, f->failed_profiles, rc == HS_ENOMEM ? "out_of_memory" : "encode_failed", n);
    else if (file_write_line(f) != 0)
        file_drop(f, f->failed_profiles, "write_failed", n);
    else
        hs_counter_add(f->sent_profiles, n);
}

static int file_consume_profiles(struct hs_component *c, struct hs_profiles *batch)
{
    struct file_exp *f = hs_container_of(c, struct file_exp, base);
    if (!f->started || f->closing) {
        hs_profiles_unref(batch);
        return HS_EAGAIN;
    }
    if (batch->format == HS_PROFILES_OTLP)
        file_write_otlp(f, batch);
    for (uint32_t i = 0; batch->format != HS_PROFILES_OTLP && i < batch->count; i++) {
        hs_buf_reset(&f->line);
        int rc = profile_line(batch->tenant, batch->items[i], &f->line);
        if (rc)
            file_drop(f, f->failed_profiles, rc == HS_ENOMEM ? "out_of_memory" : "encode_failed",
                      1);
        else if (file_write_line(f) != 0)
            file_drop(f, f->failed_profiles, "write_failed", 1);
        else
            hs_counter_add(f->sent_profiles, 1);
    }
    hs_profiles_unref(batch);
    if (f->line.cap > (4u << 20)) /* one huge profile should not pin its buffer for good */
        hs_buf_free(&f->line);
    return 0;
}

static bool file_ready(struct hs_component *c)
{
    struct file_exp *f = hs_container_of(c, struct file_exp, base);
    return f->started && !f->closing;
}

static int file_start(struct hs_component *c, const struct hs_host *host)
{
    struct file_exp *f = hs_container_of(c, struct file_exp, base);
    f->metrics = host->metrics;
    struct hs_exporter_counters counters = hs_metrics_exporter(host->metrics, c->id);
    f->sent = counters.sent;
    f->failed = counters.failed;
    counters = hs_metrics_exporter_signal(host->metrics, c->id, HS_SIGNAL_PROFILES);
    f->sent_profiles = counters.sent;
    f->failed_profiles = counters.failed;
    int rc = file_open(f);
    if (rc) {
        hs_log_error(c->id, "open %s: %s", f->conf.path, strerror(-rc));
        return rc;
    }
    f->started = true;
    return 0;
}

/* Nothing of ours is in the loop, so done can be called at once. */
static void file_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct file_exp *f = hs_container_of(c, struct file_exp, base);
    if (f->closing)
        return;
    f->closing = true;
    if (f->fd >= 0 && close(f->fd) != 0)
        hs_log_error(c->id, "close %s: %s", f->conf.path, strerror(errno));
    f->fd = -1;
    done(c);
}

static void file_destroy(struct hs_component *c)
{
    struct file_exp *f = hs_container_of(c, struct file_exp, base);
    if (f->fd >= 0)
        close(f->fd);
    hs_buf_free(&f->line);
    free(f->name_a);
    free(f->name_b);
    hs_config_free_fields(file_fields, &f->conf);
    free(f);
}

const struct hs_component_type hs_exporter_file = {
    .name = "file",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Appends each traces batch and OTLP profiles request (as OTLP/JSON) and each pprof "
           "profile as a JSON line to a file, rotated by size.",
    .fields = file_fields,
    .create = file_create,
    .start = file_start,
    .consume_traces = file_consume,
    .consume_profiles = file_consume_profiles,
    .ready = file_ready,
    .shutdown = file_shutdown,
    .destroy = file_destroy,
};
