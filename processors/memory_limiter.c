/* memory_limiter.c: refuses data while the process's resident memory is above a soft limit
 * (otelcol's memory_limiter), so receivers answer 503/429 + Retry-After instead of growing until
 * the kernel kills us. Freed heap is handed back before each verdict above the soft limit, so only
 * memory in use can make it refuse, and /healthz/ready says so while it does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef __SANITIZE_ADDRESS__
void __sanitizer_purge_allocator(void); /* libasan; gcc ships no header declaring it */
#endif

#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

#define MIB (1024u * 1024u)

struct ml_config {
    uint64_t check_interval_ms;
    uint32_t limit_mib;
    uint32_t spike_limit_mib;
    uint32_t limit_percentage;
    uint32_t spike_limit_percentage;
};

/* otelcol's keys and meanings: 0 means "not set" for the limits, and an unset spike is 20% of
 * the limit. A limit in MiB and one in percent are exclusive (checked in create). */
static const struct hs_config_field ml_fields[] = {
    {"check_interval", HS_CFG_DURATION, offsetof(struct ml_config, check_interval_ms), "1s",
     .min = 10, .max = 3600000, .doc = "how often the resident set size is read"},
    {"limit_mib", HS_CFG_UINT, offsetof(struct ml_config, limit_mib), "0", .min = 0, .max = 1 << 22,
     .doc = "hard limit of the resident set, MiB (or use limit_percentage)"},
    {"spike_limit_mib", HS_CFG_UINT, offsetof(struct ml_config, spike_limit_mib), "0", .min = 0,
     .max = 1 << 22,
     .doc = "headroom below the hard limit: data is refused above limit - spike (0: 20% of the "
            "limit)"},
    {"limit_percentage", HS_CFG_UINT, offsetof(struct ml_config, limit_percentage), "0", .min = 0,
     .max = 100,
     .doc = "hard limit as a percentage of the machine's memory (the cgroup limit if set, else "
            "MemTotal)"},
    {"spike_limit_percentage", HS_CFG_UINT, offsetof(struct ml_config, spike_limit_percentage), "0",
     .min = 0, .max = 100,
     .doc = "headroom as a percentage of the machine's memory (0: 20% of the limit)"},
    {0},
};

/* Where readings come from: the real process by default, fakes in tests. */
struct hs_memory_limiter_probe {
    uint64_t (*rss)(void *ud);    /* resident bytes; 0 when unknown */
    uint64_t (*now_ms)(void *ud); /* monotonic clock */
    uint64_t (*total)(void *ud);  /* the machine's memory for the percentages; 0 unknown */
    void (*trim)(void *ud);       /* give freed heap back to the system */
    void *ud;
};

/* Test seam: replaces the probe of a created, not yet started limiter. Not in a header because
 * only tests/unit/test_memory_limiter.c uses it; it declares it itself. */
void hs_memory_limiter_set_probe(struct hs_component *c, const struct hs_memory_limiter_probe *p);

struct ml {
    struct hs_component base;
    struct ml_config conf;
    struct hs_memory_limiter_probe probe;
    uint64_t hard, soft; /* bytes, fixed in start */
    uint64_t rss;        /* last reading (after the trim, when one ran) */
    uint64_t checked_ms; /* when it was taken */
    uint64_t trimmed_ms; /* when malloc_trim last ran */
    bool have_reading, over_soft, trimmed_once;
    struct hs_health health; /* over_memory_limit while refusing: /healthz/ready reads it */
    uv_timer_t timer;
    bool started, closing;
    hs_done_cb done;
    struct hs_metrics *metrics; /* where the gauges are, to remove them at shutdown */
    struct hs_counter *refused, *trims;
    struct hs_ratelimit refuse_log;
};

static uint64_t read_statm_rss(void *ud)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return resident > 0 && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

static uint64_t mono_ms(void *ud)
{
    return uv_hrtime() / 1000000u;
}

/* The first number in a file, or 0 (absent, or "max": no limit). */
static uint64_t read_u64_file(const char *path)
{
    unsigned long long v = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

/* A container's memory is its cgroup limit, not the host's: otelcol's memory_limiter reads the
 * same two files (v2, then v1). v1 says "no limit" with a huge number, hence the MemTotal cap. */
static uint64_t machine_total(void *ud)
{
    uint64_t mem_total = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        unsigned long long kib;
        char line[128];
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
                mem_total = (uint64_t)kib * 1024u;
                break;
            }
        fclose(f);
    }
    uint64_t cg = read_u64_file("/sys/fs/cgroup/memory.max");
    if (!cg)
        cg = read_u64_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    if (cg && (!mem_total || cg < mem_total))
        return cg;
    return mem_total;
}

