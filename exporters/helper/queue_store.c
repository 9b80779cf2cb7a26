/* queue_store.c: the persistent queue's records in SQLite (queue_store.h). WAL with
 * synchronous=FULL makes each put one append and one fsync of the log; exclusive locking keeps a
 * second process (or a second exporter with the same id) from replaying the same records. */
#include "queue_store.h"

#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"

struct hs_queue_store {
    sqlite3 *db;
    char *id;
    char *path;
    char *fail_path; /* the test hook's flag file, or NULL */
    sqlite3_stmt *ins, *get, *adv, *del;
    char err[256];
};

enum open_result { OPEN_OK, OPEN_CORRUPT, OPEN_FAILED };

/* clang-format off: one column per line, each with its reason */
static const char schema[] = "CREATE TABLE IF NOT EXISTS queue ("
                             " id INTEGER PRIMARY KEY," /* max + 1: the order records were put in */
                             " created INTEGER NOT NULL," /* unix ms, for people reading the file */
                             " count INTEGER NOT NULL,"   /* items in the parts not yet settled */
                             " parts INTEGER NOT NULL,"
                             " next_part INTEGER NOT NULL,"
                             " record BLOB NOT NULL,"
                             " route_key INTEGER NOT NULL DEFAULT 0)"; /* load_balancing's */
/* clang-format on */

static void set_err(struct hs_queue_store *st, const char *what)
{
    int sys = st->db ? sqlite3_system_errno(st->db) : 0;
    snprintf(st->err, sizeof(st->err), "%s: %s%s%s", what,
             st->db ? sqlite3_errmsg(st->db) : "out of memory", sys ? ": " : "",
             sys ? strerror(sys) : "");
}

/* The id as a file name: [A-Za-z0-9._-] kept, every other byte as %XX, so "otlp/a" and
 * "otlp_a" stay apart and no id can climb out of DIR. */
static int file_name(const char *dir, const char *id, struct hs_buf *out)
{
    int rc = hs_buf_printf(out, "%s/", dir);
    for (const char *p = id; rc == 0 && *p; p++) {
        unsigned char c = (unsigned char)*p;
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || (c == '.' && p != id);
        rc = keep ? hs_buf_putc(out, c) : hs_buf_printf(out, "%%%02X", c);
    }
    if (rc == 0)
        rc = hs_buf_printf(out, ".queue.db");
    return rc == 0 ? hs_buf_putc(out, '\0') : rc;
}

static void finalize_all(struct hs_queue_store *st)
{
    sqlite3_finalize(st->ins);
    sqlite3_finalize(st->get);
    sqlite3_finalize(st->adv);
    sqlite3_finalize(st->del);
    st->ins = st->get = st->adv = st->del = NULL;
    sqlite3_close(st->db); /* statements are gone, so this closes at once */
    st->db = NULL;
}

static bool is_corrupt(int rc)
{
    rc &= 0xff;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_FORMAT;
}

static enum open_result exec_step(struct hs_queue_store *st, const char *sql, const char *what)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    sqlite3_free(msg);
    if (rc == SQLITE_OK)
        return OPEN_OK;
    set_err(st, what);
    return is_corrupt(rc) ? OPEN_CORRUPT : OPEN_FAILED;
}

/* PRAGMA quick_check reads every page: a torn or foreign file is caught here, at start, not
 * half-way through a replay. */
static enum open_result check(struct hs_queue_store *st)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA quick_check(1)", -1, &q, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(q);
    enum open_result r = OPEN_OK;
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        if (!v || strcmp(v, "ok") != 0) {
            snprintf(st->err, sizeof(st->err), "integrity check: %s", v ? v : "no answer");
            r = OPEN_CORRUPT;
        }
    } else {
        set_err(st, "integrity check");
        r = is_corrupt(rc) ? OPEN_CORRUPT : OPEN_FAILED;
    }
    sqlite3_finalize(q);
    return r;
}

