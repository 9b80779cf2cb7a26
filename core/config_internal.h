/* config_internal.h: what config.c, config_decode.c and config_scalar.c share and nobody else
 * needs: positioned error formatting, the scalar syntaxes with their reasons, human units. */
#ifndef HS_CONFIG_INTERNAL_H
#define HS_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* hs_config_errorf with a va_list. */
void hs_config_verrorf(struct hs_error *err, const struct hs_config_node *node, const char *path,
                       const char *fmt, va_list ap);

/* These return 0, HS_EINVAL (not this syntax) or HS_E2BIG (the syntax, but out of range). */
int hs_cfg_bool(const char *s, bool *out);
int hs_cfg_int(const char *s, int64_t *out);
int hs_cfg_uint(const char *s, uint64_t *out);
int hs_cfg_double(const char *s, double *out);
int hs_cfg_duration(const char *s, uint64_t *ms);
int hs_cfg_size(const char *s, uint64_t *bytes);

/* NULL if fine, else why not, as a phrase ("port must be a number from 0 to 65535"). */
const char *hs_cfg_endpoint_problem(const char *s, char *host, size_t hostlen, uint16_t *port);
const char *hs_cfg_url_problem(const char *s);

/* Shortest exact spelling in our own syntax: 90000 → "1m30s", 1 << 30 → "1GiB". */
void hs_cfg_format_duration(uint64_t ms, char *buf, size_t len);
void hs_cfg_format_size(uint64_t bytes, char *buf, size_t len);

#endif
