/* semconv.h: every attribute name hotspan writes on spans, in one place (design.md §1, style.md
 * §6). The attribute tables of the README and docs/correlation.md list the same names (ctest
 * integration/docs checks); a name changes here or nowhere. */
#ifndef HS_SEMCONV_H
#define HS_SEMCONV_H

/* bool: the span was slower than a configured bound (slow.threshold, or slow.factor x p50). */
#define HS_ATTR_SLOW "hotspan.slow"
/* string: which bound: "threshold 500ms" or "5.0x p50 48ms". */
#define HS_ATTR_SLOW_REASON "hotspan.slow.reason"
/* string: "span" (pprof span_id label), "window" (the service's profiles around the span, or
 * the subtree under the function named like the span) or "none". */
#define HS_ATTR_PROFILE_MATCH "profile.match"
/* string, with match "none": no_profiles_for_service | no_profile_in_window |
 * no_samples_of_span | timeout | parked_limit | shutdown. */
#define HS_ATTR_PROFILE_MATCH_REASON "profile.match_reason"
/* string array: "main.(*UserRepository).findByEmail 65%": an application function's total
 * (self + callees) share of the matched samples, heaviest first, named as the profiler wrote
 * it; " (in crypto/sha256)" when a library (runtime, standard library, third party,
 * pseudo-frame) under it, and no application function, holds half of its time. Library frames
 * are not listed (unless no application frame matched). The trunk (the hot path's root-most
 * frames holding >= 90% of the samples) is left out but for its deepest frame, unless that is
 * the root or the span's own function. */
#define HS_ATTR_PROFILE_TOP_FUNCTIONS "profile.top_functions"
/* string: "main.handle > main.(*UserRepository).findByEmail > database/sql.(*DB).Query": the
 * heaviest root-to-leaf path (frames under 10% dropped), application frames, and the first
 * library frame they call into at its end. */
#define HS_ATTR_PROFILE_HOT_PATH "profile.hot_path"
/* string: the profile type id, "process_cpu:cpu:nanoseconds:cpu:nanoseconds". */
#define HS_ATTR_PROFILE_TYPE "profile.type"
/* double: CPU ns seen under the span id / span duration (exact matches, when the service's CPU
 * profile labels spans). */
#define HS_ATTR_PROFILE_CPU_SHARE "profile.cpu_share"
/* When the CPU profile does not explain the span (cpu_share < 0.5, or the service's CPU in the
 * window is under half the span's duration), what another profile type says of the time it
 * waited. string: that type's id ("wall:wall:nanoseconds:wall:nanoseconds", "mutex:delay:..."). */
#define HS_ATTR_PROFILE_OFFCPU_TYPE "profile.offcpu.type"
/* string: "span" (samples labelled with the span id) or "window" (the subtree under the
 * function named like the span, else the service's window). */
#define HS_ATTR_PROFILE_OFFCPU_MATCH "profile.offcpu.match"
/* string array: as profile.top_functions, of the off-CPU type's matched samples. */
#define HS_ATTR_PROFILE_OFFCPU_TOP_FUNCTIONS "profile.offcpu.top_functions"
/* string: as profile.hot_path, of the off-CPU type's matched samples. */
#define HS_ATTR_PROFILE_OFFCPU_HOT_PATH "profile.offcpu.hot_path"
/* string array: "main.(*UserRepository).loadPreferences +47pp": application functions whose
 * share grew against the service's decayed function baseline. */
#define HS_ATTR_PROFILE_GROWN_FUNCTIONS "profile.grown_functions"
/* string: Pyroscope/Grafana URL of the service's flame graph for the span's window. */
#define HS_ATTR_PROFILE_LINK "profile.link"
/* string: 16 lowercase hex of the span id, as Grafana's traces-to-profiles expects (wire.md §7.2);
 * only on exact span matches. */
#define HS_ATTR_PYROSCOPE_PROFILE_ID "pyroscope.profile.id"
/* string: "n_plus_one" when a slow span has many alike children. */
#define HS_ATTR_PATTERN "hotspan.pattern"
/* int: how many alike children. */
#define HS_ATTR_N_PLUS_ONE_COUNT "hotspan.n_plus_one.count"
/* string: the children's normalized db.statement, or their shared span name. */
#define HS_ATTR_N_PLUS_ONE_STATEMENT "hotspan.n_plus_one.statement"

/* Attributes hotspan reads. */
#define HS_ATTR_DB_STATEMENT "db.statement"
#define HS_ATTR_SERVICE_NAME "service.name"

#endif
