/* ui_http.c: the admin handler that serves /ui and /ui/span/<id> (ui_html.c renders): one
 * tenant at a time, chosen by the caller's credential or, for an operator, by ?tenant=. */
#include <string.h>

#include "core/buf.h"
#include "net/http_server.h"
#include "processors/correlator/correlator_int.h"

static void respond_html(struct hs_http_request *req, int status, const struct hs_buf *b)
{
    /* function and span names come from clients: no script may run, whatever slips through */
    static const struct hs_http_header h[] = {
        {HS_STR("content-security-policy"),
         HS_STR("default-src 'none'; style-src 'unsafe-inline'; img-src data:")},
        {HS_STR("x-content-type-options"), HS_STR("nosniff")},
        {HS_STR("cache-control"), HS_STR("no-store")},
    };
    hs_http_respond(req, status, "text/html; charset=utf-8", h, HS_ARRAY_SIZE(h), b->data, b->len);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The query's `tenant` value, %XX-decoded into out (cap bytes with its NUL). Returns 0 when
 * absent, 1 when present, -1 when longer than any tenant /ui keeps (CORR_UI_TEXT) or not
 * decodable. */
static int query_tenant(struct hs_str q, char *out, size_t cap)
{
    for (size_t i = 0; i < q.len;) {
        const char *amp = memchr(q.ptr + i, '&', q.len - i);
        size_t end = amp ? (size_t)(amp - q.ptr) : q.len;
        if (end - i >= 7 && memcmp(q.ptr + i, "tenant=", 7) == 0) {
            size_t n = 0;
            for (size_t k = i + 7; k < end; k++) {
                int ch = (unsigned char)q.ptr[k];
                if (ch == '%') {
                    int hi = k + 2 < end ? hexval(q.ptr[k + 1]) : -1;
                    int lo = k + 2 < end ? hexval(q.ptr[k + 2]) : -1;
                    if (hi < 0 || lo < 0 || (hi | lo) == 0)
                        return -1;
                    ch = hi << 4 | lo;
                    k += 2;
                }
                if (n + 1 >= cap)
                    return -1;
                out[n++] = (char)ch;
            }
            out[n] = '\0';
            return 1;
        }
        i = end + 1;
    }
    return 0;
}

/* /ui and /ui/span/<id>, one tenant at a time: a tenant's token sees its own (asking for another
 * is 403, another's span 404); an operator (`caller` NULL) chooses with ?tenant=, and without it
 * sees the newest span's tenant on the list and any tenant's span by its id. */
void hs_corr_ui_handle(void *ud, struct hs_http_request *req, const char *caller)
{
    struct correlator *c = ud;
    struct hs_str p = req->path;
    struct hs_buf b = {0};
    char asked[CORR_UI_TEXT + 1];
    int q = query_tenant(req->query, asked, sizeof(asked));
    const char *tenant = caller ? caller : q == 1 ? asked : NULL;
    int status = 200;
    if (q < 0) {
        status = 400;
        hs_corr_ui_render_message(&b, "Bad request",
                                  "?tenant= is not a tenant /ui could keep (at most 256 bytes, "
                                  "%XX escapes of nonzero bytes).");
    } else if (caller && q == 1 && strcmp(asked, caller) != 0) {
        status = 403;
        hs_corr_ui_render_message(&b, "Forbidden",
                                  "This credential is a tenant's token: it sees that tenant's "
                                  "spans only.");
    } else if (hs_str_eq(p, "/ui") || hs_str_eq(p, "/ui/")) {
        hs_corr_ui_render_list(&c->ui, &c->conf, tenant, caller == NULL, &b);
    } else if (p.len > 9 && memcmp(p.ptr, "/ui/span/", 9) == 0) {
        struct hs_str id = {p.ptr + 9, p.len - 9};
        if (hs_corr_ui_render_span(&c->ui, &c->conf, id, tenant, &b) == HS_ENOENT)
            status = 404;
    } else {
        status = 404;
    }
    if (status == 404) {
        hs_buf_reset(&b);
        hs_corr_ui_render_not_found(&b);
    }
    respond_html(req, status, &b);
    hs_buf_free(&b);
}
