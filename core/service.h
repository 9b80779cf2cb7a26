/* service.h: a running configuration: the components of a config file, the pipeline graph that
 * joins them, the admin endpoint, and their start and ordered shutdown. */
#ifndef HS_SERVICE_H
#define HS_SERVICE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "errors.h"

struct hs_service;

/* Parses and checks a whole config (every error collected into err, positioned) and creates
 * its components; no I/O. Returns 0 or HS_EINVAL. */
int hs_service_load(const char *file, const char *text, size_t len, struct hs_service **out,
                    struct hs_error *err);
/* The same for a file on disk (unreadable or oversized files are errors in err). */
int hs_service_load_file(const char *path, struct hs_service **out, struct hs_error *err);

/* Starts exporters, then processors, then receivers and the admin endpoint; on failure the
 * started ones are shut down again and a negative code returned (message in err). */
int hs_service_start(struct hs_service *s, uv_loop_t *loop, struct hs_error *err);

/* Ordered drain: receivers stop accepting, processors flush front to back, exporters send what
 * they hold; then done(ud). Safe to call once after start. */
void hs_service_shutdown(struct hs_service *s, void (*done)(void *ud), void *ud);

/* service.shutdown_timeout in ms: how long a drain may take before the process gives up and
 * exits 1 (0 = until everything accepted is sent). */
uint64_t hs_service_shutdown_timeout(const struct hs_service *s);

/* Appends the Markdown reference of the `service:` keys. */
struct hs_buf;
void hs_service_reference(struct hs_buf *out);

/* Frees a service that was never started, or whose shutdown has completed. */
void hs_service_free(struct hs_service *s);

#endif
