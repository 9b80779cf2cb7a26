// What the correlation-quality suite (correlation_quality_*.test.mjs) and bench/correlation
// share: building and running the two real apps — apps/goapp (Go, instrumented like
// otel-profiling-go + pyroscope-go, standard library only) and apps/shop_node.mjs (the
// OpenTelemetry JS SDK + @pyroscope/nodejs 0.6.4) — the hotspan config under test, reading the
// attributes hotspan wrote, and judging them against the ground truth the apps record.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, renameSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import readline from 'node:readline';
import { HOTSPAN_BIN } from './hotspan.mjs';
import { runAppReport } from './apps.mjs';
import { findGo, Profile, maybeGunzip } from './pprof.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const IT_DIR = join(here, '..');
const GOAPP_SRC = join(IT_DIR, 'apps', 'goapp');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the apps -------------------------------------------------------------------------------

/**
 * Builds apps/goapp with the go found on PATH (Debian's golang-go) into <build dir>/goapp/goapp,
 * the build dir being HOTSPAN_BIN's; Go's caches go there too, so a clean machine needs no
 * $HOME and nothing is downloaded (go.mod requires nothing). Returns the binary's path.
 */
export function buildGoApp() {
  const go = findGo();
  if (!go) throw new Error('no go binary on PATH or in /usr/lib/go/bin: scripts/setup installs golang-go');
  const dir = join(dirname(HOTSPAN_BIN), 'goapp');
  mkdirSync(dir, { recursive: true });
  const out = join(dir, 'goapp');
  const tmp = `${out}.${process.pid}`; // two test files may build at once: rename is atomic
  execFileSync(go, ['build', '-o', tmp, '.'], {
    cwd: GOAPP_SRC,
    env: { ...process.env, GOCACHE: join(dir, 'cache'), GOPATH: join(dir, 'gopath'),
      GOFLAGS: '-mod=mod', GOPROXY: 'off', GO111MODULE: 'on', GOTOOLCHAIN: 'local' },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 120000,
  });
  renameSync(tmp, out);
  return out;
}

/** Resolves at the next multiple of periodMs (+ 50 ms), so that an app started then uploads
 * its first profile a whole period later (pyroscope-go aligns upload periods to multiples). */
export function nextPeriod(periodMs) {
  return sleep(periodMs - (Date.now() % periodMs) + 50);
}

/**
 * Starts the Go app (see apps/goapp/main.go for the env). Resolves with {url, get(path),
 * truth(), stop()}: get sends one request and resolves with its body; truth() is GET /truth;
 * stop() sends SIGTERM and resolves with the final report (after the last upload).
 */
