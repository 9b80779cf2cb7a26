/* log.h: structured log lines, `ts=... level=... component=... msg="..."` (or JSON), to stderr. */
#ifndef HS_LOG_H
#define HS_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum hs_log_level { HS_LOG_DEBUG, HS_LOG_INFO, HS_LOG_WARN, HS_LOG_ERROR };

void hs_log_setup(enum hs_log_level min, bool json);
int hs_log_level_parse(const char *s, enum hs_log_level *out);
bool hs_log_enabled(enum hs_log_level lvl);

/* component may be NULL (the core). The message is formatted and quoted as needed. */
void hs_log(enum hs_log_level lvl, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define hs_log_debug(c, ...) hs_log(HS_LOG_DEBUG, (c), __VA_ARGS__)
#define hs_log_info(c, ...) hs_log(HS_LOG_INFO, (c), __VA_ARGS__)
#define hs_log_warn(c, ...) hs_log(HS_LOG_WARN, (c), __VA_ARGS__)
#define hs_log_error(c, ...) hs_log(HS_LOG_ERROR, (c), __VA_ARGS__)

/* Rate limit for per-client error logs: at most `burst` lines per `window_ms`; the number
 * suppressed is reported with the next line that passes. */
struct hs_ratelimit {
    uint64_t window_start_ms;
    uint32_t window_ms;
    uint32_t burst;
    uint32_t used;
    uint32_t suppressed;
};

#define HS_RATELIMIT_INIT(window_ms, burst) {0, (window_ms), (burst), 0, 0}

/* Returns true if a line may be logged now; *suppressed gets how many were held back since. */
bool hs_ratelimit_allow(struct hs_ratelimit *rl, uint64_t now_ms, uint32_t *suppressed);

#endif
