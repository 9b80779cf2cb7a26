/* test_config.c: the YAML config tree: positions, null spellings, syntax and structural
 * errors, files, ${env:...} expansion and its errors, error line format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/config.h"
#include "core/errors.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static void parse_ok(const char *yaml, struct hs_config_doc *doc)
{
    struct hs_error err = {0};
    int rc = hs_config_parse("t.yaml", yaml, strlen(yaml), doc, &err);
    if (rc)
        fail_msg("unexpected parse error: %s", err.lines[0]);
    assert_int_equal(err.count, 0);
    hs_error_free(&err);
}

/* Parses and decodes `yaml` against `fields` (parse must succeed); returns the decode code. */

static void assert_errors(const struct hs_error *err, const char *const *want, size_t n)
{
    for (size_t i = 0; i < err->count; i++)
        print_message("  error %zu: %s\n", i, err->lines[i]);
    assert_int_equal(err->count, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(err->lines[i], want[i]);
}

#define ASSERT_ERRORS(err, ...)                                                                    \
    do {                                                                                           \
        const char *const want_[] = {__VA_ARGS__};                                                 \
        assert_errors((err), want_, sizeof(want_) / sizeof(want_[0]));                             \
    } while (0)

/* Decodes one bad `yaml`; expects exactly the one error `want`. */

static void assert_pos(const struct hs_config_node *n, unsigned line, unsigned col)
{
    assert_non_null(n);
    assert_int_equal(n->line, line);
    assert_int_equal(n->col, col);
}

/* ---- the tree ----------------------------------------------------------------------------- */

static void test_tree_shape_and_positions(void **state)
{
    const char *yaml = "a: 1\n"
                       "b:\n"
                       "  c: \"x\"\n"
                       "  d: [1, 'two', ~]\n"
                       "e:\n"
                       "  - f\n"
                       "  - g: h\n"
                       "empty:\n";
    struct hs_config_doc doc;
    parse_ok(yaml, &doc);
    const struct hs_config_node *root = doc.root;
    assert_int_equal(root->kind, HS_NODE_MAP);
    assert_string_equal(root->file, "t.yaml");
    assert_pos(root, 1, 1);

    const struct hs_config_node *a = hs_config_get(root, "a");
    assert_int_equal(a->kind, HS_NODE_SCALAR);
    assert_string_equal(a->value, "1");
    assert_pos(a, 1, 4);
    assert_int_equal(a->key_line, 1);
    assert_int_equal(a->key_col, 1);
    assert_false(a->quoted);
    assert_false(a->is_null);

    const struct hs_config_node *b = hs_config_get(root, "b");
    assert_int_equal(b->kind, HS_NODE_MAP);
    assert_pos(b, 3, 3);
    const struct hs_config_node *c = hs_config_get(b, "c");
    assert_pos(c, 3, 6);
    assert_int_equal(c->key_line, 3);
    assert_int_equal(c->key_col, 3);
    assert_true(c->quoted);
    assert_string_equal(c->value, "x");

    const struct hs_config_node *d = hs_config_get(b, "d");
    assert_int_equal(d->kind, HS_NODE_SEQ);
    assert_pos(d, 4, 6);
    const struct hs_config_node *d0 = d->child, *d1 = d0->next, *d2 = d1->next;
    assert_pos(d0, 4, 7);
    assert_string_equal(d0->value, "1");
    assert_null(d0->key);
    assert_pos(d1, 4, 10);
    assert_true(d1->quoted);
    assert_string_equal(d1->value, "two");
    assert_pos(d2, 4, 17);
    assert_true(d2->is_null);
    assert_null(d2->next);

    const struct hs_config_node *e = hs_config_get(root, "e");
    assert_int_equal(e->kind, HS_NODE_SEQ);
    assert_pos(e->child, 6, 5);
    assert_string_equal(e->child->value, "f");
    const struct hs_config_node *g = hs_config_get(e->child->next, "g");
    assert_pos(g, 7, 8);
    assert_string_equal(g->value, "h");

    const struct hs_config_node *empty = hs_config_get(root, "empty");
    assert_int_equal(empty->kind, HS_NODE_SCALAR);
    assert_true(empty->is_null);
    assert_string_equal(empty->value, "");
    assert_int_equal(empty->key_line, 8);

    /* keys in document order; absent keys and non-maps give NULL */
    assert_string_equal(root->child->key, "a");
    assert_string_equal(root->child->next->key, "b");
    assert_null(hs_config_get(root, "zzz"));
    assert_null(hs_config_get(a, "x"));
    assert_null(hs_config_get(NULL, "a"));
    hs_config_doc_free(&doc);
    hs_config_doc_free(&doc); /* zeroed: harmless */
}

static void test_null_spellings(void **state)
{
    const char *yaml = "{a: ~, b: null, c: Null, d: NULL, e: , f: 'null', g: \"\", h: nil}";
    struct hs_config_doc doc;
    parse_ok(yaml, &doc);
    const char *nulls[] = {"a", "b", "c", "d", "e"};
    for (size_t i = 0; i < 5; i++) {
        const struct hs_config_node *n = hs_config_get(doc.root, nulls[i]);
        assert_true(n->is_null);
        assert_false(n->quoted);
    }
    const struct hs_config_node *f = hs_config_get(doc.root, "f");
    assert_false(f->is_null);
    assert_true(f->quoted);
    assert_string_equal(f->value, "null");
    assert_false(hs_config_get(doc.root, "g")->is_null);
    assert_true(hs_config_get(doc.root, "g")->quoted);
    assert_false(hs_config_get(doc.root, "h")->is_null);
    hs_config_doc_free(&doc);
}

static void test_empty_documents(void **state)
{
    const char *texts[] = {"", "# only a comment\n", "---\n", "~\n", "\n\n   \n"};
    for (size_t i = 0; i < 5; i++) {
        struct hs_config_doc doc;
        struct hs_error err = {0};
        assert_int_equal(hs_config_parse("t.yaml", texts[i], strlen(texts[i]), &doc, &err), 0);
        assert_null(doc.root);
        assert_int_equal(err.count, 0);
        hs_config_doc_free(&doc);
    }
    /* all defaults from a NULL map */
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", NULL, 0, &doc, &err), 0);
    assert_null(doc.root);
    hs_config_doc_free(&doc);
}

static void test_syntax_errors(void **state)
{
    struct {
        const char *yaml;
        const char *want;
    } cases[] = {
        {"a: [1, 2\nb: 3\n", "t.yaml:2:2: did not find expected ',' or ']' (while parsing a flow "
                             "sequence at line 1, column 4)"},
        {"a: 1\n b: 2\n", "t.yaml:2:3: mapping values are not allowed in this context"},
        {"a: \"open\n", "t.yaml:2:1: found unexpected end of stream (while scanning a quoted "
                        "scalar at line 1, column 4)"},
        {"a: 1\n\tb: 2\n", "t.yaml:2:1: found a tab character that violates indentation (while "
                           "scanning a plain scalar at line 1, column 4)"},
        {"a: b\x01\n", "t.yaml:1:5: control characters are not allowed (#x1)"},
        {"a: \xff\n", "t.yaml:1:4: invalid leading UTF-8 octet (#xFF)"},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(cases); i++) {
        struct hs_config_doc doc;
        struct hs_error err = {0};
        assert_int_equal(
            hs_config_parse("t.yaml", cases[i].yaml, strlen(cases[i].yaml), &doc, &err), HS_EINVAL);
        ASSERT_ERRORS(&err, cases[i].want);
        hs_error_free(&err);
        hs_config_doc_free(&doc);
    }
}

static void test_structural_rejections(void **state)
{
    const char *yaml = "a: 1\n"
                       "b: {x: 1, x: 2}\n"
                       "c: &anchor 5\n"
                       "d: *anchor\n"
                       "? [k]\n"
                       ": v\n"
                       "e: !!str 7\n"
                       "a: again\n"
                       "f: ok\n";
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:2:11: b.x: duplicate key (first at line 2)",
                  "t.yaml:3:4: c: anchors (&anchor) are not supported",
                  "t.yaml:4:4: d: aliases (*anchor) are not supported",
                  "t.yaml:5:3: keys must be plain strings, not sequences",
                  "t.yaml:7:4: e: tags (tag:yaml.org,2002:str) are not supported",
                  "t.yaml:8:1: a: duplicate key (first at line 1)");
    /* the tree is kept for callers that report more; the first of a duplicate wins */
    assert_string_equal(hs_config_get(doc.root, "a")->value, "1");
    assert_string_equal(hs_config_get(doc.root, "f")->value, "ok");
    hs_error_free(&err);
    hs_config_doc_free(&doc);

    const char *two = "a: 1\n---\nb: 2\n";
    assert_int_equal(hs_config_parse("t.yaml", two, strlen(two), &doc, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:2:1: only one YAML document is allowed");
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

static void test_depth_limit(void **state)
{
    char yaml[400];
    memset(yaml, '[', 200);
    memset(yaml + 200, ']', 200);
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, sizeof(yaml), &doc, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:1:65: nested deeper than 64 levels");
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

static void test_parse_file(void **state)
{
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse_file("/nonexistent/hs.yaml", &doc, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "/nonexistent/hs.yaml: cannot read: No such file or directory");
    hs_error_free(&err);
    hs_config_doc_free(&doc);

    assert_int_equal(hs_config_parse_file("/", &doc, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "/: cannot read: Is a directory");
    hs_error_free(&err);

    char path[] = "/tmp/hs-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "k:\n  v: 42\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(hs_config_parse_file(path, &doc, &err), 0);
    assert_string_equal(doc.file, path);
    const struct hs_config_node *v = hs_config_get(hs_config_get(doc.root, "k"), "v");
    assert_string_equal(v->value, "42");
    assert_string_equal(v->file, path);
    assert_pos(v, 2, 6);
    hs_config_doc_free(&doc);
    unlink(path);
}

static void test_env_expansion(void **state)
{
    setenv("HS_T_A", "alpha", 1);
    setenv("HS_T_EMPTY", "", 1);
    unsetenv("HS_T_UNSET");
    const char *yaml = "a: ${env:HS_T_A}\n"
                       "b: x-${env:HS_T_A}-${env:HS_T_A}-y\n"
                       "c: ${env:HS_T_UNSET:-dflt}\n"
                       "d: ${env:HS_T_EMPTY:-dflt}\n"
                       "e: ${env:HS_T_A:-dflt}\n"
                       "f: ${env:HS_T_UNSET}\n"
                       "g: $$HOME\n"
                       "h: $${env:HS_T_A}\n"
                       "i: cost $5 and $\n"
                       "j: \"${env:HS_T_UNSET}\"\n"
                       "k: ${env:HS_T_UNSET:-a:b-c}\n"
                       "l: ${env:HS_T_UNSET:-}\n";
    struct hs_config_doc doc;
    parse_ok(yaml, &doc);
    struct {
        const char *key, *value;
        bool is_null;
    } want[] = {
        {"a", "alpha", false}, {"b", "x-alpha-alpha-y", false}, {"c", "dflt", false},
        {"d", "dflt", false},  {"e", "alpha", false},           {"f", "", true},
        {"g", "$HOME", false}, {"h", "${env:HS_T_A}", false},   {"i", "cost $5 and $", false},
        {"j", "", false},      {"k", "a:b-c", false},           {"l", "", true},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(want); i++) {
        const struct hs_config_node *n = hs_config_get(doc.root, want[i].key);
        assert_string_equal(n->value, want[i].value);
        assert_int_equal(n->is_null, want[i].is_null);
    }
    hs_config_doc_free(&doc);
}

static void test_env_errors(void **state)
{
    const char *yaml = "a: ${HS_T_A}\n"
                       "b:\n"
                       "  c: pre-${file:/etc/x}\n"
                       "d: ${env:HS_T_A\n"
                       "e: [ok, \"${env:1BAD}\"]\n"
                       "f: ${env:HS_T_A:x}\n"
                       "g: ${}\n";
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:1:4: a: \"${HS_T_A}\" is not supported (write ${env:NAME})",
                  "t.yaml:3:6: b.c: \"${file:/etc/x}\": unsupported provider \"file\" "
                  "(only ${env:NAME})",
                  "t.yaml:4:4: d: unterminated \"${\" (missing \"}\")",
                  "t.yaml:5:9: e[1]: \"${env:1BAD}\": bad environment variable name \"1BAD\"",
                  "t.yaml:6:4: f: \"${env:HS_T_A:x}\": expected \"}\" or \":-default\" after "
                  "the name",
                  "t.yaml:7:4: g: \"${}\" is not supported (write ${env:NAME})");
    /* a bad expansion leaves the text as written */
    assert_string_equal(hs_config_get(doc.root, "a")->value, "${HS_T_A}");
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

static void test_errorf_format(void **state)
{
    struct hs_error err = {0};
    struct hs_config_node n = {.file = "f.yaml", .line = 3, .col = 7};
    hs_config_errorf(&err, &n, "a.b", "bad %d", 42);
    hs_config_errorf(&err, &n, NULL, "no path");
    hs_config_errorf(&err, NULL, "a.b", "no node");
    hs_config_errorf(&err, NULL, "", "bare");
    ASSERT_ERRORS(&err, "f.yaml:3:7: a.b: bad 42", "f.yaml:3:7: no path", "a.b: no node", "bare");
    hs_error_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_shape_and_positions),
        cmocka_unit_test(test_null_spellings),
        cmocka_unit_test(test_empty_documents),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_structural_rejections),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_parse_file),
        cmocka_unit_test(test_env_expansion),
        cmocka_unit_test(test_env_errors),
        cmocka_unit_test(test_errorf_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