static enum open_result prepare(struct hs_queue_store *st)
{
    static const struct {
        size_t off;
        const char *sql;
    } stmts[] = {
        {offsetof(struct hs_queue_store, ins),
         "INSERT INTO queue (created, count, parts, next_part, record, route_key) "
         "VALUES (?, ?, ?, ?, ?, ?)"},
        {offsetof(struct hs_queue_store, get), "SELECT record FROM queue WHERE id = ?"},
        {offsetof(struct hs_queue_store, adv),
         "UPDATE queue SET next_part = ?, count = ? WHERE id = ?"},
        {offsetof(struct hs_queue_store, del), "DELETE FROM queue WHERE id = ?"},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(stmts); i++) {
        sqlite3_stmt **s = (sqlite3_stmt **)((char *)st + stmts[i].off);
        int rc = sqlite3_prepare_v2(st->db, stmts[i].sql, -1, s, NULL);
        if (rc != SQLITE_OK) { /* a table of another shape: not our file */
            set_err(st, "prepare");
            return rc == SQLITE_ERROR || is_corrupt(rc) ? OPEN_CORRUPT : OPEN_FAILED;
        }
    }
    return OPEN_OK;
}

/* A file from before route_key (its queue is kept): the column is added, 0 for every record. */
static enum open_result add_route_key(struct hs_queue_store *st)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, "SELECT route_key FROM queue LIMIT 0", -1, &q, NULL);
    sqlite3_finalize(q);
    if (rc == SQLITE_OK)
        return OPEN_OK;
    return exec_step(st, "ALTER TABLE queue ADD COLUMN route_key INTEGER NOT NULL DEFAULT 0",
                     "schema");
}

static enum open_result try_open(struct hs_queue_store *st)
{
    int rc = sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        set_err(st, "open");
        return is_corrupt(rc) ? OPEN_CORRUPT : OPEN_FAILED;
    }
    sqlite3_extended_result_codes(st->db, 1);
    enum open_result r;
    /* exclusive: no -shm file, and a second opener gets SQLITE_BUSY at once (no busy wait) */
    if ((r = exec_step(st, "PRAGMA locking_mode=EXCLUSIVE", "locking")) != OPEN_OK ||
        (r = exec_step(st, "PRAGMA journal_mode=WAL", "journal_mode")) != OPEN_OK ||
        (r = exec_step(st, "PRAGMA synchronous=FULL", "synchronous")) != OPEN_OK ||
        (r = check(st)) != OPEN_OK)
        return r;
    /* a write transaction takes the exclusive lock now, not at the first put */
    if ((r = exec_step(st, "BEGIN IMMEDIATE", "lock")) != OPEN_OK)
        return r;
    if ((r = exec_step(st, schema, "schema")) != OPEN_OK || (r = add_route_key(st)) != OPEN_OK) {
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return r;
    }
    if ((r = exec_step(st, "COMMIT", "schema")) != OPEN_OK)
        return r;
    return prepare(st);
}

/* Renames the file and its WAL to <path>.corrupt-<unix time>[-wal]: kept for a post-mortem,
 * out of the way of a fresh store. */
static int move_aside(struct hs_queue_store *st, struct hs_queue_store_open_info *info)
{
    snprintf(info->aside, sizeof(info->aside), "%s.corrupt-%lld", st->path, (long long)time(NULL));
    static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(suffixes); i++) {
        char from[600], to[600];
        snprintf(from, sizeof(from), "%s%s", st->path, suffixes[i]);
        snprintf(to, sizeof(to), "%s%s", info->aside, suffixes[i]);
        if (rename(from, to) != 0 && errno != ENOENT)
            unlink(from); /* a stale WAL must not be replayed into the fresh store */
    }
    if (rename(st->path, info->aside) != 0) {
        snprintf(st->err, sizeof(st->err), "cannot move %s aside: %s", st->path, strerror(errno));
        return HS_EIO;
    }
    info->moved_aside = true;
    return 0;
}

void hs_queue_store_close(struct hs_queue_store *st)
{
    if (!st)
        return;
    finalize_all(st);
    free(st->id);
    free(st->path);
    free(st->fail_path);
    free(st);
}

