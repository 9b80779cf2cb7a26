/* frames.c: which frames are the user's code (frames.h). The user's patterns first, then one
 * default rule per runtime, each written against what that profiler really puts in a pprof
 * Function's name and filename (cited at each rule). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "pdata/frames.h"

struct pattern {
    char *text;
    size_t len;
    bool on_file;  /* "file:": matched against the file name */
    bool contains; /* leading '*': anywhere, else at the start */
    bool app;      /* leading '!': application code */
};

struct hs_frame_rules {
    struct pattern *pats;
    size_t npats;
};

static const struct hs_str GC_LIB = HS_STR("(garbage collector)");

/* ---- small string helpers ----------------------------------------------------------------- */

static bool starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool ends_with(const char *s, const char *p)
{
    size_t n = strlen(s), m = strlen(p);
    return n >= m && memcmp(s + n - m, p, m) == 0;
}

static struct hs_str span(const char *b, const char *e)
{
    return (struct hs_str){b, (size_t)(e - b)};
}

static bool set_lib(struct hs_str *lib, struct hs_str v)
{
    if (lib)
        *lib = v;
    return true;
}

/* The last occurrence of needle in s, or NULL. */
static const char *find_last(const char *s, const char *needle)
{
    const char *last = NULL;
    for (const char *at = strstr(s, needle); at; at = strstr(at + 1, needle))
        last = at;
    return last;
}

/* End of the path element starting at s: a '/', or the ':' or ' ' that ends a path written
 * into a function name (@pyroscope/nodejs, pyroscope-rs folded), or the string's end. */
static const char *element_end(const char *s)
{
    return s + strcspn(s, "/: ");
}

/* ---- the user's patterns ----------------------------------------------------------------- */

static int pattern_parse(const char *src, struct pattern *p, char *err, size_t errlen)
{
    const char *s = src;
    if (strlen(src) > HS_FRAME_PATTERN_MAX) {
        snprintf(err, errlen, "library pattern \"%.40s...\" is longer than %d bytes", src,
                 HS_FRAME_PATTERN_MAX);
        return HS_EINVAL;
    }
    if (*s == '!') {
        p->app = true;
        s++;
    }
    if (starts_with(s, "file:")) {
        p->on_file = true;
        s += 5;
    }
    if (*s == '*') {
        p->contains = true;
        s++;
    }
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] == '*')
        len--;
    if (len == 0) {
        snprintf(err, errlen, "library pattern \"%s\" is empty: it would match every frame", src);
        return HS_EINVAL;
    }
    if (memchr(s, '*', len)) {
        snprintf(err, errlen,
                 "library pattern \"%s\": '*' is allowed only first (contains) or last (prefix)",
                 src);
        return HS_EINVAL;
    }
    p->text = hs_xstrndup(s, len);
    p->len = len;
    return 0;
}

int hs_frame_rules_new(const char *const *extra, size_t nextra, struct hs_frame_rules **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (nextra > HS_FRAME_RULES_MAX) {
        snprintf(err, errlen, "%zu library patterns, more than the %d allowed", nextra,
                 HS_FRAME_RULES_MAX);
        return HS_EINVAL;
    }
    struct hs_frame_rules *r = hs_xcalloc(1, sizeof(*r));
    r->pats = hs_xcalloc(nextra ? nextra : 1, sizeof(*r->pats));
    for (size_t i = 0; i < nextra; i++) {
        int rc = pattern_parse(extra[i], &r->pats[i], err, errlen);
        if (rc) {
            hs_frame_rules_free(r);
            return rc;
        }
        r->npats++;
    }
    *out = r;
    return 0;
}

void hs_frame_rules_free(struct hs_frame_rules *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->npats; i++)
        free(r->pats[i].text);
    free(r->pats);
    free(r);
}

static bool sep(char c)
{
    return c == '.' || c == '/' || c == ':';
}

/* The matched text without the separators around it ("github.com/lib/pq.", "/generated/"). */
static struct hs_str match_display(const char *at, size_t len)
{
    const char *b = at, *e = at + len;
    while (e - b > 1 && sep(e[-1]))
        e--;
    while (e - b > 1 && sep(b[0]))
        b++;
    return span(b, e);
}

