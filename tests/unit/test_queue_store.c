/* test_queue_store.c: the on-disk queue: put, read, advance and delete survive a close and
 * reopen in order; the record format round-trips and its CRC catches damage; a garbage or
 * truncated file is moved aside and an empty store made; a second opener is refused; the
 * test-only failure hook refuses writes until the flag file goes away. A record's routing key
 * survives a reopen, a file from before the key column keeps its records (key 0), stores are
 * listed by id prefix, and an emptied store's file is removed on close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "core/buf.h"
#include "core/errors.h"
#include "exporters/helper/queue_store.h"

struct fixture {
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/hs-qstore-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof(fx->path), "%s/otlp%%2Ftempo.queue.db", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    DIR *d = opendir(fx->dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", fx->dir, de->d_name);
        if (de->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(fx->dir);
    unsetenv(HS_QUEUE_STORE_FAIL_ENV);
    free(fx);
    return 0;
}

static struct hs_queue_store *open_store(struct fixture *fx, struct hs_queue_store_open_info *info)
{
    struct hs_queue_store *st = NULL;
    struct hs_queue_store_open_info dummy;
    assert_int_equal(hs_queue_store_open(fx->dir, "otlp/tempo", &st, info ? info : &dummy), 0);
    assert_non_null(st);
    return st;
}

static int64_t put(struct hs_queue_store *st, const char *text, uint32_t count, uint32_t parts)
{
    struct hs_queue_store_meta m = {.count = count, .parts = parts};
    assert_int_equal(hs_queue_store_put(st, text, strlen(text), &m), 0);
    assert_int_equal(m.bytes, strlen(text));
    return m.id;
}

struct seen {
    struct hs_queue_store_meta m[16];
    size_t n;
};

static void on_rec(void *ud, const struct hs_queue_store_meta *m)
{
    struct seen *s = ud;
    assert_true(s->n < 16);
    s->m[s->n++] = *m;
}

static struct seen scan(struct hs_queue_store *st)
{
    struct seen s = {0};
    assert_int_equal(hs_queue_store_scan(st, on_rec, &s), 0);
    return s;
}

static size_t count_files(struct fixture *fx, const char *infix)
{
    size_t n = 0;
    DIR *d = opendir(fx->dir);
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, infix) != NULL;
    closedir(d);
    return n;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_put_get_delete_reopen(void **state)
{
    struct fixture *fx = *state;
    struct hs_queue_store *st = open_store(fx, NULL);
    assert_string_equal(hs_queue_store_path(st), fx->path); /* "/" escaped, not a subdir */
    int64_t a = put(st, "first", 3, 1), b = put(st, "second", 5, 2), c = put(st, "third", 1, 1);
    assert_true(a < b && b < c);
    struct hs_buf out = {0};
    assert_int_equal(hs_queue_store_get(st, b, &out), 0);
    assert_memory_equal(out.data, "second", 6);
    assert_int_equal(out.len, 6);
    assert_int_equal(hs_queue_store_delete(st, a), 0);
    assert_int_equal(hs_queue_store_get(st, a, &out), HS_ENOENT);
    assert_int_equal(hs_queue_store_advance(st, b, 1, 2), 0);
    hs_queue_store_close(st);

    st = open_store(fx, NULL); /* what a restart finds */
    struct seen s = scan(st);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.m[0].id, b); /* oldest first */
    assert_int_equal(s.m[0].next_part, 1);
    assert_int_equal(s.m[0].count, 2);
    assert_int_equal(s.m[0].parts, 2);
    assert_int_equal(s.m[0].bytes, 6);
    assert_int_equal(s.m[1].id, c);
    assert_int_equal(hs_queue_store_get(st, c, &out), 0);
    assert_memory_equal(out.data, "third", 5);
    int64_t d = put(st, "fourth", 1, 1); /* new ids stay after the old ones */
    assert_true(d > c);
    hs_buf_free(&out);
    hs_queue_store_close(st);
}