static bool store_empty(struct hs_queue_store *st)
{
    sqlite3_stmt *q = NULL;
    bool empty =
        sqlite3_prepare_v2(st->db, "SELECT 1 FROM queue LIMIT 1", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_DONE;
    sqlite3_finalize(q);
    return empty;
}

bool hs_queue_store_close_remove(struct hs_queue_store *st)
{
    if (!st)
        return false;
    bool empty = st->db && store_empty(st);
    char *path = hs_xstrdup(st->path);
    hs_queue_store_close(st); /* the WAL is checkpointed and removed by the last close */
    if (empty) {
        static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
        for (size_t i = 0; i < HS_ARRAY_SIZE(suffixes); i++) {
            char f[600];
            snprintf(f, sizeof(f), "%s%s", path, suffixes[i]);
            unlink(f);
        }
    }
    free(path);
    return empty;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* file_name's inverse: false when `name` is not one of ours. */
static bool id_of(const char *name, struct hs_buf *id)
{
    static const char suffix[] = ".queue.db";
    size_t n = strlen(name), sl = sizeof(suffix) - 1;
    if (n <= sl || strcmp(name + n - sl, suffix) != 0)
        return false;
    hs_buf_reset(id);
    for (size_t i = 0; i < n - sl; i++) {
        int c = (unsigned char)name[i];
        if (c == '%') {
            int hi = i + 2 < n - sl ? hexval(name[i + 1]) : -1,
                lo = hi < 0 ? -1 : hexval(name[i + 2]);
            if (lo < 0)
                return false;
            c = hi << 4 | lo;
            i += 2;
        }
        if (hs_buf_putc(id, (uint8_t)c) != 0)
            return false;
    }
    return hs_buf_putc(id, '\0') == 0;
}

int hs_queue_store_list(const char *dir, const char *prefix, void (*fn)(void *ud, const char *id),
                        void *ud)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : HS_EIO;
    int n = 0;
    struct hs_buf id = {0};
    size_t pl = strlen(prefix);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (!id_of(de->d_name, &id) || strncmp((const char *)id.data, prefix, pl) != 0)
            continue;
        fn(ud, (const char *)id.data);
        n++;
    }
    hs_buf_free(&id);
    closedir(d);
    return n;
}

int hs_queue_store_open(const char *dir, const char *id, struct hs_queue_store **out,
                        struct hs_queue_store_open_info *info)
{
    memset(info, 0, sizeof(*info));
    *out = NULL;
    struct hs_queue_store *st = hs_xcalloc(1, sizeof(*st));
    st->id = hs_xstrdup(id);
    struct hs_buf p = {0};
    if (file_name(dir, id, &p) != 0)
        abort(); /* a path at start: treat like hs_xmalloc */
    st->path = (char *)p.data;
    const char *fail = getenv(HS_QUEUE_STORE_FAIL_ENV);
    if (fail && fail[0])
        st->fail_path = hs_xstrdup(fail);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        hs_log_error(id, "sending_queue.storage: cannot create %s: %s", dir, strerror(errno));
        goto fail;
    }
    enum open_result r = try_open(st);
    if (r == OPEN_CORRUPT) {
        char why[sizeof(st->err)];
        snprintf(why, sizeof(why), "%s", st->err);
        finalize_all(st);
        if (move_aside(st, info) != 0) {
            hs_log_error(id, "queue store %s is unreadable (%s) and %s", st->path, why, st->err);
            goto fail;
        }
        hs_log_error(id,
                     "queue store %s is unreadable (%s): moved aside to %s, starting empty; what "
                     "it held is not sent",
                     st->path, why, info->aside);
        r = try_open(st);
    }
    if (r != OPEN_OK) {
        bool busy = (sqlite3_errcode(st->db) & 0xff) == SQLITE_BUSY;
        hs_log_error(id, "cannot open queue store %s: %s%s", st->path, st->err,
                     busy ? " (another hotspan, or another exporter with this id, uses it)" : "");
        goto fail;
    }
    *out = st;
    return 0;
fail:
    hs_queue_store_close(st);
    return HS_EIO;
}