/* Hands every whole free page of every arena back (since glibc 2.8, not only the top of the
 * heap). The sanitizer build's allocator replaces glibc's and keeps freed memory in its
 * quarantine instead; purging it there keeps the limiter's behaviour the same in both builds. */
static void glibc_trim(void *ud)
{
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_purge_allocator();
#elif defined(__GLIBC__)
    malloc_trim(0);
#endif
}

static const struct hs_memory_limiter_probe default_probe = {
    .rss = read_statm_rss, .now_ms = mono_ms, .total = machine_total, .trim = glibc_trim};

void hs_memory_limiter_set_probe(struct hs_component *c, const struct hs_memory_limiter_probe *p)
{
    hs_container_of(c, struct ml, base)->probe = *p;
}

static int ml_create(const struct hs_config_node *cfg, const char *path, struct hs_component **out,
                     struct hs_error *err)
{
    struct ml *m = hs_xcalloc(1, sizeof(*m));
    int rc = hs_config_decode(ml_fields, cfg, &m->conf, path, err);
    const struct ml_config *k = &m->conf;
    if (rc == 0 && !k->limit_mib && !k->limit_percentage) {
        hs_config_errorf(err, cfg, path, "set limit_mib or limit_percentage");
        rc = HS_EINVAL;
    }
    if (rc == 0 && k->limit_mib && k->limit_percentage) {
        hs_config_errorf(err, hs_config_get(cfg, "limit_percentage"), path,
                         "limit_mib and limit_percentage are exclusive: set one");
        rc = HS_EINVAL;
    }
    if (rc == 0 && k->limit_mib && k->spike_limit_mib >= k->limit_mib) {
        hs_config_errorf(err, hs_config_get(cfg, "spike_limit_mib"), path,
                         "spike_limit_mib (%" PRIu32 ") must be below limit_mib (%" PRIu32 ")",
                         k->spike_limit_mib, k->limit_mib);
        rc = HS_EINVAL;
    }
    if (rc == 0 && k->limit_percentage && k->spike_limit_percentage >= k->limit_percentage) {
        hs_config_errorf(err, hs_config_get(cfg, "spike_limit_percentage"), path,
                         "spike_limit_percentage (%" PRIu32 ") must be below limit_percentage "
                         "(%" PRIu32 ")",
                         k->spike_limit_percentage, k->limit_percentage);
        rc = HS_EINVAL;
    }
    if (rc) {
        hs_config_free_fields(ml_fields, &m->conf);
        free(m);
        return HS_EINVAL;
    }
    m->probe = default_probe;
    m->refuse_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 1);
    *out = &m->base;
    return 0;
}

/* Keeps /healthz/ready's view in step: failing (with why) while refusing, healthy otherwise. */
static void ml_health(struct ml *m, bool over)
{
    if (!over) {
        if (m->health.over_memory_limit)
            hs_health_ok(&m->health, hs_now_ms());
        m->health.over_memory_limit = false;
        return;
    }
    char why[HS_HEALTH_ERROR_LEN];
    snprintf(why, sizeof(why),
             "pipeline %s: resident memory %" PRIu64 " MiB (after malloc_trim) is above the soft "
             "limit %" PRIu64 " MiB",
             m->base.pipeline ? m->base.pipeline : "-", m->rss / MIB, m->soft / MIB);
    hs_health_failed(&m->health, hs_now_ms(), why);
    m->health.over_memory_limit = true;
}

/* Takes a reading. Above the soft limit, the resident set may be mostly heap that was freed but
 * that glibc keeps for reuse (one large request leaves hundreds of MiB so): that is given back
 * first and the verdict is on the reading after it, so only memory in use refuses data. A trim
 * walks the heap's free lists, so at most once per interval, not on every batch. */