export async function startGoApp(bin, { otlpUrls, pyroscopeUrls, env = {} }) {
  const proc = spawn(bin, [], {
    env: { ...process.env, OTLP_URLS: otlpUrls.join(','), PYROSCOPE_URLS: pyroscopeUrls.join(','), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
  const lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error(`goapp exited at start:\n${stderr}`);
  const url = `http://${JSON.parse(first.value).listening}`;
  const get = async (path) => {
    const r = await fetch(url + path);
    if (r.status !== 200) throw new Error(`goapp ${path}: ${r.status}`);
    return r.text();
  };
  return {
    proc,
    url,
    get,
    truth: async () => JSON.parse(await get('/truth')),
    stop: async () => {
      proc.kill('SIGTERM');
      const last = await lines.next();
      if (last.done) throw new Error(`goapp printed no report:\n${stderr}`);
      return JSON.parse(last.value);
    },
  };
}

/**
 * Runs apps/shop_node.mjs to its end (see its header for the env); resolves with its report
 * {service, spans, exported}. Function names in its profiles are `./apps/shop_node.mjs:fn:line`
 * (the SDK names frames relative to the working directory, tests/integration).
 */
export function runNodeApp({ otlpUrls, pyroscopeUrl, env = {}, timeoutMs = 120000 }) {
  return runAppReport('shop_node.mjs',
    { OTLP_URLS: otlpUrls.join(','), PYROSCOPE_URL: pyroscopeUrl, ...env }, { timeoutMs, cwd: IT_DIR });
}

// ---- hotspan ------------------------------------------------------------------------------

/** The config under test: traces and profiles through the correlator (or, with correlator
 * null, the same pipelines without it) to a span sink and a Pyroscope sink. */
export function qualityConfig({ sinkPort, psinkPort, correlator = {} }) {
  const c = correlator && { slow: { threshold: '200ms' }, max_wait: '20s', slack: '1s', top: 5, ...correlator };
  const procs = c ? 'processors: [correlator], ' : '';
  return `receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
  pyroscope: {endpoint: 127.0.0.1:0}
${c ? `processors:\n  correlator: ${JSON.stringify(c)}\n` : ''}exporters:
  otlp: {endpoint: http://127.0.0.1:${sinkPort}, compression: none}
  pyroscope: {endpoint: http://127.0.0.1:${psinkPort}}
service:
  telemetry: {admin: 127.0.0.1:0, log_level: info}
  pipelines:
    traces: {receivers: [otlp], ${procs}exporters: [otlp]}
    profiles: {receivers: [pyroscope], ${procs}exporters: [pyroscope]}
`;
}

// ---- reading spans ------------------------------------------------------------------------

export { plain, attrs, attrCount, durationMs } from './otlp.mjs';
/** The attributes hotspan writes (the SDK's own pyroscope.profile.id aside). */
export const hotspanKeys = (a) => Object.keys(a).filter((k) => /^(profile\.|hotspan\.)/.test(k));
export const show = (a) => JSON.stringify(Object.fromEntries(Object.entries(a)
  .filter(([k]) => /^(profile\.|hotspan\.|pyroscope\.)/.test(k))));

/** "main.(*UserRepository).loadPreferences 98% (in crypto/sha256)" → {name, pct, note}; pct
 * is null when the entry has no percentage. */
export function parseEntry(entry) {
  const m = /^(.*?) (\d+(?:\.\d+)?)%(?:\s+(.*))?$/.exec(entry);
  return m ? { name: m[1], pct: Number(m[2]), note: m[3] || '' } : { name: entry, pct: null, note: '' };
}

/** Does a function name, as the profiler wrote it or shortened, name `short`? Both
 * "main.(*UserRepository).loadPreferences" and "UserRepository.loadPreferences" name
 * loadPreferences (and UserRepository); "./apps/shop_node.mjs:verifyPassword:56" names
 * verifyPassword. */
export const names = (name, short) => name.split(/[\s.:/()*]+/).includes(short);

// ---- ground truth ---------------------------------------------------------------------------

/**
 * What a slow span of each kind should be told: `fns`, the functions the user can act on, one
 * of which must be the first entry of the list that explains it (`offcpu`: the span mostly
 * waited, so profile.offcpu.top_functions; otherwise profile.top_functions); `all`: every one
 * of them must be there too.
 */
export const EXPECT = {
  prefs: { offcpu: false, fns: ['loadPreferences'], lib: 'crypto/sha256' },
  report: { offcpu: false, fns: ['buildReport', 'renderSection', 'scoreRow'] },
  prices: { offcpu: true, fns: ['Get', 'rebuild'], all: ['PriceCache'] },
  sign: { offcpu: false, fns: ['verifyPassword'], lib: 'node:internal/crypto' },
  wait: { offcpu: true, fns: ['fetchRates'] },
};

/** Is `entry` one of what a span of this kind should be told first? */
export function namesExpected(kind, entry) {
  const e = EXPECT[kind];
  const { name } = parseEntry(entry);
  return e.fns.some((f) => names(name, f)) && (e.all || []).every((f) => names(name, f));
}

/** The list that explains a span of this kind (null when hotspan wrote none): for a span that
 * waited, profile.offcpu.top_functions, else (for want of it) profile.top_functions. */
export function explaining(kind, a) {
  const l = (EXPECT[kind].offcpu && a['profile.offcpu.top_functions']) || a['profile.top_functions'];
  return Array.isArray(l) ? l : null;
}

/** Judges one slow span: {match, right} where right = the first entry of the list that
 * explains it names what its ground truth says (the tests ask more: the off-CPU attributes
 * themselves, shares). */
export function judge(truth, a) {
  const list = explaining(truth.kind, a);
  return { match: a['profile.match'] ?? 'absent', right: !!(list && list.length && namesExpected(truth.kind, list[0])) };
}

/**
 * The samples labelled span_id = spanId in the profiles a Pyroscope sink received (all uploads:
 * a span's samples may be in two), of the sample type `type`: {total, stacks (distinct
 * function-name stacks), share(short): the fraction of the total whose stack has a function
 * naming `short`}. What "exact" shares are computed from.
 */
export function spanSamples(psink, spanId, type = 'cpu') {
  // (decoding every profile again per span is fine at the suite's dozen slow spans)
  let total = 0;
  const stacks = new Map();
  for (const p of psink.profiles()) {
    const prof = Profile.decode(maybeGunzip(p.raw));
    const str = (i) => prof.stringTable.strings[Number(i)];
    const vi = prof.sampleType.findIndex((t) => str(t.type) === type);
    if (vi < 0) continue;
    const fn = new Map(prof.function.map((f) => [String(f.id), str(f.name)]));
    const loc = new Map(prof.location.map((l) => [String(l.id), l.line.map((ln) => fn.get(String(ln.functionId)))]));
    for (const s of prof.sample) {
      if (!s.label.some((l) => str(l.key) === 'span_id' && str(l.str) === spanId)) continue;
      const v = Number(s.value[vi]);
      if (!v) continue;
      const key = s.locationId.flatMap((id) => loc.get(String(id)) || []).reverse().join(';');
      stacks.set(key, (stacks.get(key) || 0) + v);
      total += v;
    }
  }
  const share = (short) => {
    let v = 0;
    for (const [k, x] of stacks) if (k.split(';').some((f) => names(f, short))) v += x;
    return total ? v / total : 0;
  };
  return { total, stacks, share };
}


/** When the first profile of `service` carrying sample type `type` reached the Pyroscope sink
 * (ms since the epoch; hotspan forwards a profile as it arrives), or null. A span that ended
 * before it ended before its service had sent any profile: a cold-start span. */
export function firstProfileMs(psink, service, type = 'cpu') {
  let first = null;
  for (const p of psink.profiles()) {
    if (p.labels?.service_name !== service) continue;
    const prof = Profile.decode(maybeGunzip(p.raw));
    if (!prof.sampleType.some((t) => prof.stringTable.strings[Number(t.type)] === type)) continue;
    if (first === null || p.request.time < first) first = p.request.time;
  }
  return first;
}

/** Every function name in the profiles of `service` the Pyroscope sink received, as the
 * profiler wrote it. */
export function profileFunctionNames(psink, service) {
  const out = new Set();
  for (const p of psink.profiles()) {
    if (p.labels?.service_name !== service) continue;
    const prof = Profile.decode(maybeGunzip(p.raw));
    for (const f of prof.function) out.add(prof.stringTable.strings[Number(f.name)]);
  }
  return out;
}

/** The function names a span's annotation shows: profile.top_functions,
 * profile.offcpu.top_functions (names, without share and note) and profile.hot_path's frames. */
export function annotatedNames(a) {
  const list = (k) => (Array.isArray(a[k]) ? a[k].map((e) => parseEntry(e).name) : []);
  return [...list('profile.top_functions'), ...list('profile.offcpu.top_functions'),
    ...(a['profile.hot_path'] ? a['profile.hot_path'].split(' > ') : [])];
}
