/* consumer.h: where a component's output goes, and how a batch is delivered there without
 * the core knowing what a batch is (component.c implements it). Light enough for pdata's
 * headers, which give each signal its struct hs_batch_ops. */
#ifndef HS_CONSUMER_H
#define HS_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>

struct hs_component;

enum hs_signal { HS_SIGNAL_TRACES = 1 << 0, HS_SIGNAL_PROFILES = 1 << 1 };

/* The kinds of profiles batch (pdata/profiles.h's formats), as flags: what a receiver makes and
 * an exporter takes (struct hs_component_type.profile_kinds). */
enum hs_profiles_kind { HS_PROFILES_KIND_PPROF = 1 << 0, HS_PROFILES_KIND_OTLP = 1 << 1 };

/* A consumer is where a component's output goes: one or more components of the same signal
 * (a receiver in two pipelines, a pipeline's exporters). */
struct hs_consumer {
    struct hs_component **targets;
    size_t count;
};

/* A signal's batches as delivery handles them without knowing them: pdata/traces.h and
 * pdata/profiles.h give theirs, with typed wrappers (hs_consumer_traces, hs_consumer_profiles)
 * around hs_consumer_deliver. */
struct hs_batch_ops {
    enum hs_signal signal;     /* which consume_* hook takes the batch */
    void *(*ref)(void *batch); /* returns batch, holding one more reference */
    void (*unref)(void *batch);
};

/* Delivers `batch` (taken) to every target of c, each extra target getting its own reference.
 * All or nothing: if any target is not ready, nothing is delivered and HS_EAGAIN is returned;
 * else the first error a target returned, or 0. No consumer (NULL or empty): dropped, 0. */
int hs_consumer_deliver(struct hs_consumer *c, const struct hs_batch_ops *ops, void *batch);
bool hs_consumer_ready(const struct hs_consumer *c);

#endif
