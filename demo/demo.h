/* demo.h: `hotspan demo`: a built-in generator that sends api-server -> user-db traces (with
 * occasional N+1 requests) and matching CPU and goroutine profiles into this hotspan's own
 * receivers. */
#ifndef HS_DEMO_H
#define HS_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "core/errors.h"

/* ---- where the traffic goes: read from the config the service runs (demo/demo.c) --------- */

struct hs_demo_targets {
    char traces_url[300]; /* http://127.0.0.1:4318/v1/traces */
    char ingest_url[300]; /* http://127.0.0.1:4040/ingest */
    char otlp_endpoint[280], pyroscope_endpoint[280], admin[280]; /* as configured; admin "" */
};

/* Reads the otlp receiver's protocols.http endpoint and path, the pyroscope receiver's endpoint
 * and service.telemetry.admin from the config file at `path`, or from `text` when path is NULL
 * (defaults from the receivers' own field tables). A wildcard host is sent to on loopback.
 * Returns 0, or HS_EINVAL with one line in err naming what the demo needs (a receiver missing,
 * or a port 0 it cannot know in advance). */
int hs_demo_targets_read(const char *path, const char *text, size_t len,
                         struct hs_demo_targets *out, struct hs_error *err);

/* ---- the traffic model (demo/model.c): pure functions of a seeded RNG and the clock ------- */

#define HS_DEMO_SPAN_NAME "UserRepository.findByEmail"
#define HS_DEMO_RECENT 64 /* requests remembered for the profiles of the next window */

struct hs_demo_request {
    uint8_t trace_id[16];
    uint8_t api_span[8], db_span[8];
    int64_t start_ns; /* api-server span start */
    int64_t db_start_ns, db_end_ns;
    int64_t end_ns;   /* api-server span end */
    uint32_t queries; /* preference queries under findByEmail: 1, or N for an N+1 */
    uint32_t user_id;
    bool nplus1;
};

struct hs_demo_model {
    uint64_t rng, rng_nplus1;
    struct hs_demo_request recent[HS_DEMO_RECENT]; /* a ring, oldest overwritten */
    uint32_t nrecent, head;
};

void hs_demo_model_init(struct hs_demo_model *m, uint64_t seed);
/* A uniform draw in [lo, hi]. */
uint64_t hs_demo_rand(struct hs_demo_model *m, uint64_t lo, uint64_t hi);

/* A request that ended at end_ns: fast (findByEmail ~40-60 ms, one preference query) or N+1
 * (~560-700 ms, 30-60 preference queries). Remembered for the profiles. */
const struct hs_demo_request *hs_demo_request_new(struct hs_demo_model *m, int64_t end_ns,
                                                  bool nplus1);

/* The request's spans as an OTLP ExportTraceServiceRequest (protobuf), appended to out:
 * api-server `GET /users/:id` (server) -> user-db `UserRepository.findByEmail` -> one
 * `SELECT users` query and `queries` `SELECT preferences` queries (db.system, db.statement).
 * Returns 0 or HS_ENOMEM. */
int hs_demo_encode_traces(const struct hs_demo_request *r, struct hs_buf *out);

enum hs_demo_service { HS_DEMO_API, HS_DEMO_DB };
extern const char *const hs_demo_service_names[2];

/* A pprof CPU profile (process_cpu: samples/count + cpu/nanoseconds, 100 Hz) of `svc` for
 * [from_ns, until_ns): background samples plus, for every remembered request overlapping the
 * window, samples of its stacks labelled span_id=<its span of svc>. During an N+1 request
 * user-db's samples are mostly handle > findByEmail > loadPreferences > Client.query. Written
 * uncompressed to out (the caller gzips). Returns 0 or HS_ENOMEM. */
int hs_demo_encode_profile(struct hs_demo_model *m, enum hs_demo_service svc, int64_t from_ns,
                           int64_t until_ns, struct hs_buf *out);

/* api-server's goroutine profile (Go's: goroutine/count, period 1) for [from_ns, until_ns), its
 * goroutines counted in a snapshot every 10 ms: the ones that outlive requests (main in Accept,
 * two idle keep-alive connections to user-db) in every snapshot; each remembered request's
 * goroutine in the snapshots during its span, labelled span_id=<api span> as the pprof labels
 * the goroutine carries: running (api-server's CPU stacks) for the share of the span it is on
 * CPU, otherwise parked in its call to user-db, getUser > UserClient.fetch >
 * net/http.(*Client).Do > ... > runtime.selectgo > runtime.gopark. Uncompressed, appended to
 * out. Returns 0 or HS_ENOMEM. */
int hs_demo_encode_goroutines(struct hs_demo_model *m, int64_t from_ns, int64_t until_ns,
                              struct hs_buf *out);

/* One POST /ingest as an SDK sends it: the query (after '?'), the Content-Type and the body. */
struct hs_demo_upload {
    char query[320];
    char content_type[128];
    struct hs_buf body; /* the caller frees it */
};

/* The goroutine profile uploaded as pyroscope-go uploads its own (wire.md §5.5): multipart
 * (part `profile`, the gzipped pprof; part `sample_type_config`, display name `goroutines`), no
 * `format`, name=api-server{env=demo}, from/until in ns, sampleRate=0, units=goroutines,
 * aggregationType=average. Returns 0 or HS_ENOMEM (then up->body is empty). */
int hs_demo_goroutines_upload(struct hs_demo_model *m, int64_t from_ns, int64_t until_ns,
                              struct hs_demo_upload *up);

/* ---- the generator on the loop (demo/demo.c) ---------------------------------------------- */

struct hs_demo;

/* Starts sending on loop (libcurl through net/http_client.h). Returns NULL when the HTTP client
 * cannot be made. */
struct hs_demo *hs_demo_start(uv_loop_t *loop, const struct hs_demo_targets *t, uint64_t seed);
/* Stops generating, sends a last profile per service (so the last requests are covered), waits
 * for the requests in flight, closes every handle, then calls done(ud) and frees d. */
void hs_demo_stop(struct hs_demo *d, void (*done)(void *ud), void *ud);

#endif