int hs_queue_store_scan(struct hs_queue_store *st,
                        void (*fn)(void *ud, const struct hs_queue_store_meta *m), void *ud)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(
        st->db,
        "SELECT id, length(record), count, parts, next_part, route_key FROM queue ORDER BY id", -1,
        &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        struct hs_queue_store_meta m = {
            .id = sqlite3_column_int64(q, 0),
            .bytes = (uint64_t)sqlite3_column_int64(q, 1),
            .count = (uint32_t)sqlite3_column_int64(q, 2),
            .parts = (uint32_t)sqlite3_column_int64(q, 3),
            .next_part = (uint32_t)sqlite3_column_int64(q, 4),
            .key = (uint64_t)sqlite3_column_int64(q, 5),
        };
        fn(ud, &m);
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        set_err(st, "scan");
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : HS_EIO;
}

static bool hook_fails(struct hs_queue_store *st)
{
    if (!st->fail_path || access(st->fail_path, F_OK) != 0)
        return false;
    snprintf(st->err, sizeof(st->err), "write: database or disk is full (simulated: %s exists)",
             st->fail_path);
    return true;
}

/* Runs a prepared write statement once; a failed statement is rolled back by SQLite. */
static int run(struct hs_queue_store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_DONE)
        return 0;
    set_err(st, what);
    return HS_EIO;
}

int hs_queue_store_put(struct hs_queue_store *st, const void *rec, size_t len,
                       struct hs_queue_store_meta *meta)
{
    if (hook_fails(st))
        return HS_EIO;
    sqlite3_bind_int64(st->ins, 1, (int64_t)(hs_wall_ns() / 1000000));
    sqlite3_bind_int64(st->ins, 2, meta->count);
    sqlite3_bind_int64(st->ins, 3, meta->parts);
    sqlite3_bind_int64(st->ins, 4, meta->next_part);
    sqlite3_bind_blob64(st->ins, 5, rec, len, SQLITE_STATIC);
    sqlite3_bind_int64(st->ins, 6, (int64_t)meta->key);
    int rc = run(st, st->ins, "write");
    if (rc == 0) {
        meta->id = sqlite3_last_insert_rowid(st->db);
        meta->bytes = len;
    }
    return rc;
}

int hs_queue_store_get(struct hs_queue_store *st, int64_t id, struct hs_buf *out)
{
    sqlite3_bind_int64(st->get, 1, id);
    int rc = sqlite3_step(st->get), ret = 0;
    hs_buf_reset(out);
    if (rc == SQLITE_ROW) {
        const void *p = sqlite3_column_blob(st->get, 0);
        int n = sqlite3_column_bytes(st->get, 0);
        if (n > 0 && hs_buf_append(out, p, (size_t)n) != 0)
            ret = HS_ENOMEM;
    } else if (rc == SQLITE_DONE) {
        snprintf(st->err, sizeof(st->err), "read: record %lld is gone", (long long)id);
        ret = HS_ENOENT;
    } else {
        set_err(st, "read");
        ret = HS_EIO;
    }
    sqlite3_reset(st->get);
    sqlite3_clear_bindings(st->get);
    return ret;
}

int hs_queue_store_advance(struct hs_queue_store *st, int64_t id, uint32_t next_part,
                           uint32_t count)
{
    if (hook_fails(st))
        return HS_EIO;
    sqlite3_bind_int64(st->adv, 1, next_part);
    sqlite3_bind_int64(st->adv, 2, count);
    sqlite3_bind_int64(st->adv, 3, id);
    return run(st, st->adv, "update");
}

int hs_queue_store_delete(struct hs_queue_store *st, int64_t id)
{
    sqlite3_bind_int64(st->del, 1, id);
    return run(st, st->del, "delete");
}

const char *hs_queue_store_errmsg(const struct hs_queue_store *st)
{
    return st->err;
}

const char *hs_queue_store_path(const struct hs_queue_store *st)
{
    return st->path;
}

/* ---- the record format (queue_store.h) ---------------------------------------------------- */

#define RECORD_MAGIC "HSQ1"
#define RECORD_HEAD 8 /* magic, parts */

