/* json.h: a pull reader of JSON text (RFC 8259) that allocates nothing. It hands out one token at
 * a time, a view into the text, checking syntax, escapes and UTF-8 as it goes, so a decoder
 * converts while it reads and never holds a tree: its memory is its output, whatever the shape.
 * (hs_json_double alone copies a number longer than 63 characters, for strtod.) */
#ifndef HS_JSON_H
#define HS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hs_json_type {
    HS_JSON_END,        /* no more tokens: the one top-level value is complete */
    HS_JSON_OBJECT,     /* '{'; members follow as KEY, value, ..., then OBJECT_END */
    HS_JSON_OBJECT_END, /* '}' */
    HS_JSON_ARRAY,      /* '['; values follow, then ARRAY_END */
    HS_JSON_ARRAY_END,  /* ']' */
    HS_JSON_KEY,        /* a member's name; its value's first token comes next */
    HS_JSON_STRING,
    HS_JSON_NUMBER,
    HS_JSON_TRUE,
    HS_JSON_FALSE,
    HS_JSON_NULL,
};

struct hs_json_token {
    enum hs_json_type type;
    const char *at;  /* where the token starts (a string's opening quote), for messages */
    const char *ptr; /* a string's or key's bytes between the quotes, still escaped; a number */
    size_t len;
    bool escaped; /* the string holds a backslash escape: read it with hs_json_unescape */
    bool integer; /* a number without fraction or exponent */
};

/* The reader keeps one bit per open container, so nesting has a fixed ceiling. */
#define HS_JSON_MAX_DEPTH 1024

struct hs_json_reader {
    const char *text, *p, *end;
    uint32_t depth, max_depth;
    bool allow_nul; /* \u0000 in strings (OTLP keeps it, as the Collector does) */
    uint8_t state;
    int rc; /* the error, repeated by every call after it */
    uint8_t is_object[HS_JSON_MAX_DEPTH / 8];
    char err[160]; /* "line 2 col 17: ..." after a failure */
};

/* max_depth: open containers allowed at once (1..HS_JSON_MAX_DEPTH; 0 means the ceiling). */
void hs_json_reader_init(struct hs_json_reader *r, const char *text, size_t len, uint32_t max_depth,
                         bool allow_nul);

/* The next token into t. Returns 0; HS_EINVAL for text that is not JSON, HS_E2BIG for nesting
 * past max_depth (r->err says what and where, e.g. "line 1 col 9: unexpected ']'"). After the
 * top-level value it returns HS_JSON_END, or an error if anything but whitespace follows. */
int hs_json_next(struct hs_json_reader *r, struct hs_json_token *t);

/* Reads past the rest of the value whose first token is t (nothing to do for a scalar), checking
 * it as hs_json_next does. Returns 0 or hs_json_next's error. */
int hs_json_skip(struct hs_json_reader *r, const struct hs_json_token *t);

/* A string or key token's decoded bytes into out, which has room for t->len (never more is
 * needed). Returns their length. Only for tokens hs_json_next returned. */
size_t hs_json_unescape(const struct hs_json_token *t, char *out);

/* Whether the decoded string equals lit (tokens with escapes are decoded on the stack first). */
bool hs_json_string_is(const struct hs_json_token *t, const char *lit);

/* An integer token (t->integer) as a sign and magnitude; false when the magnitude passes 64
 * bits. Numbers with a fraction or exponent are the caller's, through hs_json_double. */
bool hs_json_integer(const struct hs_json_token *t, bool *neg, uint64_t *mag);

/* A number token as a double (strtod's rounding; out of range is +-inf). */
double hs_json_double(const struct hs_json_token *t);

/* Writes "line L col C: " for position `at` in the reader's text into out (columns count
 * characters from 1, as editors do). Returns the length written. */
size_t hs_json_where(const struct hs_json_reader *r, const char *at, char *out, size_t outlen);

#endif
