/* main.c: the command line. `hotspan` runs the embedded default config, `-c FILE` runs a file,
 * `demo` runs one with a built-in traffic generator, `validate` checks one without starting,
 * `config-reference` prints every component's keys. It wires what the core does not know: the
 * service's telemetry (admin/telemetry.c: logs and the admin endpoint), the demo (demo/), the
 * listeners' share of the file limit and TLS reloads (net/). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <uv.h>

#include "admin/telemetry.h"
#include "core/buf.h"
#include "core/component.h"
#include "core/config.h"
#include "core/log.h"
#include "core/service.h"
#include "demo/demo.h"
#include "net/http_server.h"
#include "net/tls.h"

extern const char hs_default_config[];
extern const size_t hs_default_config_len;

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

static const char usage[] =
    "usage: hotspan [-c FILE]            run a config (default: the embedded one)\n"
    "       hotspan demo [-c FILE] [--duration SECONDS] [--seed N]\n"
    "                                    run it with built-in traffic sent to its own receivers\n"
    "                                    (api-server -> user-db, N+1 requests, CPU profiles) and\n"
    "                                    print each slow span the correlator enriched\n"
    "       hotspan validate -c FILE     check a config without starting; errors as\n"
    "                                    FILE:LINE:COL: key.path: message\n"
    "       hotspan config-reference     print every component's config keys (Markdown)\n"
    "       hotspan --help | --version\n"
    "\n"
    "options:\n"
    "  -c, --config FILE   the YAML config (OpenTelemetry-Collector-shaped)\n"
    "  -h, --help          this text\n"
    "  -v, --version       the version\n"
    "  --duration SECONDS  demo: generate for this long, then drain and exit 0 (default: until\n"
    "                      SIGTERM/Ctrl-C)\n"
    "  --seed N            demo: the traffic's random seed, to repeat a run (default: the clock)\n"
    "\n"
    "exit status: 0 clean exit (after SIGTERM/SIGINT, everything accepted was sent),\n"
    "             1 runtime failure (e.g. a port in use), 2 usage or config error (for demo,\n"
    "             also a config without the receivers it sends to)\n";

struct demo_opts {
    bool on;
    uint64_t duration_s; /* 0: until a signal */
    uint64_t seed;
};

struct run {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t deadline; /* service.shutdown_timeout */
    uv_timer_t demo_end; /* demo --duration */
    struct hs_service *svc;
    struct hs_demo *demo; /* while the generator runs */
    bool stopping;
    bool started;
};

static int load(const char *path, struct hs_service **svc)
{
    struct hs_error err = {0};
    int rc = path ? hs_service_load_file(path, &hs_admin_telemetry, svc, &err)
                  : hs_service_load("<embedded default>", hs_default_config, hs_default_config_len,
                                    &hs_admin_telemetry, svc, &err);
    for (size_t i = 0; i < err.count; i++)
        fprintf(stderr, "%s\n", err.lines[i]);
    hs_error_free(&err);
    return rc ? EXIT_USAGE : 0;
}

