/* log.c: one line per event, logfmt (`ts=... level=... component=... msg="..."`) or JSON, on
 * stderr. The level is process-wide: logging is the one place we accept that. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"

static enum hs_log_level log_min = HS_LOG_INFO;
static bool log_json;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void hs_log_setup(enum hs_log_level min, bool json)
{
    log_min = min;
    log_json = json;
}

int hs_log_level_parse(const char *s, enum hs_log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum hs_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = HS_LOG_WARN;
        return 0;
    }
    return -1;
}

bool hs_log_enabled(enum hs_log_level lvl)
{
    return lvl >= log_min;
}

/* Quotes for logfmt or JSON: backslash, quote and control characters escaped. */
static void put_quoted(struct hs_buf *b, const char *s, size_t n)
{
    hs_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            hs_buf_putc(b, '\\');
            hs_buf_putc(b, c);
        } else if (c == '\n') {
            hs_buf_append(b, "\\n", 2);
        } else if (c < 0x20 || c == 0x7f) {
            hs_buf_printf(b, "\\u%04x", c);
        } else {
            hs_buf_putc(b, c);
        }
    }
    hs_buf_putc(b, '"');
}

void hs_log(enum hs_log_level lvl, const char *component, const char *fmt, ...)
{
    if (lvl < log_min)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t mlen = (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", (tm.tm_year + 1900) % 10000,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);

    struct hs_buf b = {0};
    if (log_json) {
        hs_buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\"", when, level_names[lvl]);
        if (component) {
            hs_buf_printf(&b, ",\"component\":");
            put_quoted(&b, component, strlen(component));
        }
        hs_buf_printf(&b, ",\"msg\":");
        put_quoted(&b, msg, mlen);
        hs_buf_append(&b, "}\n", 2);
    } else {
        hs_buf_printf(&b, "ts=%s level=%s", when, level_names[lvl]);
        if (component)
            hs_buf_printf(&b, " component=%s", component);
        hs_buf_printf(&b, " msg=");
        put_quoted(&b, msg, mlen);
        hs_buf_putc(&b, '\n');
    }
    if (b.data)
        fwrite(b.data, 1, b.len, stderr);
    hs_buf_free(&b);
}

bool hs_ratelimit_allow(struct hs_ratelimit *rl, uint64_t now_ms, uint32_t *suppressed)
{
    if (now_ms - rl->window_start_ms >= rl->window_ms) {
        rl->window_start_ms = now_ms;
        rl->used = 0;
    }
    if (rl->used < rl->burst) {
        rl->used++;
        if (suppressed)
            *suppressed = rl->suppressed;
        rl->suppressed = 0;
        return true;
    }
    rl->suppressed++;
    return false;
}