static void ml_check(struct ml *m)
{
    uint64_t now = m->probe.now_ms(m->probe.ud);
    m->rss = m->probe.rss(m->probe.ud);
    m->checked_ms = now;
    m->have_reading = true;
    if (m->rss > m->soft &&
        (!m->trimmed_once || now - m->trimmed_ms >= m->conf.check_interval_ms)) {
        uint64_t before = m->rss;
        m->probe.trim(m->probe.ud);
        hs_counter_add(m->trims, 1);
        m->trimmed_ms = now;
        m->trimmed_once = true;
        m->rss = m->probe.rss(m->probe.ud);
        hs_log_debug(m->base.id, "malloc_trim: %" PRIu64 " MiB resident before, %" PRIu64 " after",
                     before / MIB, m->rss / MIB);
    }
    bool over = m->rss > m->soft;
    if (over != m->over_soft)
        hs_log(over ? HS_LOG_WARN : HS_LOG_INFO, m->base.id,
               over ? "memory use %" PRIu64 " MiB is above the soft limit %" PRIu64
                      " MiB after giving freed heap back: refusing data"
                    : "memory use %" PRIu64 " MiB is below the soft limit %" PRIu64
                      " MiB again: accepting data",
               m->rss / MIB, m->soft / MIB);
    m->over_soft = over;
    ml_health(m, over);
}

static void ml_on_timer(uv_timer_t *t)
{
    ml_check(t->data);
}

/* Downstream of a per-pipeline instance is one signal's consumer. hs_consumer_ready walks
 * pass-through processors by their traces output, so for profiles only the direct targets are
 * asked here; hs_consumer_profiles still checks the whole chain before delivering anything. */
static bool next_ready(struct hs_component *c)
{
    if (c->next && !hs_consumer_ready(c->next))
        return false;
    if (c->next_profiles)
        for (size_t i = 0; i < c->next_profiles->count; i++) {
            struct hs_component *t = c->next_profiles->targets[i];
            if (t->type->ready && !t->type->ready(t))
                return false;
        }
    return true;
}

/* Counts and logs (rate-limited) one refusal; the receiver counts the items it refused. */
static void ml_refused(struct ml *m)
{
    hs_counter_add(m->refused, 1);
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&m->refuse_log, m->probe.now_ms(m->probe.ud), &suppressed))
        hs_log_warn(m->base.id,
                    "refused data: memory use %" PRIu64 " MiB above the soft limit %" PRIu64
                    " MiB (%" PRIu32 " more refusals not logged)",
                    m->rss / MIB, m->soft / MIB, suppressed);
}

static bool ml_memory_ok(struct ml *m)
{
    if (!m->started || m->closing)
        return !m->closing;
    /* a burst of requests can grow memory within one interval: a stale reading is refreshed
     * when data arrives, not only on the timer */
    if (!m->have_reading ||
        m->probe.now_ms(m->probe.ud) - m->checked_ms >= m->conf.check_interval_ms)
        ml_check(m);
    if (m->over_soft) {
        ml_refused(m);
        return false;
    }
    return true;
}

static bool ml_ready(struct hs_component *c)
{
    struct ml *m = hs_container_of(c, struct ml, base);
    return ml_memory_ok(m) && next_ready(c);
}

/* Pass-through: the batch goes on unchanged. Refuses (HS_EAGAIN) only if called without asking
 * ready() first while over the limit; delivery below is all-or-nothing already. */
static int ml_consume_traces(struct hs_component *c, struct hs_traces *t)
{
    struct ml *m = hs_container_of(c, struct ml, base);
    if (!ml_memory_ok(m)) {
        hs_traces_unref(t);
        return HS_EAGAIN;
    }
    return hs_consumer_traces(c->next, t);
}

static int ml_consume_profiles(struct hs_component *c, struct hs_profiles *p)
{
    struct ml *m = hs_container_of(c, struct ml, base);
    if (!ml_memory_ok(m)) {
        hs_profiles_unref(p);
        return HS_EAGAIN;
    }
    return hs_consumer_profiles(c->next_profiles, p);
}

static double gauge_soft(void *ud)
{
    return (double)((struct ml *)ud)->soft;
}

static double gauge_hard(void *ud)
{
    return (double)((struct ml *)ud)->hard;
}

static double gauge_rss(void *ud)
{
    return (double)((struct ml *)ud)->rss;
}

static double gauge_refusing(void *ud)
{
    return ((struct ml *)ud)->over_soft ? 1 : 0;
}

/* Fixes the limits in bytes. Percentages need the machine's memory, which is read here rather
 * than in create (no I/O there). Returns 0 or HS_EINVAL when it cannot be known. */