static void walk_closed(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void drained(void *ud)
{
    struct run *r = ud;
    uv_close((uv_handle_t *)&r->sigterm, NULL);
    uv_close((uv_handle_t *)&r->sigint, NULL);
    uv_close((uv_handle_t *)&r->sighup, NULL);
    uv_close((uv_handle_t *)&r->deadline, NULL);
    uv_close((uv_handle_t *)&r->demo_end, NULL);
}

static void on_deadline(uv_timer_t *t)
{
    struct run *r = t->data;
    hs_log_error(NULL, "service.shutdown_timeout (%llu ms) passed before the exporters sent "
                       "everything: exiting; what in-memory queues still held is lost (queues "
                       "with sending_queue.storage keep theirs on disk for the next start)",
                 (unsigned long long)hs_service_shutdown_timeout(r->svc));
    exit(EXIT_RUNTIME);
}

static void drain(struct run *r)
{
    uint64_t ms = hs_service_shutdown_timeout(r->svc);
    if (ms)
        uv_timer_start(&r->deadline, on_deadline, ms, 0);
    hs_service_shutdown(r->svc, drained, r);
}

static void demo_stopped(void *ud)
{
    struct run *r = ud;
    r->demo = NULL;
    drain(r);
}

/* The generator stops first (its last requests and profiles answered), so the service drains
 * everything it sent, as it would any client's. */
static void begin_shutdown(struct run *r)
{
    r->stopping = true;
    uv_timer_stop(&r->demo_end);
    if (r->demo)
        hs_demo_stop(r->demo, demo_stopped, r);
    else
        drain(r);
}

static void on_demo_end(uv_timer_t *t)
{
    struct run *r = t->data;
    hs_log_info("demo", "--duration passed: stopping the generator, then draining");
    begin_shutdown(r);
}

static void demo_banner(const struct hs_demo_targets *t, uint64_t seed)
{
    printf("hotspan demo: a built-in generator sends traffic into this hotspan over its own "
           "receivers:\n"
           "  traces    api-server GET /users/:id -> user-db UserRepository.findByEmail, to %s\n"
           "            every few seconds an N+1 request: findByEmail ~600 ms, 30-60 "
           "preference queries\n"
           "  profiles  CPU (pprof) of both services and api-server's goroutines every 1-2 s, "
           "to %s\n",
           t->traces_url, t->ingest_url);
    if (t->admin[0]) {
        char host[256];
        uint16_t port;
        if (hs_parse_endpoint(t->admin, host, sizeof(host), &port) == 0) {
            const char *h = !host[0] || strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host;
            printf("  ui        http://%s:%u/ui   (metrics: /metrics)\n", h, (unsigned)port);
        }
    }
    printf("Slow spans (the correlator's slow.threshold) are printed below once the profile "
           "covering them has\narrived (a few seconds): service, span, duration, where the CPU "
           "went, N+1. Seed %" PRIu64 ".\nCtrl-C to stop.\n\n",
           seed);
    fflush(stdout);
}

/* Linux's ceiling for RLIMIT_NOFILE, for a hard limit of "unlimited" (which it refuses). */
static rlim_t nr_open(void)
{
    unsigned long long n = 0;
    FILE *f = fopen("/proc/sys/fs/nr_open", "r");
    if (f) {
        if (fscanf(f, "%llu", &n) != 1)
            n = 0;
        fclose(f);
    }
    return n ? (rlim_t)n : 1048576;
}

/* Every connection is a file descriptor: the soft file limit (often 1024) goes up to the hard
 * one, and the HTTP listeners learn what they may use of it (hs_http_server_set_file_limit). */
static void raise_file_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        hs_log_warn(NULL, "cannot read the file limit (RLIMIT_NOFILE): %s", strerror(errno));
        return;
    }
    rlim_t was = rl.rlim_cur, want = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
    int err = 0;
    if (was != RLIM_INFINITY && was < want) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            err = errno;
            rl.rlim_cur = was;
        }
    }
    uint64_t limit = rl.rlim_cur == RLIM_INFINITY ? (uint64_t)want : (uint64_t)rl.rlim_cur;
    uint64_t share = hs_http_server_set_file_limit(limit);
    char from[64] = "";
    if (err)
        hs_log_warn(NULL, "file limit %llu: raising it to the hard limit %llu failed: %s",
                    (unsigned long long)limit, (unsigned long long)want, strerror(err));
    else if (rl.rlim_cur != was)
        snprintf(from, sizeof(from), ", raised from %llu", (unsigned long long)was);
    hs_log_info(NULL,
                "file limit %llu (hard limit %llu%s): the receivers' connections may use %llu of "
                "it, %llu are kept for exporters, files and the admin endpoint",
                (unsigned long long)limit, (unsigned long long)want, from,
                (unsigned long long)share, (unsigned long long)(limit - share));
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct run *r = h->data;
    if (r->stopping) {
        hs_log_error(NULL, "second %s: exiting now; data held in memory is lost (stored queues "
                     "keep theirs)",
                     signum == SIGINT ? "SIGINT" : "SIGTERM");
        exit(EXIT_RUNTIME);
    }
    hs_log_info(NULL, "%s received: draining (send it again to exit at once)",
                signum == SIGINT ? "SIGINT" : "SIGTERM");
    begin_shutdown(r);
}

static void on_sighup(uv_signal_t *h, int signum)
{
    hs_log_info(NULL, "SIGHUP received: reloading TLS certificates and keys");
    hs_tls_reload_all();
}