static bool pattern_match(const struct pattern *p, const char *name, const char *file,
                          struct hs_str *m)
{
    const char *s = p->on_file ? file : name;
    const char *at = s;
    if (p->contains)
        at = strstr(s, p->text);
    else if (strncmp(s, p->text, p->len) != 0)
        at = NULL;
    if (!at)
        return false;
    *m = match_display(at, p->len);
    return true;
}

/* ---- pseudo-frames ------------------------------------------------------------------------ */

/* The library a frame named `inner` stands for, when a profiler wrote it with no script or file:
 * V8's "(idle)", "(program)", "(garbage collector)", "(root)", "(anonymous)", "(external)" (heap
 * profiles), @datadog/pprof's "Garbage Collection", "Node.js" and "Non JS threads activity"
 * (profile-serializer.js updateTimeProfile), jfr-parser's "[truncated]"; `native` when none. */
static struct hs_str pseudo_lib(struct hs_str inner, struct hs_str native)
{
    if (hs_str_eq(inner, "Garbage Collection") || hs_str_eq(inner, "(garbage collector)"))
        return GC_LIB;
    if (inner.len >= 2 && ((inner.ptr[0] == '(' && inner.ptr[inner.len - 1] == ')') ||
                           (inner.ptr[0] == '[' && inner.ptr[inner.len - 1] == ']')))
        return inner;
    if (hs_str_eq(inner, "Node.js") || hs_str_eq(inner, "Non JS threads activity"))
        return inner;
    return native;
}

static bool unsymbolized(const char *name)
{
    if (name[0] != '0' || name[1] != 'x' || !name[2])
        return false;
    for (const char *s = name + 2; *s; s++)
        if (hs_hexval((unsigned char)*s) < 0)
            return false;
    return true;
}

static bool pseudo_frame(const char *name, const char *file, struct hs_str *lib)
{
    size_t n = strlen(name);
    if (n == 0)
        return false;
    /* a location without lines: pprof_summary names it by its address; nothing to act on */
    if (!*file && unsymbolized(name))
        return set_lib(lib, HS_STR("(unsymbolized)"));
    if (!*file) {
        struct hs_str v = pseudo_lib((struct hs_str){name, n}, (struct hs_str){NULL, 0});
        if (v.ptr)
            return set_lib(lib, v);
    }
    /* @pyroscope/nodejs 0.6.4 renames every function to "<path>:<name>:<line>" (process-profile.js
     * adjustCwdPaths); a V8 function with no script, a native binding ("digest", "write", "Hash",
     * "runMicrotasks") or one of the pseudo-frames above, becomes ":<name>:0". Pyroscope-rs's
     * folded ":0 - name" does not end in digits, so it is not taken for one. */
    const char *last = strrchr(name, ':');
    if (name[0] == ':' && last > name && last[1]) {
        for (const char *d = last + 1; *d; d++)
            if (*d < '0' || *d > '9')
                return false;
        return set_lib(lib, pseudo_lib(span(name + 1, last), HS_STR("(native)")));
    }
    return false;
}

/* ---- Node.js ------------------------------------------------------------------------------ */

/* "node_modules/<pkg>" or "node_modules/@scope/<pkg>" of the innermost package in s: the
 * package whose code runs, whatever required it. */
static bool node_modules(const char *s, struct hs_str *lib)
{
    const char *at = find_last(s, "node_modules/");
    if (!at)
        return false;
    const char *pkg = at + strlen("node_modules/");
    const char *e = element_end(pkg);
    if (*pkg == '@' && *e == '/')
        e = element_end(e + 1);
    return set_lib(lib, span(at, e));
}

/* @datadog/pprof writes V8's scriptName as the file ("node:internal/crypto/hash", "node:events";
 * "internal/timers.js" before Node 16), and @pyroscope/nodejs puts the same path first in the
 * name ("node:internal/crypto/hash:digest:150"). Dependencies live under node_modules/. */
