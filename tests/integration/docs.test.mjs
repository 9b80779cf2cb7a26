// The documentation as a reader meets it: README.md and docs/*.md. Every relative link leads to
// a file of the tree and, when it names an #anchor of a page, to a heading of that page; every
// page of docs/ is linked from the README (where the rest lives); every source path a page names
// in backticks exists; the attribute tables (the README's and docs/correlation.md's) list exactly
// the names core/semconv.h says hotspan writes; and the README stays a newcomer's page.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve, basename } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const README_MAX_LINES = 400;

/** Every file and folder of the tree, relative to ROOT (no .git, build dirs, node_modules). */
function tree() {
  const files = new Set();
  const dirs = new Set();
  const walk = (dir) => {
    for (const name of readdirSync(join(ROOT, dir))) {
      if (name === '.git' || name === 'node_modules' || /^build/.test(name)) continue;
      const rel = dir ? `${dir}/${name}` : name;
      if (statSync(join(ROOT, rel)).isDirectory()) {
        dirs.add(rel);
        walk(rel);
      } else {
        files.add(rel);
      }
    }
  };
  walk('');
  return { files, dirs };
}
const { files: FILES, dirs: DIRS } = tree();
const PAGES = ['README.md', ...[...FILES].filter((f) => /^docs\/[^/]+\.md$/.test(f)).sort()];

/** A page's lines outside fenced code blocks. */
function prose(text) {
  let fence = false;
  return text.split('\n').filter((line) => {
    if (/^```/.test(line)) { fence = !fence; return false; }
    return !fence;
  });
}

/** GitHub's anchor of a heading: lower case, inline markup and punctuation dropped, spaces to
 * hyphens; a repeated heading gets -1, -2, ... */
function anchors(text) {
  const seen = new Map();
  const out = new Set();
  for (const line of prose(text)) {
    const m = /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const heading = m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = heading.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n ? `${slug}-${n}` : slug);
  }
  return out;
}

/** The relative links of a page: [{target, anchor, line}] (absolute URLs left out). */
function links(page) {
  const out = [];
  prose(readFileSync(join(ROOT, page), 'utf8')).forEach((line) => {
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1];
      if (/^[a-z]+:/.test(href)) continue;
      const [path, anchor = null] = href.split('#');
      out.push({ target: path ? relative(ROOT, resolve(ROOT, dirname(page), path)) : page, anchor, href });
    }
  });
  return out;
}

/** The first backticked names of the table rows under heading `h` of `text`. */
function tableNames(text, h) {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l === h);
  assert.ok(start >= 0, `no heading "${h}"`);
  const names = [];
  for (const line of lines.slice(start + 1)) {
    if (/^#{1,6} /.test(line)) break;
    const m = /^\| `([^`]+)` \|/.exec(line);
    if (m) names.push(m[1]);
  }
  return names;
}

describe('documentation', () => {
  it('every relative link leads to a file of the tree, and its #anchor to a heading there', () => {
    const bad = [];
    const cache = new Map();
    for (const page of PAGES) {
      for (const { target, anchor, href } of links(page)) {
        if (!FILES.has(target) && !DIRS.has(target)) {
          bad.push(`${page}: (${href}): no ${target}`);
          continue;
        }
        if (anchor === null) continue;
        if (!target.endsWith('.md')) {
          bad.push(`${page}: (${href}): an anchor into a file that is not a page`);
          continue;
        }
        if (!cache.has(target)) cache.set(target, anchors(readFileSync(join(ROOT, target), 'utf8')));
        if (!cache.get(target).has(anchor)) bad.push(`${page}: (${href}): ${target} has no heading #${anchor}`);
      }
    }
    assert.ok(PAGES.length > 5, `only ${PAGES.length} pages found under ${ROOT}`);
    assert.deepEqual(bad, []);
  });

  it('every page of docs/ is linked from the README', () => {
    const linked = new Set(links('README.md').map((l) => l.target));
    const unlinked = PAGES.filter((p) => p !== 'README.md' && !linked.has(p));
    assert.deepEqual(unlinked, [], 'add them to the README\'s "Where the rest lives"');
  });

  it('every source path a page names in backticks exists', () => {
    const tops = new Set([...DIRS].filter((d) => !d.includes('/')));
    const bases = new Set([...FILES].map((f) => basename(f)));
    // Names that look like ours but are someone else's: Go's net/http package.
    const foreign = new Set(['net/http']);
    const bad = [];
    for (const page of PAGES) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      for (const [, raw] of text.matchAll(/`([^`\n]+)`/g)) {
        // placeholders, globs, commands, URLs and absolute paths are not paths of the tree
        if (/[<>*…${}=,;()| ]|\.\.\./.test(raw) || /^(\/|-|[a-z]+:)/.test(raw) || foreign.has(raw)) continue;
        const tok = raw.replace(/^\.\//, '').replace(/\/$/, '');
        if (tok.includes('/') && tops.has(tok.split('/')[0])) {
          // a program of bench/ or scripts/ is named without the .c or .mjs it is built from
          const found = [tok, `${tok}.c`, `${tok}.mjs`].some((p) => FILES.has(p) || DIRS.has(p));
          if (!found) bad.push(`${page}: \`${raw}\``);
        } else if (/^[\w.-]+\.(c|h|mjs)$/.test(tok) && !bases.has(tok)) {
          bad.push(`${page}: \`${raw}\` (no file of that name)`);
        }
      }
    }
    assert.deepEqual(bad, [], 'a page names a file that is not in the tree (moved or renamed?)');
  });

  it('the attribute tables list exactly the names core/semconv.h writes', () => {
    const semconv = readFileSync(join(ROOT, 'core/semconv.h'), 'utf8');
    const written = semconv.split('/* Attributes hotspan reads. */')[0];
    const names = [...written.matchAll(/^#define HS_ATTR_\w+ "([^"]+)"/gm)].map((m) => m[1]).sort();
    assert.ok(names.length >= 15, `only ${names.length} attribute names read from core/semconv.h`);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    assert.deepEqual(tableNames(readme, '## The attributes it writes').sort(), names, 'README.md');
    const corr = readFileSync(join(ROOT, 'docs/correlation.md'), 'utf8');
    assert.deepEqual(tableNames(corr, '## Attributes hotspan writes').sort(), names, 'docs/correlation.md');
  });

  it(`the README stays a newcomer's page (at most ${README_MAX_LINES} lines)`, () => {
    const n = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length;
    assert.ok(n <= README_MAX_LINES, `README.md has ${n} lines: move reference material to docs/`);
  });
});