static void test_record_format(void **state)
{
    struct hs_buf rec = {0};
    static const uint8_t body[] = {0, 1, 2, 0xff, 'x'};
    assert_int_equal(hs_queue_record_start(&rec), 0);
    struct hs_queue_part p = {.count = 7,
                              .url_relative = true,
                              .url = "?name=a%7B%7D",
                              .lines = {"Content-Type: x", "X-Scope-OrgID: t1"},
                              .nlines = 2,
                              .body = body,
                              .body_len = sizeof(body)};
    assert_int_equal(hs_queue_record_add(&rec, &p), 0);
    struct hs_queue_part q = {.count = 1, .url = "http://h/x", .body = NULL, .body_len = 0};
    assert_int_equal(hs_queue_record_add(&rec, &q), 0);
    assert_int_equal(hs_queue_record_finish(&rec, 2), 0);

    uint32_t parts;
    size_t off;
    assert_int_equal(hs_queue_record_check(rec.data, rec.len, &parts, &off), 0);
    assert_int_equal(parts, 2);
    struct hs_queue_part r;
    assert_int_equal(hs_queue_record_part(rec.data, rec.len, &off, &r), 0);
    assert_int_equal(r.count, 7);
    assert_true(r.url_relative);
    assert_string_equal(r.url, "?name=a%7B%7D");
    assert_int_equal(r.nlines, 2);
    assert_string_equal(r.lines[1], "X-Scope-OrgID: t1");
    assert_int_equal(r.body_len, sizeof(body));
    assert_memory_equal(r.body, body, sizeof(body));
    assert_int_equal(hs_queue_record_part(rec.data, rec.len, &off, &r), 0);
    assert_false(r.url_relative);
    assert_string_equal(r.url, "http://h/x");
    assert_int_equal(r.body_len, 0);
    assert_int_equal(off, rec.len - 4); /* exactly up to the CRC */
    assert_int_not_equal(hs_queue_record_part(rec.data, rec.len, &off, &r), 0);

    for (size_t i = 0; i < rec.len; i += 7) { /* any flipped byte is caught */
        rec.data[i] ^= 0x40;
        assert_int_equal(hs_queue_record_check(rec.data, rec.len, &parts, &off), HS_EINVAL);
        rec.data[i] ^= 0x40;
    }
    assert_int_equal(hs_queue_record_check(rec.data, rec.len - 1, &parts, &off), HS_EINVAL);
    assert_int_equal(hs_queue_record_check(rec.data, 3, &parts, &off), HS_EINVAL);
    hs_buf_free(&rec);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void test_garbage_moved_aside(void **state)
{
    struct fixture *fx = *state;
    char junk[8192];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)(i * 131 + 7);
    write_file(fx->path, junk, sizeof(junk));
    struct hs_queue_store_open_info info;
    struct hs_queue_store *st = open_store(fx, &info);
    assert_true(info.moved_aside);
    assert_non_null(strstr(info.aside, ".corrupt-"));
    struct stat sb;
    assert_int_equal(stat(info.aside, &sb), 0); /* kept for a post-mortem */
    assert_int_equal(sb.st_size, sizeof(junk));
    assert_int_equal(scan(st).n, 0);
    put(st, "works", 1, 1); /* a fresh store in its place */
    hs_queue_store_close(st);
    st = open_store(fx, &info);
    assert_false(info.moved_aside);
    assert_int_equal(scan(st).n, 1);
    hs_queue_store_close(st);
}

static void test_truncated_moved_aside(void **state)
{
    struct fixture *fx = *state;
    struct hs_queue_store *st = open_store(fx, NULL);
    char big[20000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 20; i++)
        put(st, big, 1, 1);
    hs_queue_store_close(st); /* the WAL is folded into the file on close */
    struct stat sb;
    assert_int_equal(stat(fx->path, &sb), 0);
    assert_true(sb.st_size > 100000);
    assert_int_equal(truncate(fx->path, sb.st_size / 2), 0); /* a torn copy, a full disk */
    struct hs_queue_store_open_info info;
    st = open_store(fx, &info);
    assert_true(info.moved_aside);
    assert_int_equal(scan(st).n, 0);
    hs_queue_store_close(st);
    assert_int_equal(count_files(fx, ".corrupt-"), 1);
}

static void test_second_opener_refused(void **state)
{
    struct fixture *fx = *state;
    struct hs_queue_store *st = open_store(fx, NULL), *other = NULL;
    put(st, "mine", 1, 1);
    struct hs_queue_store_open_info info;
    assert_int_equal(hs_queue_store_open(fx->dir, "otlp/tempo", &other, &info), HS_EIO);
    assert_null(other);
    assert_false(info.moved_aside); /* locked is not corrupt: nothing is moved */
    assert_int_equal(scan(st).n, 1);
    /* another id in the same directory is another file */
    assert_int_equal(hs_queue_store_open(fx->dir, "otlp_tempo", &other, &info), 0);
    assert_int_equal(scan(other).n, 0);
    hs_queue_store_close(other);
    hs_queue_store_close(st);
}

static void test_unusable_dir(void **state)
{
    struct fixture *fx = *state;
    char file[256];
    snprintf(file, sizeof(file), "%s/plain", fx->dir);
    write_file(file, "x", 1);
    struct hs_queue_store *st = NULL;
    struct hs_queue_store_open_info info;
    assert_int_equal(hs_queue_store_open(file, "otlp", &st, &info), HS_EIO); /* not a dir */
    assert_null(st);
    char sub[160];
    snprintf(sub, sizeof(sub), "%s/new", fx->dir); /* a missing dir is made */
    assert_int_equal(hs_queue_store_open(sub, "otlp", &st, &info), 0);
    hs_queue_store_close(st);
    snprintf(file, sizeof(file), "%s/otlp.queue.db", sub);
    unlink(file);
    rmdir(sub);
}

