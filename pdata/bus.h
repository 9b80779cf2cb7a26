/* bus.h: a batch as one message on a message bus (NATS JetStream here, Kafka on paper): the
 * header names, the subject of a (signal, partition), and each signal's body: spans travel as the
 * ExportTraceServiceRequest bytes they are, profiles as hotspan.bus.v1.Profiles (the pprof bytes
 * as received plus labels, time and upload details). Nothing here knows the bus's client. */
#ifndef HS_BUS_H
#define HS_BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_buf;
struct hs_traces;
struct hs_profiles;
struct hs_pprof_limits;

/* Message headers. The tenant is a header so a receiver routes and counts without decoding;
 * Hotspan-Tenant-Authenticated: true says a per-tenant token decided it at the sending hotspan
 * (the bus is trusted: whoever may publish to the stream may claim it). */
#define HS_BUS_HDR_SIGNAL "Hotspan-Signal" /* "traces" or "profiles" */
#define HS_BUS_HDR_TENANT "Hotspan-Tenant" /* absent: no tenant */
#define HS_BUS_HDR_TENANT_AUTH "Hotspan-Tenant-Authenticated"
#define HS_BUS_HDR_TYPE "Content-Type"
#define HS_BUS_TYPE_TRACES "application/x-protobuf"
#define HS_BUS_TYPE_PROFILES "application/vnd.hotspan.profiles.v1+protobuf"

/* Longest subject prefix (a NATS subject of dot-separated tokens). */
#define HS_BUS_PREFIX_MAX 128
/* Room for any subject hs_bus_subject writes. */
#define HS_BUS_SUBJECT_MAX (HS_BUS_PREFIX_MAX + 32)

/* "<prefix>.traces.<p>" or "<prefix>.profiles.<p>" (signal HS_SIGNAL_TRACES or _PROFILES), or
 * with signal 0 "<prefix>.*.<p>", the filter that takes both. p is written with at least two
 * digits ("07") so subjects sort. Returns 0, or HS_E2BIG when it does not fit in cap. */
int hs_bus_subject(char *out, size_t cap, const char *prefix, unsigned signal, uint32_t p);
/* Is prefix usable: 1..HS_BUS_PREFIX_MAX bytes of dot-separated tokens of printable ASCII
 * without spaces or the wildcards * and >? *why says what is wrong. */
bool hs_bus_prefix_valid(const char *prefix, const char **why);

/* Appends the body of n profiles of a batch from its profile `first` on (hotspan.bus.v1.Profiles)
 * to out. Returns 0 or HS_ENOMEM. */
int hs_bus_profiles_encode(const struct hs_profiles *b, uint32_t first, uint32_t n,
                           struct hs_buf *out);

/* A batch rebuilt from a message body (copied: the message may go once this returns) and its
 * tenant headers (tenant NULL or "" for none; checked as receivers check X-Scope-OrgID). The
 * spans are checked by the wire scanner, the profiles decoded and summarized within lim.
 * Returns 0 and *out (a new reference), HS_EINVAL (malformed, or the tenant is not a tenant id:
 * err says which), HS_E2BIG (a limit) or HS_ENOMEM. An empty batch is HS_EINVAL: a sender never
 * publishes one. */
int hs_bus_traces_decode(const void *body, size_t len, const char *tenant, bool tenant_auth,
                         struct hs_traces **out, char *err, size_t errlen);
int hs_bus_profiles_decode(const void *body, size_t len, const char *tenant, bool tenant_auth,
                           const struct hs_pprof_limits *lim, struct hs_profiles **out, char *err,
                           size_t errlen);

#endif
