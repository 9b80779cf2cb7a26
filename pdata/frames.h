/* frames.h: tells the user's own functions from runtime, standard-library, third-party and
 * pseudo frames, by the name and file a profiler wrote, so the correlator can name the code the
 * user can change and summarise the rest as "(in crypto/sha256)". */
#ifndef HS_FRAMES_H
#define HS_FRAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/common.h"

/* Built-in per-runtime defaults plus the user's patterns. Immutable once built, so one set may
 * be shared by every worker. */
struct hs_frame_rules;

/* Most patterns a set takes, and the longest one: a config list, not a data path. */
#define HS_FRAME_RULES_MAX 256
#define HS_FRAME_PATTERN_MAX 512

/* Builds the rules from the defaults and `extra` (borrowed, copied), each a pattern:
 *   prefix      the function name starts with it: "github.com/acme/shared/", "org/jooq/"
 *   *text       the function name contains it:   "*.generated."
 *   file:...    the same on the file name:       "file:/opt/vendor/", "file:*node_modules/"
 *   !pattern    application code, even where a default says library: "!github.com/acme/"
 * A trailing '*' is allowed and changes nothing ("org/jooq*"). The user's patterns are tried
 * first, in order; the first that matches decides. HS_EINVAL with the pattern named in err for
 * an empty pattern, a '*' anywhere but first or last, or too many/too long patterns. */
int hs_frame_rules_new(const char *const *extra, size_t nextra, struct hs_frame_rules **out,
                       char *err, size_t errlen);
void hs_frame_rules_free(struct hs_frame_rules *r);

/* True when the frame (function name as the profiler wrote it, NUL-terminated, and its file,
 * "" if unknown) is runtime, standard library, third party or a pseudo-frame. Then *lib (if
 * lib is not NULL) names the library for display ("crypto/sha256", "node_modules/pg",
 * "node:internal/crypto/hash", "(garbage collector)", "java/util", ...), pointing into name or
 * file or at a static string. Linear in the lengths of name and file; no allocation. */
bool hs_frame_is_library(const struct hs_frame_rules *r, const char *name, const char *file,
                         struct hs_str *lib);

#endif