static bool node_frame(const char *name, const char *file, struct hs_str *lib)
{
    if (starts_with(file, "node:"))
        return set_lib(lib, span(file, file + strlen(file)));
    if (starts_with(name, "node:")) {
        const char *colon = strchr(name + 5, ':');
        return set_lib(lib, span(name, colon ? colon : name + strlen(name)));
    }
    if (starts_with(file, "internal/") && ends_with(file, ".js"))
        return set_lib(lib, span(file, file + strlen(file)));
    return node_modules(file, lib) || node_modules(name, lib);
}

/* ---- Python ------------------------------------------------------------------------------- */

/* The package or module under dir in path ("requests", "json", "threading"), ".py" dropped. */
static struct hs_str python_module(const char *b)
{
    const char *e = element_end(b);
    if (e - b > 3 && memcmp(e - 3, ".py", 3) == 0)
        e -= 3;
    return span(b, e);
}

/* CPython installs the standard library in <prefix>/lib/pythonX.Y/ and third-party packages in
 * its site-packages/ (dist-packages/ on Debian); frozen modules are "<frozen importlib._...>".
 * py-spy's file names are these paths, or, shortened (pyroscope-rs's default), the path inside
 * the package ("json/decoder.py"), where the install directory, and so the rule, is gone. The
 * path is in the file, or in the name when pyroscope-rs folds "path:line - function". */
static bool python_frame(const char *name, const char *file, struct hs_str *lib)
{
    const char *path = *file ? file : name;
    const char *at = strstr(path, "/site-packages/");
    if (!at)
        at = strstr(path, "/dist-packages/");
    if (at)
        return set_lib(lib, python_module(at + strlen("/site-packages/")));
    const char *ver = (at = strstr(path, "/lib/python"))     ? at + 11
                      : (at = strstr(path, "/lib64/python")) ? at + 13 /* Fedora, RHEL */
                                                             : NULL;
    if (ver && *ver >= '0' && *ver <= '9') {
        const char *dir = strchr(ver, '/');
        if (dir && dir[1])
            return set_lib(lib, python_module(dir + 1));
    }
    if (starts_with(path, "<frozen ")) {
        const char *e = strchr(path, '>');
        return set_lib(lib, span(path + 8, e ? e : path + strlen(path)));
    }
    return false;
}

/* ---- JVM ---------------------------------------------------------------------------------- */

/* Roots of the JDK and of the languages' own libraries. async-profiler's JFR, converted by
 * grafana/jfr-parser (pprof/pprof.go: class name + "." + method), names frames with the JVM's
 * internal '/' form, "java/util/concurrent/ThreadPoolExecutor.runWorker"; other converters
 * write "java.util.HashMap.get". Both are accepted. */
static const char *const jvm_roots[] = {"java",    "javax",  "jdk",     "sun",  "com/sun",
                                        "com.sun", "kotlin", "kotlinx", "scala"};

/* The package: up to the class for the '/' form, up to the first capitalised segment for '.'. */
static struct hs_str jvm_package(const char *name, size_t rootlen)
{
    if (name[rootlen] == '/') {
        const char *dot = strchr(name, '.');
        const char *e = dot ? dot : name + strlen(name);
        while (e > name && *e != '/')
            e--;
        return span(name, e);
    }
    /* the last segment is the method; a capitalised one before it starts the class */
    for (const char *seg = name + rootlen, *next; (next = strchr(seg + 1, '.')); seg = next)
        if (seg[1] >= 'A' && seg[1] <= 'Z')
            return span(name, seg);
    return span(name, name + rootlen);
}

static bool jvm_frame(const char *name, struct hs_str *lib)
{
    for (size_t i = 0; i < HS_ARRAY_SIZE(jvm_roots); i++) {
        size_t n = strlen(jvm_roots[i]);
        if (strncmp(name, jvm_roots[i], n) == 0 && (name[n] == '/' || name[n] == '.'))
            return set_lib(lib, jvm_package(name, n));
    }
    return false;
}

