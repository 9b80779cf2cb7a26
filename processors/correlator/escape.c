/* escape.c: the correlator's text in other languages: a URL's query (profile.link, the /ui
 * pages' links) and HTML (the /ui pages), for the attributes and the pages alike. */
#include "core/buf.h"
#include "processors/correlator/correlator_int.h"

void hs_corr_url_escape(struct hs_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~')
            hs_buf_putc(b, ch);
        else
            hs_buf_printf(b, "%%%02X", ch);
    }
}

void hs_corr_html_escape(struct hs_buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '&':
            hs_buf_append(out, "&amp;", 5);
            break;
        case '<':
            hs_buf_append(out, "&lt;", 4);
            break;
        case '>':
            hs_buf_append(out, "&gt;", 4);
            break;
        case '"':
            hs_buf_append(out, "&quot;", 6);
            break;
        case '\'':
            hs_buf_append(out, "&#39;", 5);
            break;
        default:
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                hs_buf_append(out, "\xEF\xBF\xBD", 3); /* U+FFFD: controls are not text */
            else
                hs_buf_putc(out, ch);
        }
    }
}
