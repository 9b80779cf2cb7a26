#!/usr/bin/env bash
# layout.sh: the house's arrows (docs/design.md), checked. Fails on
#   1. an upward include: a file including from a folder above its own
#      (core <- pdata, net; net <- admin, exporters/helper; all <- components <- cmd);
#   2. an upward call: the same rule for the symbols an object file uses (nm), which also sees
#      calls made through a header shared with the callee's layer;
#   3. a circle: files that call each other round (nm, strongly connected), inside a component's
#      folder too, unless all of them are in one of the folders listed in circle_folders below.
# usage: tests/layout.sh SOURCE_DIR [OBJECT_DIR]   (OBJECT_DIR: hs_core's objects, for 2 and 3)
set -euo pipefail
src=$(cd "$1" && pwd)
objdir=${2:+$(cd "$2" && pwd)}
cd "$src"

# The layer of a product file, or nothing for files outside the product (tests, bench).
layer() {
    case $1 in
    core/*) echo core ;;
    pdata/*) echo pdata ;;
    net/*) echo net ;;
    admin/*) echo admin ;;
    exporters/helper/*) echo helper ;;
    receivers/* | processors/* | exporters/*) echo component ;;
    demo/*) echo demo ;;
    cmd/*) echo cmd ;;
    esac
}

# What each layer may include or call, itself included.
allowed() {
    case $1 in
    core) echo "core" ;;
    pdata) echo "core pdata" ;;
    net) echo "core net" ;;
    admin) echo "core net admin" ;;
    helper) echo "core net pdata helper" ;;
    component) echo "core net pdata admin helper component" ;;
    demo) echo "core net pdata demo" ;;
    cmd) echo "core net pdata admin helper component demo cmd" ;;
    esac
}

# Folders whose files still call each other round, each with why; anywhere else a circle fails,
# inside one component's folder as well (processors/correlator/ has none: matching, the /ui
# ring and its pages each call only downward).
circle_folders=(
    exporters/helper         # sender.c's queue and its disk store and hand-over call back and forth
    exporters/load_balancing # a backend calls back into its exporter to reroute and to finish
)

# The one place the core names components: the registry's explicit list (style.md §3).
exempt_calls() {
    [[ $1 == core/registry.c ]]
}

fail=0
complain() {
    echo "layout: $*" >&2
    fail=1
}

may() { # may FROM_LAYER TO_LAYER
    [[ " $(allowed "$1") " == *" $2 "* ]]
}

files=$(find core pdata net admin receivers processors exporters demo cmd \
    -name '*.[ch]' 2>/dev/null | sort)
[[ -n $files ]] || { complain "no sources under $src"; exit 1; }

# ---- 1. includes ----------------------------------------------------------------------------
for f in $files; do
    from=$(layer "$f")
    dir=$(dirname "$f")
    while read -r inc; do
        [[ -n $inc ]] || continue
        if [[ -f $dir/$inc ]]; then
            target=$(realpath --relative-to=. "$dir/$inc")
        elif [[ -f $inc ]]; then
            target=$inc
        else
            continue # generated (protobuf) or a system header
        fi
        to=$(layer "$target")
        [[ -n $to ]] || continue
        may "$from" "$to" ||
            complain "$f includes $target: $from may include only $(allowed "$from")"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

[[ -n $objdir ]] || exit $fail

# ---- 2 and 3. calls, from the objects ----------------------------------------------------------
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
objs=()
while read -r o; do
    f=${o#"$objdir"/}
    f=${f%.o}
    [[ -f $f && -n $(layer "$f") ]] && objs+=("$o") # not generated, nor left from a removed file
done < <(find "$objdir" -name '*.c.o' | sort)
[[ ${#objs[@]} -gt 0 ]] || { complain "no objects of ours under $objdir"; exit 1; }
for o in "${objs[@]}"; do
    f=${o#"$objdir"/}
    nm "$o" | awk -v f="${f%.o}" 'NF == 3 && $2 ~ /^[TDRBCV]$/ { print "D", $3, f }
                                  NF == 2 && $1 == "U" { print "U", $2, f }'
done | awk '$1 == "D" { def[$2] = $3; next }
            { use[NR] = $2; user[NR] = $3 }
            END { for (i in use) if ((use[i] in def) && def[use[i]] != user[i])
                      print user[i], def[use[i]] }' | sort -u >"$edges"

while read -r from to; do
    exempt_calls "$from" && continue
    a=$(layer "$from")
    b=$(layer "$to")
    may "$a" "$b" || complain "$from calls into $to: $a may call only $(allowed "$a")"
done <"$edges"

# Strongly connected files (Tarjan); a circle is fine only inside one of circle_folders.
circles=$(awk -v folders="${circle_folders[*]}" '
    function unit(f,    i, n, d) {
        n = split(folders, d, " ")
        for (i = 1; i <= n; i++)
            if (index(f, d[i] "/") == 1) return d[i]
        return f
    }
    function visit(v,    i, w) {
        idx[v] = low[v] = ++n
        stack[++sp] = v
        on[v] = 1
        for (i = 1; i <= deg[v]; i++) {
            w = adj[v, i]
            if (!(w in idx)) {
                visit(w)
                if (low[w] < low[v]) low[v] = low[w]
            } else if (on[w] && idx[w] < low[v]) {
                low[v] = idx[w]
            }
        }
        if (low[v] == idx[v]) {
            comp = ""; size = 0; units = ""; nunits = 0
            delete seen
            do {
                w = stack[sp--]
                on[w] = 0
                comp = comp " " w
                size++
                if (!(unit(w) in seen)) { seen[unit(w)] = 1; nunits++ }
            } while (w != v)
            if (size > 1 && nunits > 1) print substr(comp, 2)
        }
    }
    { adj[$1, ++deg[$1]] = $2; node[$1] = 1; node[$2] = 1 }
    END { for (v in node) if (!(v in idx)) visit(v) }' "$edges")
while read -r circle; do
    [[ -n $circle ]] && complain "these files call each other round: $circle"
done <<<"$circles"

exit $fail