static int run(const char *path, const struct demo_opts *demo)
{
    struct run r = {0};
    int rc = load(path, &r.svc);
    if (rc)
        return rc;
    struct hs_demo_targets targets;
    if (demo->on) {
        struct hs_error err = {0};
        rc = hs_demo_targets_read(path, hs_default_config, hs_default_config_len, &targets, &err);
        for (size_t i = 0; i < err.count; i++)
            fprintf(stderr, "%s\n", err.lines[i]);
        hs_error_free(&err);
        if (rc) {
            hs_service_free(r.svc);
            return EXIT_USAGE;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&r.loop);
    uv_signal_init(&r.loop, &r.sigterm);
    uv_signal_init(&r.loop, &r.sigint);
    uv_signal_init(&r.loop, &r.sighup);
    uv_timer_init(&r.loop, &r.deadline);
    uv_timer_init(&r.loop, &r.demo_end);
    r.sigterm.data = r.sigint.data = r.deadline.data = r.demo_end.data = &r;
    uv_signal_start(&r.sigterm, on_signal, SIGTERM);
    uv_signal_start(&r.sigint, on_signal, SIGINT);
    uv_signal_start(&r.sighup, on_sighup, SIGHUP);

    raise_file_limit();
    struct hs_error err = {0};
    int srv = hs_service_start(r.svc, &r.loop, &err);
    for (size_t i = 0; i < err.count; i++)
        hs_log_error(NULL, "%s", err.lines[i]);
    hs_error_free(&err);
    if (!srv)
        hs_http_server_check_file_limit();
    if (srv) {
        begin_shutdown(&r);
    } else if (demo->on) {
        demo_banner(&targets, demo->seed);
        r.demo = hs_demo_start(&r.loop, &targets, demo->seed);
        if (!r.demo) {
            hs_log_error("demo", "cannot make the HTTP client: exiting");
            srv = HS_ENOMEM;
            begin_shutdown(&r);
        } else if (demo->duration_s) {
            uv_timer_start(&r.demo_end, on_demo_end, demo->duration_s * 1000, 0);
        }
    }
    uv_run(&r.loop, UV_RUN_DEFAULT);
    hs_service_free(r.svc);
    if (uv_loop_close(&r.loop) != 0) {
        hs_log_error(NULL, "handles left open at exit (a bug): closing them");
        uv_walk(&r.loop, walk_closed, NULL);
        uv_run(&r.loop, UV_RUN_DEFAULT);
        uv_loop_close(&r.loop);
    }
    return srv ? EXIT_RUNTIME : 0;
}

static int validate(const char *path)
{
    if (!path) {
        fprintf(stderr, "hotspan validate: -c FILE is required\n%s", usage);
        return EXIT_USAGE;
    }
    struct hs_service *svc = NULL;
    int rc = load(path, &svc);
    if (rc == 0) {
        printf("%s: ok\n", path);
        hs_service_free(svc);
    }
    return rc;
}

static int config_reference(void)
{
    size_t count;
    const struct hs_component_type *const *all = hs_registry_all(&count);
    struct hs_buf b = {0};
    hs_service_reference(&hs_admin_telemetry, &b);
    for (size_t i = 0; i < count; i++) {
        hs_buf_printf(&b, "\n### %s `%s`\n\n%s\n", hs_kind_name(all[i]->kind), all[i]->name,
                      all[i]->doc ? all[i]->doc : "");
        const struct hs_component_type *same = NULL;
        for (size_t j = 0; j < i && !same; j++)
            if (all[j]->fields == all[i]->fields)
                same = all[j];
        if (same) {
            hs_buf_printf(&b, "\nThe same keys as `%s`.\n", same->name);
            continue;
        }
        hs_buf_printf(&b, "\n| key | type | default | bounds | doc |\n|---|---|---|---|---|\n");
        hs_config_reference(all[i]->fields, "", &b);
    }
    fwrite(b.data, 1, b.len, stdout);
    hs_buf_free(&b);
    return 0;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v > max)
        return false;
    *out = v;
    return true;
}

/* `demo`'s own options; returns -1 to run, or an exit status. */
static int demo_args(int argc, char **argv, const char **config, struct demo_opts *demo)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"duration", required_argument, NULL, 'd'},
                                         {"seed", required_argument, NULL, 's'},
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        bool ok = true;
        if (c == 'c')
            *config = optarg;
        else if (c == 'd')
            ok = parse_u64(optarg, 86400 * 365, &demo->duration_s) && demo->duration_s > 0;
        else if (c == 's')
            ok = parse_u64(optarg, UINT64_MAX, &demo->seed);
        else
            ok = false;
        if (!ok) {
            if (c == 'd' || c == 's')
                fprintf(stderr, "hotspan demo: --%s wants a whole number%s, not \"%s\"\n",
                        c == 'd' ? "duration" : "seed", c == 'd' ? " of seconds > 0" : "", optarg);
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hotspan: unexpected argument \"%s\"\n%s", argv[optind], usage);
        return EXIT_USAGE;
    }
    return -1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'v'},
                                         {0}};
    const char *config = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "+c:hv", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'v':
            printf("hotspan %s\n", HS_VERSION);
            return 0;
        default:
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
    }
    const char *cmd = optind < argc ? argv[optind++] : NULL;
    if (cmd && (strcmp(cmd, "validate") == 0 || strcmp(cmd, "config-reference") == 0)) {
        while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
            if (c != 'c') {
                fputs(usage, stderr);
                return EXIT_USAGE;
            }
            config = optarg;
        }
        if (optind < argc) {
            fprintf(stderr, "hotspan: unexpected argument \"%s\"\n%s", argv[optind], usage);
            return EXIT_USAGE;
        }
        return strcmp(cmd, "validate") == 0 ? validate(config) : config_reference();
    }
    struct demo_opts demo = {.seed = (uint64_t)time(NULL)};
    if (cmd && strcmp(cmd, "demo") == 0) {
        demo.on = true;
        int rc = demo_args(argc, argv, &config, &demo);
        if (rc >= 0)
            return rc;
        return run(config, &demo);
    }
    if (cmd) {
        fprintf(stderr, "hotspan: unknown command \"%s\"\n%s", cmd, usage);
        return EXIT_USAGE;
    }
    return run(config, &demo);
}