static int put_u32(struct hs_buf *b, uint32_t v)
{
    uint8_t q[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return hs_buf_append(b, q, 4);
}

static int put_str(struct hs_buf *b, const char *s, size_t n)
{
    int rc = n > UINT32_MAX ? HS_E2BIG : put_u32(b, (uint32_t)n);
    if (rc == 0)
        rc = hs_buf_append(b, s, n);
    return rc == 0 ? hs_buf_putc(b, '\0') : rc;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int hs_queue_record_start(struct hs_buf *rec)
{
    hs_buf_reset(rec);
    return hs_buf_append(rec, RECORD_MAGIC "\0\0\0\0", RECORD_HEAD);
}

int hs_queue_record_add(struct hs_buf *rec, const struct hs_queue_part *part)
{
    size_t before = rec->len;
    int rc = put_u32(rec, part->count);
    if (rc == 0)
        rc = hs_buf_putc(rec, part->url_relative ? 1 : 0);
    if (rc == 0)
        rc = put_str(rec, part->url, strlen(part->url));
    if (rc == 0)
        rc = put_u32(rec, (uint32_t)part->nlines);
    for (size_t i = 0; rc == 0 && i < part->nlines; i++)
        rc = put_str(rec, part->lines[i], strlen(part->lines[i]));
    if (rc == 0)
        rc = part->body_len > UINT32_MAX ? HS_E2BIG : put_u32(rec, (uint32_t)part->body_len);
    if (rc == 0 && part->body_len)
        rc = hs_buf_append(rec, part->body, part->body_len);
    if (rc != 0)
        rec->len = before;
    return rc;
}

int hs_queue_record_finish(struct hs_buf *rec, uint32_t parts)
{
    uint8_t *p = rec->data + 4;
    p[0] = (uint8_t)parts, p[1] = (uint8_t)(parts >> 8), p[2] = (uint8_t)(parts >> 16),
    p[3] = (uint8_t)(parts >> 24);
    return put_u32(rec, (uint32_t)crc32(0, rec->data, (uInt)rec->len));
}

int hs_queue_record_check(const uint8_t *p, size_t len, uint32_t *parts, size_t *off)
{
    if (len < RECORD_HEAD + 4 || len > UINT32_MAX || memcmp(p, RECORD_MAGIC, 4) != 0 ||
        get_u32(p + len - 4) != (uint32_t)crc32(0, p, (uInt)(len - 4)))
        return HS_EINVAL;
    *parts = get_u32(p + 4);
    *off = RECORD_HEAD;
    return 0;
}

/* Reads a u32, or a str (pointer to its bytes, NUL checked), bounded by end = len - CRC. */
static bool rd_u32(const uint8_t *p, size_t end, size_t *off, uint32_t *v)
{
    if (end - *off < 4)
        return false;
    *v = get_u32(p + *off);
    *off += 4;
    return true;
}

static bool rd_str(const uint8_t *p, size_t end, size_t *off, const char **s)
{
    uint32_t n;
    if (!rd_u32(p, end, off, &n) || end - *off < (size_t)n + 1 || p[*off + n] != '\0')
        return false;
    *s = (const char *)p + *off;
    *off += (size_t)n + 1;
    return true;
}

int hs_queue_record_part(const uint8_t *p, size_t len, size_t *off, struct hs_queue_part *out)
{
    size_t end = len - 4, o = *off;
    uint32_t nlines, body_len;
    memset(out, 0, sizeof(*out));
    if (o > end || !rd_u32(p, end, &o, &out->count) || end - o < 1)
        return HS_EINVAL;
    out->url_relative = p[o++] != 0;
    if (!rd_str(p, end, &o, &out->url) || !rd_u32(p, end, &o, &nlines) ||
        nlines > HS_QUEUE_PART_LINES)
        return HS_EINVAL;
    for (uint32_t i = 0; i < nlines; i++)
        if (!rd_str(p, end, &o, &out->lines[i]))
            return HS_EINVAL;
    out->nlines = nlines;
    if (!rd_u32(p, end, &o, &body_len) || end - o < body_len)
        return HS_EINVAL;
    out->body = p + o;
    out->body_len = body_len;
    *off = o + body_len;
    return 0;
}