static int ml_limits(struct ml *m)
{
    const struct ml_config *k = &m->conf;
    if (k->limit_mib) {
        m->hard = (uint64_t)k->limit_mib * MIB;
        m->soft = m->hard - (k->spike_limit_mib ? (uint64_t)k->spike_limit_mib * MIB : m->hard / 5);
        return 0;
    }
    uint64_t total = m->probe.total(m->probe.ud);
    if (!total) {
        hs_log_error(m->base.id, "limit_percentage: the machine's memory is unknown (no cgroup "
                                 "limit, no MemTotal in /proc/meminfo); use limit_mib");
        return HS_EINVAL;
    }
    m->hard = total / 100 * k->limit_percentage;
    m->soft = m->hard -
              (k->spike_limit_percentage ? total / 100 * k->spike_limit_percentage : m->hard / 5);
    return 0;
}

static int ml_start(struct hs_component *c, const struct hs_host *host)
{
    struct ml *m = hs_container_of(c, struct ml, base);
    int rc = ml_limits(m);
    if (rc)
        return rc;
    char labels[256];
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", c->id,
             c->pipeline ? c->pipeline : "");
    m->refused = hs_metrics_counter(host->metrics, "processor_memory_limiter_refused_total",
                                    "Hand-overs refused because memory use was above the soft "
                                    "limit (the receivers count the refused items)",
                                    labels);
    m->trims = hs_metrics_counter(host->metrics, "processor_memory_limiter_trims_total",
                                  "Times freed heap was given back to the system (above the soft "
                                  "limit, at most once per check_interval)",
                                  labels);
    hs_metrics_gauge(host->metrics, "processor_memory_limiter_soft_limit_bytes",
                     "Resident memory above which data is refused", labels, gauge_soft, m);
    hs_metrics_gauge(host->metrics, "processor_memory_limiter_hard_limit_bytes",
                     "The memory limit configured (limit_mib or limit_percentage)", labels,
                     gauge_hard, m);
    hs_metrics_gauge(host->metrics, "processor_memory_limiter_rss_bytes",
                     "The last resident memory reading (after giving freed heap back, when that "
                     "ran)",
                     labels, gauge_rss, m);
    hs_metrics_gauge(host->metrics, "processor_memory_limiter_refusing",
                     "1 while memory use is above the soft limit and data is refused, else 0",
                     labels, gauge_refusing, m);
    m->metrics = host->metrics;
    hs_metrics_health(host->metrics, c->id, &m->health, m);
    uv_timer_init(host->loop, &m->timer);
    m->timer.data = m;
    uv_timer_start(&m->timer, ml_on_timer, m->conf.check_interval_ms, m->conf.check_interval_ms);
    m->started = true;
    ml_check(m);
    hs_log_info(c->id, "limits: soft %" PRIu64 " MiB, hard %" PRIu64 " MiB; now %" PRIu64 " MiB",
                m->soft / MIB, m->hard / MIB, m->rss / MIB);
    return 0;
}

static void ml_timer_closed(uv_handle_t *h)
{
    struct ml *m = h->data;
    m->done(&m->base); /* nothing of ours is in the loop any more */
}

static void ml_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct ml *m = hs_container_of(c, struct ml, base);
    if (m->closing) /* already on its way; the first done will fire */
        return;
    m->closing = true;
    if (!m->started) {
        done(c);
        return;
    }
    m->done = done;
    hs_metrics_gauge_remove(m->metrics, m);
    uv_close((uv_handle_t *)&m->timer, ml_timer_closed);
}

static void ml_destroy(struct hs_component *c)
{
    struct ml *m = hs_container_of(c, struct ml, base);
    hs_config_free_fields(ml_fields, &m->conf);
    free(m);
}

const struct hs_component_type hs_processor_memory_limiter = {
    .name = "memory_limiter",
    .kind = HS_KIND_PROCESSOR,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Refuses data while resident memory is above a soft limit (receivers answer "
           "503/429 + Retry-After).",
    .fields = ml_fields,
    .create = ml_create,
    .start = ml_start,
    .consume_traces = ml_consume_traces,
    .consume_profiles = ml_consume_profiles,
    .ready = ml_ready,
    .shutdown = ml_shutdown,
    .destroy = ml_destroy,
};
