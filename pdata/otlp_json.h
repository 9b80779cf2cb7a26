/* otlp_json.h: the OTLP/JSON mapping (hex ids, lowerCamelCase, int64 as strings or numbers,
 * enums as integers), converted once to and from the wire form the pipeline carries. */
#ifndef HS_OTLP_JSON_H
#define HS_OTLP_JSON_H

#include <stddef.h>
#include <stdint.h>

struct hs_buf;

/* Converts an ExportTraceServiceRequest in OTLP/JSON to wire bytes appended to out. Accepts
 * leniently (snake_case keys, enum names, 64-bit numbers or strings), ignores unknown keys.
 * Returns 0, HS_EINVAL (err says what and where: "line 3 col 14: spans[0].traceId: ..."), or
 * HS_ENOMEM. */
int hs_otlp_json_to_wire(const char *json, size_t len, struct hs_buf *out, char *err,
                         size_t errlen);

/* Converts validated ExportTraceServiceRequest wire bytes to one line of OTLP/JSON (strict:
 * lowerCamelCase, hex ids, int64 as strings), appended to out without a newline.
 * Returns 0, HS_EINVAL or HS_ENOMEM. */
int hs_otlp_wire_to_json(const uint8_t *p, size_t len, struct hs_buf *out);

/* Appends s as a JSON string literal, quotes included; bytes that are not valid UTF-8 become
 * U+FFFD, so no input makes invalid JSON. Returns 0 or HS_ENOMEM. */
int hs_json_put_string(struct hs_buf *out, const char *s, size_t n);

#endif