static void test_write_failure_and_recovery(void **state)
{
    struct fixture *fx = *state;
    char flag[128];
    snprintf(flag, sizeof(flag), "%s/full", fx->dir);
    setenv(HS_QUEUE_STORE_FAIL_ENV, flag, 1);
    struct hs_queue_store *st = open_store(fx, NULL);
    int64_t a = put(st, "before", 1, 2);
    write_file(flag, "", 0); /* the disk is full */
    struct hs_queue_store_meta m = {.count = 1, .parts = 1};
    assert_int_equal(hs_queue_store_put(st, "lost?", 5, &m), HS_EIO);
    assert_non_null(strstr(hs_queue_store_errmsg(st), "full"));
    assert_int_equal(hs_queue_store_advance(st, a, 1, 1), HS_EIO);
    assert_int_equal(hs_queue_store_delete(st, a), 0); /* freeing space still works */
    assert_int_equal(scan(st).n, 0);
    unlink(flag); /* space is back */
    put(st, "after", 1, 1);
    struct seen s = scan(st);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.m[0].bytes, 5);
    hs_queue_store_close(st);
}

struct ids {
    char v[4][96];
    int n;
};

static void on_id(void *ud, const char *id)
{
    struct ids *ids = ud;
    assert_true(ids->n < 4);
    snprintf(ids->v[ids->n++], sizeof(ids->v[0]), "%s", id);
}

static void test_route_key_list_and_remove(void **state)
{
    struct fixture *fx = *state;
    struct hs_queue_store *st = NULL;
    struct hs_queue_store_open_info info;
    assert_int_equal(hs_queue_store_open(fx->dir, "lb/10.0.0.7:4318/spans", &st, &info), 0);
    struct hs_queue_store_meta m = {.count = 3, .parts = 1, .key = 0xfedcba9876543210ULL};
    assert_int_equal(hs_queue_store_put(st, "rec", 3, &m), 0);
    hs_queue_store_close(st);
    assert_int_equal(hs_queue_store_open(fx->dir, "lb/10.0.0.7:4318/spans", &st, &info), 0);
    struct seen s = scan(st);
    assert_int_equal(s.n, 1);
    assert_true(s.m[0].key == 0xfedcba9876543210ULL);    /* all 64 bits, through a signed column */
    struct hs_queue_store *other = open_store(fx, NULL); /* otlp/tempo: not under lb/ */
    hs_queue_store_close(other);
    struct ids ids = {0};
    assert_int_equal(hs_queue_store_list(fx->dir, "lb/", on_id, &ids), 1);
    assert_string_equal(ids.v[0], "lb/10.0.0.7:4318/spans"); /* unescaped */
    assert_false(hs_queue_store_close_remove(st));           /* a record left: the file stays */
    assert_int_equal(hs_queue_store_open(fx->dir, "lb/10.0.0.7:4318/spans", &st, &info), 0);
    assert_int_equal(hs_queue_store_delete(st, s.m[0].id), 0);
    assert_true(hs_queue_store_close_remove(st));
    ids.n = 0;
    assert_int_equal(hs_queue_store_list(fx->dir, "lb/", on_id, &ids), 0);
    assert_int_equal(count_files(fx, "lb%2F"), 0); /* the WAL went too */
}

/* A store written before the route_key column: its records are kept, their key 0. */
static void test_file_without_route_key(void **state)
{
    struct fixture *fx = *state;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(fx->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TABLE queue (id INTEGER PRIMARY KEY, created INTEGER "
                                  "NOT NULL, count INTEGER NOT NULL, parts INTEGER NOT NULL, "
                                  "next_part INTEGER NOT NULL, record BLOB NOT NULL);"
                                  "INSERT INTO queue (created, count, parts, next_part, record) "
                                  "VALUES (1, 7, 1, 0, x'616263');",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    struct hs_queue_store_open_info info;
    struct hs_queue_store *st = open_store(fx, &info);
    assert_false(info.moved_aside);
    struct seen s = scan(st);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.m[0].count, 7);
    assert_true(s.m[0].key == 0);
    put(st, "new", 1, 1); /* and it takes new records */
    assert_int_equal(scan(st).n, 2);
    hs_queue_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get_delete_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_moved_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_moved_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_opener_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unusable_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_failure_and_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_route_key_list_and_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_without_route_key, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