/* ---- native code -------------------------------------------------------------------------- */

/* async-profiler marks kernel frames "_[k]" and names an unresolved native frame by its shared
 * object ("/usr/lib64/libc.so.6", "libjvm.so"). */
static bool native_frame(const char *name, struct hs_str *lib)
{
    if (ends_with(name, "_[k]"))
        return set_lib(lib, HS_STR("(kernel)"));
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    const char *so = strstr(base, ".so");
    if (starts_with(base, "lib") && so && (so[3] == '\0' || so[3] == '.'))
        return set_lib(lib, span(base, base + strlen(base)));
    return false;
}

/* ---- Go ----------------------------------------------------------------------------------- */

/* Top-level directories of Go's standard library (GOROOT/src as of Go 1.24; "vendor" holds its
 * own copy of golang.org/x code). Go keeps first elements without a dot for the standard
 * library, but a module may still be called "myapp" or "example/app"; the list tells
 * "crypto/sha256" from "myapp/internal/repo". A package added to Go later counts as the user's
 * until it is listed here: shown, never hidden. */
static const char *const go_std_roots[] = {
    "archive",   "arena",   "bufio",   "builtin",  "bytes",   "cmd",     "cmp",      "compress",
    "container", "context", "crypto",  "database", "debug",   "embed",   "encoding", "errors",
    "expvar",    "flag",    "fmt",     "go",       "hash",    "html",    "image",    "index",
    "internal",  "io",      "iter",    "log",      "maps",    "math",    "mime",     "net",
    "os",        "path",    "plugin",  "reflect",  "regexp",  "runtime", "slices",   "sort",
    "strconv",   "strings", "structs", "sync",     "syscall", "testing", "text",     "time",
    "unicode",   "unique",  "unsafe",  "vendor",   "weak"};

/* The import path of a Go symbol. runtime/pprof names a function "<path>.<name>" and the path
 * ends at the first '.' after its last '/' (Go escapes dots in that element: "gopkg.in/
 * yaml%2ev3"); a generic function's name ends in "[...]". */
static bool go_package(const char *name, struct hs_str *pkg)
{
    const char *end = name + strcspn(name, "[");
    const char *from = name;
    for (const char *s = name; s < end; s++)
        if (*s == '/')
            from = s + 1;
    const char *dot = memchr(from, '.', (size_t)(end - from));
    if (!dot || dot == name)
        return false;
    *pkg = span(name, dot);
    return true;
}

static bool go_std_root(struct hs_str pkg)
{
    const char *slash = memchr(pkg.ptr, '/', pkg.len);
    struct hs_str root = span(pkg.ptr, slash ? slash : pkg.ptr + pkg.len);
    for (size_t i = 0; i < HS_ARRAY_SIZE(go_std_roots); i++)
        if (hs_str_eq(root, go_std_roots[i]))
            return true;
    return false;
}

/* A closure's part of a Go symbol: "func1", "gowrap2", "deferwrap1", "2", "" ("glob..func1"),
 * with a "-fm" or "-range1" suffix. */
static bool go_closure_seg(const char *b, const char *e)
{
    const char *dash = memchr(b, '-', (size_t)(e - b));
    if (dash)
        e = dash;
    static const char *const pre[] = {"func", "gowrap", "deferwrap"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(pre); i++) {
        size_t n = strlen(pre[i]);
        if ((size_t)(e - b) > n && memcmp(b, pre[i], n) == 0) {
            b += n;
            break;
        }
    }
    for (; b < e; b++)
        if (*b < '0' || *b > '9')
            return false;
    return true;
}

/* Whether what follows the package has a Go symbol's shape: "Func", "(*T).Method", "T.Method",
 * then closures only. Java's "io.acme.app.Main.run" and pyroscope-rs's folded "os.py:12 - f"
 * do not, although "io" and "os" are Go packages too. */
