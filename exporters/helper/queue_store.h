/* queue_store.h: the on-disk half of a persistent sending queue (sender.h): one SQLite file per
 * exporter in WAL mode with synchronous=FULL, so a record put is on disk when put returns. */
#ifndef HS_QUEUE_STORE_H
#define HS_QUEUE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_buf;
struct hs_queue_store;

/* What the queue needs to know of a record without reading its bytes. */
struct hs_queue_store_meta {
    int64_t id;         /* increasing: the order records were put in */
    uint64_t bytes;     /* the record's length */
    uint32_t count;     /* spans or profiles in the parts not yet settled */
    uint32_t parts;     /* requests in the record */
    uint32_t next_part; /* the first part not yet settled */
    uint64_t key;       /* the routing key it was put with (load_balancing), else 0 */
};

struct hs_queue_store_open_info {
    bool moved_aside; /* the file was corrupt and renamed to `aside`; the store starts empty */
    char aside[512];
};

/* Opens (creating as needed) DIR/<id, escaped>.db and takes it for this process alone. A
 * corrupt file is renamed to <file>.corrupt-<unix time> and an empty store made (info says
 * so). Logs under `id`. Returns 0, or HS_EIO when DIR cannot hold a store or another process
 * holds it (nothing is opened). */
int hs_queue_store_open(const char *dir, const char *id, struct hs_queue_store **out,
                        struct hs_queue_store_open_info *info);
/* Closes and frees; safe with NULL. */
void hs_queue_store_close(struct hs_queue_store *st);
/* Closes and frees, and deletes the file when it holds no record (a load_balancing backend that
 * left, its records moved to others): true when it was deleted. */
bool hs_queue_store_close_remove(struct hs_queue_store *st);
/* Calls fn with the id of every store in DIR whose id starts with `prefix` (the ids of the files
 * hs_queue_store_open makes, unescaped), e.g. a load_balancing exporter's stores of backends
 * that are not in the resolver's answer any more. Returns how many, or HS_EIO when DIR cannot be
 * read (none when it does not exist). */
int hs_queue_store_list(const char *dir, const char *prefix, void (*fn)(void *ud, const char *id),
                        void *ud);

/* Calls fn for every record, oldest first. Returns 0 or HS_EIO. */
int hs_queue_store_scan(struct hs_queue_store *st,
                        void (*fn)(void *ud, const struct hs_queue_store_meta *m), void *ud);
/* Writes a record (meta->count, parts, next_part, key are stored; id and bytes are set). On disk
 * when 0 is returned. Returns 0 or HS_EIO (disk full, I/O error: see hs_queue_store_errmsg). */
int hs_queue_store_put(struct hs_queue_store *st, const void *rec, size_t len,
                       struct hs_queue_store_meta *meta);
/* Reads record `id` into out (replacing its contents). Returns 0, HS_ENOENT, HS_ENOMEM or
 * HS_EIO. */
int hs_queue_store_get(struct hs_queue_store *st, int64_t id, struct hs_buf *out);
/* Records that parts before next_part are settled and `count` items remain. */
int hs_queue_store_advance(struct hs_queue_store *st, int64_t id, uint32_t next_part,
                           uint32_t count);
/* Deletes a settled record. Returns 0 or HS_EIO. */
int hs_queue_store_delete(struct hs_queue_store *st, int64_t id);

/* The last error's text (SQLite's, or the test hook's); valid until the next call. */
const char *hs_queue_store_errmsg(const struct hs_queue_store *st);
const char *hs_queue_store_path(const struct hs_queue_store *st);

/* ---- the record format: the HTTP requests of one item -------------------------------------
 * "HSQ1", u32 parts, then per part: u32 count, u8 url_relative, str url, u32 nlines, str line
 * ..., u32 body_len, body; then a CRC-32 of everything before it. Integers little-endian; a str
 * is u32 length, bytes, NUL (so a parsed part points into the record). SQLite checks its pages,
 * not our bytes: the CRC catches a record damaged anywhere else. */

#define HS_QUEUE_PART_LINES 16

struct hs_queue_part {
    uint32_t count;                         /* spans or profiles in this request */
    bool url_relative;                      /* url is a suffix of the exporter's base URL */
    const char *url;                        /* NUL-terminated */
    const char *lines[HS_QUEUE_PART_LINES]; /* "Name: value", NUL-terminated */
    size_t nlines;
    const uint8_t *body;
    size_t body_len;
};

/* Starts a record in rec (emptied). Returns 0 or HS_ENOMEM. */
int hs_queue_record_start(struct hs_buf *rec);
/* Appends a part; on failure rec is as before. Returns 0, HS_ENOMEM or HS_E2BIG. */
int hs_queue_record_add(struct hs_buf *rec, const struct hs_queue_part *part);
/* Writes the part count and the CRC. Returns 0 or HS_ENOMEM. */
int hs_queue_record_finish(struct hs_buf *rec, uint32_t parts);
/* Checks a record read back (magic, CRC); *off is set to its first part. Returns 0 or
 * HS_EINVAL. */
int hs_queue_record_check(const uint8_t *p, size_t len, uint32_t *parts, size_t *off);
/* Parses the part at *off (pointers into p) and moves *off past it. Returns 0 or HS_EINVAL. */
int hs_queue_record_part(const uint8_t *p, size_t len, size_t *off, struct hs_queue_part *out);

/* Test only: while the file named by the environment variable HOTSPAN_TEST_QUEUE_STORE_FAIL
 * (read at open) exists, put and advance fail as a full disk would. There is no way to fill
 * a real disk without root mounts; this keeps the failure path tested end to end. */
#define HS_QUEUE_STORE_FAIL_ENV "HOTSPAN_TEST_QUEUE_STORE_FAIL"

#endif
