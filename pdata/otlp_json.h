/* otlp_json.h: the OTLP/JSON mapping (hex ids, lowerCamelCase, int64 as strings or numbers,
 * enums as integers), converted once to and from the wire form the pipeline carries. */
#ifndef HS_OTLP_JSON_H
#define HS_OTLP_JSON_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

struct hs_buf;
struct hs_otlp_limits;

/* Converts an ExportTraceServiceRequest in OTLP/JSON to wire bytes appended to out, while
 * reading it (pdata/pb_json.h): memory is the output, at most twice the text. Accepts leniently
 * (snake_case keys, enum names, 64-bit numbers or strings), ignores unknown keys. lim (NULL:
 * none, value depth 32) bounds spans (resourceSpans and scopeSpans entries too) per request,
 * attributes per resource, scope, span, event or link, and value nesting. Returns 0; HS_EINVAL
 * (err says what and where: "line 3 col 14: resourceSpans[0].scopeSpans[0].spans[0].traceId:
 * ..."), HS_E2BIG past a limit (err names it), or HS_ENOMEM. */
int hs_otlp_json_to_wire(const char *json, size_t len, const struct hs_otlp_limits *lim,
                         struct hs_buf *out, char *err, size_t errlen);

/* hs_otlp_json_to_wire for another OTLP request protobuf-c describes (the profiles signal's):
 * hex ids, value nesting bounded at 32, no counts (the caller's decoder has its own limits). */
int hs_otlp_json_to_wire_desc(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                              struct hs_buf *out, char *err, size_t errlen);

/* A backend's JSON ExportTraceServiceResponse: partialSuccess.rejectedSpans (0 when absent or
 * unreadable), its errorMessage into msg (cut to fit); an ExportProfilesServiceResponse's
 * rejectedProfiles likewise. Read in place, so any answer costs nothing beyond itself. */
int64_t hs_otlp_json_partial_success(const char *json, size_t len, char *msg, size_t msglen);

/* Converts validated ExportTraceServiceRequest wire bytes to one line of OTLP/JSON (strict:
 * lowerCamelCase, hex ids, int64 as strings), appended to out without a newline.
 * Returns 0, HS_EINVAL or HS_ENOMEM. */
int hs_otlp_wire_to_json(const uint8_t *p, size_t len, struct hs_buf *out);
/* The same for another OTLP request protobuf-c describes (the profiles signal's). */
int hs_otlp_wire_to_json_desc(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                              struct hs_buf *out);

/* Appends s as a JSON string literal, quotes included; bytes that are not valid UTF-8 become
 * U+FFFD, so no input makes invalid JSON. Returns 0 or HS_ENOMEM. */
int hs_json_put_string(struct hs_buf *out, const char *s, size_t n);

#endif