static bool go_shaped(const char *rest)
{
    if (*rest != '.')
        return false;
    int seg = 0, depth = 0;
    const char *b = rest + 1;
    for (const char *s = b;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\0' || (c == '.' && depth == 0)) {
            if (seg >= 2 && !go_closure_seg(b, s))
                return false;
            if (c == '\0')
                return depth == 0;
            seg++;
            b = s + 1;
        } else if (c == '(' || c == '[') {
            depth++;
        } else if (c == ')' || c == ']') {
            depth--;
        } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '*' || c == '-' || c == '.' || c >= 0x80)) {
            return false;
        }
    }
}

/* Is dir ("runtime/internal/syscall/x.s", after GOROOT's "/src/") a standard package's file:
 * its first element a standard root, and more than one element? */
static bool std_dir(const char *dir)
{
    const char *slash = strchr(dir, '/');
    return slash && go_std_root(span(dir, slash));
}

/* GOROOT's layout, "<goroot>/src/<import path>/<file>", or the import path first (-trimpath).
 * The file may be another standard package's: a function given its name by go:linkname lives
 * where its code is ("syscall.RawSyscall6" in runtime/internal/syscall/, "time.Sleep" in
 * runtime/time.go, "sync.runtime_SemacquireMutex" in runtime/sema.go). */
static bool goroot_shaped(const char *file, struct hs_str pkg)
{
    if (strncmp(file, pkg.ptr, pkg.len) == 0 && file[pkg.len] == '/')
        return true;
    if (file[0] != '/' && file[0] != '$' && std_dir(file))
        return true;
    for (const char *at = strstr(file, "/src/"); at; at = strstr(at + 1, "/src/"))
        if ((strncmp(at + 5, pkg.ptr, pkg.len) == 0 && at[5 + pkg.len] == '/') || std_dir(at + 5))
            return true;
    return false;
}

/* runtime/pprof writes each function's symbol and its source file: under GOROOT
 * ("/usr/lib/go-1.19/src/crypto/sha256/sha256.go"), in the module cache ("/root/go/pkg/mod/
 * github.com/lib/pq@v1.10.9/conn.go"), in a vendor/ directory, or in the user's tree; with
 * -trimpath "crypto/sha256/sha256.go", "github.com/lib/pq@v1.10.9/conn.go" and
 * "github.com/acme/app/db/db.go" (as go1.19 writes them). The file decides, so the user's own
 * module is application code whatever its name. With the name only (folded profiles, wrappers
 * in "<autogenerated>"), only the standard library is recognised: a dotted path may be the
 * user's module as well as a dependency. */
static bool go_frame(const char *name, const char *file, struct hs_str *lib)
{
    bool name_only = !*file || strcmp(file, "<autogenerated>") == 0;
    if (!name_only && !ends_with(file, ".go") && !ends_with(file, ".s"))
        return false;
    if (starts_with(name, "type:.") || starts_with(name, "type..")) /* generated eq and hash */
        return set_lib(lib, HS_STR("(generated)"));
    struct hs_str pkg;
    if (!go_package(name, &pkg))
        return false;
    if (name_only)
        return go_std_root(pkg) && go_shaped(name + pkg.len) && set_lib(lib, pkg);
    bool relative = file[0] != '/' && file[0] != '$';
    if (strstr(file, "/pkg/mod/") || (relative && strchr(file, '@')) || strstr(file, "/vendor/") ||
        starts_with(file, "vendor/"))
        return set_lib(lib, pkg);
    return go_std_root(pkg) && goroot_shaped(file, pkg) && set_lib(lib, pkg);
}

/* ---- the classifier ----------------------------------------------------------------------- */

bool hs_frame_is_library(const struct hs_frame_rules *r, const char *name, const char *file,
                         struct hs_str *lib)
{
    name = name ? name : "";
    file = file ? file : "";
    for (size_t i = 0; r && i < r->npats; i++) {
        struct hs_str m;
        if (pattern_match(&r->pats[i], name, file, &m))
            return !r->pats[i].app && set_lib(lib, m);
    }
    return pseudo_frame(name, file, lib) || node_frame(name, file, lib) ||
           python_frame(name, file, lib) || jvm_frame(name, lib) || go_frame(name, file, lib) ||
           native_frame(name, lib);
}
