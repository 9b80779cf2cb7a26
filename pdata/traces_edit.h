/* traces_edit.h: rewriting a batch without decoding it (design.md §11). Spans get attributes
 * appended to their own bytes (a repeated field may appear anywhere in a message, so appending
 * is valid protobuf), replacing any of the same key, or are left out; everything else is copied
 * as it is, and only the length prefixes of the enclosing Span, ScopeSpans and ResourceSpans
 * are rewritten. */
#ifndef HS_TRACES_EDIT_H
#define HS_TRACES_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "pdata/otlp_wire.h"

struct hs_buf;
struct hs_traces;

/* Encoded Span.attributes entries (field 9: KeyValue{key, AnyValue}), appended to b, ready to
 * be passed as hs_span_edit.attrs. Return 0 or HS_ENOMEM. */
int hs_attr_string(struct hs_buf *b, const char *key, const char *val, size_t len);
int hs_attr_bool(struct hs_buf *b, const char *key, bool v);
int hs_attr_int(struct hs_buf *b, const char *key, int64_t v);
int hs_attr_double(struct hs_buf *b, const char *key, double v);
int hs_attr_string_array(struct hs_buf *b, const char *key, const char *const *vals, size_t n);

struct hs_span_edit {
    size_t offset;        /* the span's hs_span_view.offset in the input batch */
    /* encoded attribute entries to append; may be NULL. Keys stay unique (OTLP requires it): a
     * span attribute with the key of one of these is left out, or kept in its place when
     * byte-equal to it, which is then not appended. */
    const uint8_t *attrs;
    size_t attrs_len;
    bool remove;          /* leave this span out */
};

/* Writes a new batch: `in` with the edits applied. `edits` are sorted by offset and each names a
 * span of `in`. With `keep_unlisted` false only the listed spans are kept (to take spans out of
 * a batch into one of their own). ScopeSpans and ResourceSpans left without spans are left out;
 * everything else of them (resource, scope, schema_url, unknown fields) is kept. Returns 0,
 * HS_ENOMEM, or HS_EINVAL when an offset names no span. *out is NULL when no span is left. */
int hs_traces_edit(const struct hs_traces *in, const struct hs_span_edit *edits, size_t n,
                   bool keep_unlisted, struct hs_traces **out);

/* The value of a span's string attribute `key` (e.g. "db.statement"), read from the batch's
 * bytes; false when the span has none (or it is not a string). */
bool hs_span_attr_str(const uint8_t *data, const struct hs_span_view *span, const char *key,
                      struct hs_str *out);
/* The same for any message whose `attributes` is field `field` (Resource: 1, Span: 9), given
 * its bytes, e.g. a resource attribute: hs_attrs_find_str(view.resource, 1, "k8s.pod.name"). */
bool hs_attrs_find_str(struct hs_str msg, uint32_t field, const char *key, struct hs_str *out);

#endif
