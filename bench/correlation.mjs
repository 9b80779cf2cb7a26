// bench/correlation.mjs (run by bench/correlation): the correlator's score on real-client
// traffic. The suite's apps (tests/integration/apps: goapp, Go with runtime/pprof and
// pyroscope-go-style uploads; shop_node.mjs, OpenTelemetry JS + @pyroscope/nodejs) send the same
// spans and profiles to two hotspans: A with the correlator in both pipelines, B the same
// pipelines without it. Go load comes from here (HTTP requests to goapp, open loop at --rate);
// the Go app and the Node app's span exporters send to both; Node's profiles reach both through
// a tee. A third, C, has the correlator in the profiles pipeline only: it indexes the same
// profiles and sees no span, so C - B is what profiles cost the correlator and A - C what spans
// do. Prints: slow spans annotated with the right function (judged against the apps' ground
// truth), exact vs window vs none matches, fast spans annotated, the delay the correlator added
// to slow spans (each span's arrival at A's sink minus at B's), and hotspan's CPU per span with
// and without the correlator over the same run, split into the span path and the profiles.
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startHotspan, HOTSPAN_BIN } from '../tests/integration/lib/hotspan.mjs';
import { Sink } from '../tests/integration/lib/sink.mjs';
import { PyroscopeSink } from '../tests/integration/lib/pyroscope_sink.mjs';
import { fetchMetrics } from '../tests/integration/lib/metrics.mjs';
import {
  buildGoApp, startGoApp, runNodeApp, qualityConfig, attrs, durationMs, hotspanKeys, judge, sleep,
  explaining, show,
} from '../tests/integration/lib/quality.mjs';

const { values: opt } = parseArgs({
  options: {
    duration: { type: 'string', default: '150' },
    rate: { type: 'string', default: '200' },
    children: { type: 'string', default: '9' },
    'slow-pct': { type: 'string', default: '1' },
    'cpu-slow-every': { type: 'string', default: '20' },
    'go-upload-ms': { type: 'string', default: '15000' },
    'node-flush-ms': { type: 'string', default: '60000' },
    'node-rate': { type: 'string', default: '20' },
    'node-slow-every': { type: 'string', default: '20' },
    threshold: { type: 'string', default: '200ms' },
    'no-node': { type: 'boolean', default: false },
  },
});
const DURATION_S = Number(opt.duration);
const RATE = Number(opt.rate);
const CHILDREN = Number(opt.children);
const THRESHOLD_MS = Number(/^(\d+)ms$/.exec(opt.threshold)?.[1] ?? NaN);
if (!(DURATION_S > 0 && RATE > 0 && CHILDREN >= 0 && THRESHOLD_MS > 0)) {
  console.error('bench/correlation: bad options (see bench/correlation --help)');
  process.exit(2);
}
const log = (...a) => console.error('#', ...a);
// whatever ends this process (an error included) ends the processes it started
const started = [];
let stopping = false;
process.on('exit', () => { for (const p of started) if (p.exitCode === null) p.kill('SIGKILL'); });

// ---- processes ----------------------------------------------------------------------------

const cpuNs = (pid) => readdirSync(`/proc/${pid}/task`).reduce((n, t) => {
  try { return n + Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]); } catch { return n; }
}, 0);
const peakKiB = (pid) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

/** Forwards every request to each of `targets` (ports); answers with the first one's answer. */
function startTee(targets) {
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const answers = await Promise.all(targets.map((port) => new Promise((resolve) => {
        const out = http.request({ host: '127.0.0.1', port, method: req.method, path: req.url,
          headers: req.headers }, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode)); });
        out.on('error', () => resolve(502));
        out.end(body);
      })));
      res.writeHead(answers[0]);
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** A sink that keeps, per span, only what the score needs (a run is 100k+ spans): arrival time,
 * duration and (keepAttrs) the attributes. */
async function startLeanSink(keepAttrs) {
  const sink = await new Sink().start();
  sink.seen = new Map();
  sink.on('request', (rec) => {
    for (const rs of rec.decoded?.resourceSpans || []) {
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          sink.seen.set(s.spanId, { time: rec.time, ms: durationMs(s), a: keepAttrs ? attrs(s) : null });
        }
      }
    }
    rec.decoded = rec.body = rec.rawBody = null;
  });
  return sink;
}

async function waitSeen(sink, n, timeoutMs) {
  const t = Date.now();
  while (sink.seen.size < n) {
    if (Date.now() - t > timeoutMs) throw new Error(`timed out: ${sink.seen.size} of ${n} spans arrived`);
    await sleep(50);
  }
}

const sinkA = await startLeanSink(true);
const sinkB = await startLeanSink(false);
const sinkC = await startLeanSink(false);
const psinkA = await new PyroscopeSink().start();
const psinkB = await new PyroscopeSink().start();
const psinkC = await new PyroscopeSink().start();
const hsOpts = { waitFor: ['otlp', 'pyroscope', 'admin'] };
// A: the correlator as a user runs it (defaults: max_wait 30s, max_wait_cap 2m, slack 5s,
// bucket 10s) but for the threshold; B: the same pipelines without it
const corrConf = { slow: { threshold: opt.threshold }, max_wait: '30s', slack: '5s', top: 3 };
const hsA = await startHotspan(qualityConfig({ sinkPort: sinkA.port, psinkPort: psinkA.port,
  correlator: corrConf }), hsOpts);
const hsB = await startHotspan(qualityConfig({ sinkPort: sinkB.port, psinkPort: psinkB.port,
  correlator: null }), hsOpts);
// C: A's config with the correlator taken out of the traces pipeline
const confC = qualityConfig({ sinkPort: sinkC.port, psinkPort: psinkC.port, correlator: corrConf });
const tracesOnly = /(traces: \{receivers: \[otlp\], )processors: \[correlator\], /;
if (!tracesOnly.test(confC)) throw new Error(`no traces pipeline with the correlator in:\n${confC}`);
const hsC = await startHotspan(confC.replace(tracesOnly, '$1'), hsOpts);
started.push(hsA.proc, hsB.proc, hsC.proc);
for (const [name, h] of [['A', hsA], ['B', hsB], ['C', hsC]]) {
  h.proc.on('exit', (code, signal) => {
    if (!stopping) log(`hotspan ${name} exited (${code ?? signal}) during the run:\n${h.stderr().split('\n').slice(-30).join('\n')}`);
  });
}
const tee = await startTee([hsA, hsB, hsC].map((h) => h.ports.pyroscope));
const traceUrls = [hsA, hsB, hsC].map((h) => `http://127.0.0.1:${h.ports.otlp}/v1/traces`);

log('building apps/goapp');
const goapp = await startGoApp(buildGoApp(), {
  otlpUrls: traceUrls,
  pyroscopeUrls: [hsA, hsB, hsC].map((h) => `http://127.0.0.1:${h.ports.pyroscope}`),
  env: { UPLOAD_MS: opt['go-upload-ms'] },
});
started.push(goapp.proc);

// ---- load ---------------------------------------------------------------------------------

// Every request has CHILDREN cache.get spans (+ a SELECT users span for /prefs); every Kth
// request is slow so that slow spans are slow-pct of all; of the slow ones every
// cpu-slow-every-th is CPU-bound (/prefs hashing or /report, in turn), the others wait on a lock
// (/prices): slow spans of real services mostly wait, and CPU is what this machine lacks.
const spansPerReq = CHILDREN + 1 + 1 / 3;
const K = Math.max(1, Math.round(1 / ((Number(opt['slow-pct']) / 100) * spansPerReq)));
const CPU_EVERY = Number(opt['cpu-slow-every']);
function nextPath(i) {
  const c = `spans=${CHILDREN}`;
  // fast /prices read shard 7, which no slow request locks
  if (i % K !== K - 1) return [`/prefs?users=2&per=0.2&${c}`, `/prices?shard=7&${c}`, `/report?rows=2&per=0.2&${c}`][i % 3];
  const n = Math.floor(i / K);
  if (n % CPU_EVERY === CPU_EVERY - 1) {
    return Math.floor(n / CPU_EVERY) % 2
      ? `/report?rows=36&depths=36&per=8&slow=1&${c}` : `/prefs?users=20&per=12&slow=1&${c}`;
  }
  return `/prices?hold=300&shard=${n % 7}&slow=1&${c}`;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const goHost = new URL(goapp.url);
let inFlight = 0;
let sent = 0;
let skipped = 0;
let errors = 0;
function fire(path) {
  if (inFlight >= 64) { skipped += 1; return; }
  inFlight += 1;
  sent += 1;
  const req = http.get({ host: goHost.hostname, port: goHost.port, path, agent }, (res) => {
    res.resume();
    res.on('end', () => { inFlight -= 1; if (res.statusCode !== 200) errors += 1; });
  });
  req.on('error', () => { inFlight -= 1; errors += 1; });
}

const cpuAll = () => ({ A: cpuNs(hsA.proc.pid), B: cpuNs(hsB.proc.pid), C: cpuNs(hsC.proc.pid) });
const cpu0 = cpuAll();
const t0 = Date.now();
log(`load: ${DURATION_S}s, Go ${RATE} req/s (every ${K}th slow, ${CHILDREN} children each)` +
  `${opt['no-node'] ? '' : `, Node ${opt['node-rate']} req/s`}`);
const nodeRun = opt['no-node'] ? null : runNodeApp({
  otlpUrls: traceUrls,
  pyroscopeUrl: `http://127.0.0.1:${tee.address().port}`,
  env: { FLUSH_MS: opt['node-flush-ms'], RATE: opt['node-rate'], SLOW_EVERY: opt['node-slow-every'],
    DURATION_MS: String(DURATION_S * 1000), SLOW_MS: '300',
    TAIL_MS: String(Number(opt['node-flush-ms']) + 7000) },
  timeoutMs: (DURATION_S + 120) * 1000 + 2 * Number(opt['node-flush-ms']),
});
let i = 0;
while (Date.now() - t0 < DURATION_S * 1000) {
  const due = Math.floor(((Date.now() - t0) / 1000) * RATE);
  while (i < due) fire(nextPath(i++));
  await sleep(5);
}
while (inFlight > 0) await sleep(20);
const loadEnd = Date.now();
const nodeReport = nodeRun ? await nodeRun : { spans: [], exported: 0 };
const goTruth = await goapp.truth();
const total = goTruth.ended + nodeReport.exported;
log(`load done: ${sent} Go requests (${skipped} skipped at 64 in flight, ${errors} failed); ` +
  `waiting for ${total} spans at both sinks`);
// B passes spans on at once; A holds slow ones until a profile covers them (max_wait_cap at most)
await waitSeen(sinkB, total, 60000);
await waitSeen(sinkC, total, 60000);
await waitSeen(sinkA, total, 120000 + 2 * Number(opt['go-upload-ms']));
const cpu1 = cpuAll();
const windowS = (Date.now() - t0) / 1000;
const drainS = (Date.now() - loadEnd) / 1000;
const goReport = await goapp.stop();
const metricsA = await fetchMetrics(hsA.ports.admin);
const metricsC = await fetchMetrics(hsC.ports.admin);
await sleep(300);

// ---- score --------------------------------------------------------------------------------

const truth = new Map([...goReport.spans, ...nodeReport.spans].map((t) => [t.spanId, t]));
const quantile = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const score = { slow: 0, right: 0, fast: 0, fastAnnotated: 0, byKind: {}, match: {}, reasons: {},
  delaySlow: [], delayFast: [], unjudged: 0 };
// what the wrong ones said instead, per kind: the match and the first entry of the list that
// explains them (or the reason), counted, with one example span each
const said = (kind, a) => {
  const l = explaining(kind, a);
  const m = a['profile.match'] ?? 'absent';
  if (m === 'none') return `none (${a['profile.match_reason']})`;
  return `${m} ${String(a['profile.type'] || '').split(':')[0]}${a['profile.offcpu.type'] ? `, offcpu ${a['profile.offcpu.match']} ${a['profile.offcpu.type'].split(':')[0]}` : ''}: ${l && l.length ? l[0] : '(no list)'}`;
};
const bump = (o, k) => { o[k] = (o[k] || 0) + 1; };
for (const [id, x] of sinkA.seen) {
  const a = x.a;
  const b = sinkB.seen.get(id);
  const delay = b ? x.time - b.time : NaN;
  if (x.ms < THRESHOLD_MS) {
    score.fast += 1;
    if (hotspanKeys(a).length) score.fastAnnotated += 1;
    score.delayFast.push(delay);
    continue;
  }
  score.slow += 1;
  score.delaySlow.push(delay);
  bump(score.match, a['profile.match']);
  if (a['profile.match_reason']) bump(score.reasons, a['profile.match_reason']);
  const t = truth.get(id);
  if (!t || !t.slow) { score.unjudged += 1; continue; } // a child, or a fast request slowed by load
  const k = (score.byKind[t.kind] ??= { n: 0, right: 0, span: 0 });
  const j = judge(t, a);
  k.n += 1;
  k.right += j.right ? 1 : 0;
  k.span += j.match === 'span' ? 1 : 0;
  score.right += j.right ? 1 : 0;
  if (!j.right) {
    const w = ((k.wrong ??= new Map()));
    const key = said(t.kind, a).replace(/ \d+%/, ' N%');
    const e = w.get(key) || { n: 0, example: `${id} ${x.ms.toFixed(0)} ms ${show(a)}` };
    e.n += 1;
    w.set(key, e);
  }
}

const spansA = sinkA.seen.size;
const spansB = sinkB.seen.size;
const perM = (ns, n) => (ns / 1e9 / n) * 1e6;
const cpuA = perM(cpu1.A - cpu0.A, spansA);
const cpuB = perM(cpu1.B - cpu0.B, spansB);
const judged = score.slow - score.unjudged;
const pc = (a, b) => (b ? `${((100 * a) / b).toFixed(1)}%` : '-');
const ms = (x) => (Number.isFinite(x) ? `${x.toFixed(0)} ms` : '-');
const rev = (() => {
  try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: new URL('.', import.meta.url) }).toString().trim(); } catch { return '?'; }
})();

console.log(`hotspan correlation score: ${DURATION_S}s of traffic, ${spansA} spans ` +
  `(${(spansA / DURATION_S).toFixed(0)}/s), ${pc(score.slow, spansA)} slow (>= ${opt.threshold}); ` +
  `Go ${RATE} req/s uploading every ${opt['go-upload-ms']} ms` +
  `${opt['no-node'] ? '' : `, Node ${opt['node-rate']} req/s flushing every ${opt['node-flush-ms']} ms`}` +
  `; ${readdirSync('/sys/devices/system/cpu').filter((d) => /^cpu\d+$/.test(d)).length} cores; ` +
  `${HOTSPAN_BIN}, apps at ${rev}`);
console.log(`slow spans annotated with the right function  ${score.right} of ${judged} (${pc(score.right, judged)})` +
  `${score.unjudged ? `; ${score.unjudged} more slow spans without ground truth (children, fast requests slowed by load)` : ''}`);
for (const [kind, k] of Object.entries(score.byKind)) {
  console.log(`  ${kind.padEnd(8)} ${String(k.right).padStart(6)} of ${String(k.n).padEnd(6)} right, ${k.span} exact (match=span)`);
  for (const [what, e] of [...(k.wrong || new Map())].sort((x, y) => y[1].n - x[1].n).slice(0, 3)) {
    console.log(`           ${String(e.n).padStart(6)} said ${what}`);
    log(`  e.g. ${kind} ${e.example}`);
  }
}
console.log(`matches (all slow spans)                      ${Object.entries(score.match).map(([m, n]) => `${m} ${n} (${pc(n, score.slow)})`).join(', ')}` +
  `${Object.keys(score.reasons).length ? `; none because ${Object.entries(score.reasons).map(([r, n]) => `${r} ${n}`).join(', ')}` : ''}`);
// the correlator's own account of what happened to the spans and the index
const counted = Object.entries(metricsA)
  .filter(([k, v]) => v > 0 && /^hotspan_correlator_(released_by_timeout|evictions|cold_start|extended_waits)_total/.test(k))
  .map(([k, v]) => `${k.replace(/^hotspan_correlator_/, '').replace(/processor="[^"]*"/, '')
    .replace(/,\}/, '}').replace(/\{,/, '{').replace(/\{\}$/, '')} ${v}`);
console.log(`correlator counters (A)                       ${counted.join(', ') || 'none'}`);
console.log(`fast spans annotated                          ${score.fastAnnotated} of ${score.fast}`);
console.log(`delay added to slow spans (A sink - B sink)   p50 ${ms(quantile(score.delaySlow, 0.5))}, p99 ${ms(quantile(score.delaySlow, 0.99))}` +
  `; fast spans p50 ${ms(quantile(score.delayFast, 0.5))}, p99 ${ms(quantile(score.delayFast, 0.99))}`);
console.log(`hotspan CPU per 1M spans                      with the correlator ${cpuA.toFixed(2)} CPU-s, ` +
  `without ${cpuB.toFixed(2)} CPU-s: ${cpuA >= cpuB ? '+' : ''}${(((cpuA - cpuB) / cpuB) * 100).toFixed(1)}% ` +
  `(over the load and the ${drainS.toFixed(1)} s until A had released every span: ` +
  `${((cpu1.A - cpu0.A - (cpu1.B - cpu0.B)) / 1e6).toFixed(0)} CPU-ms more in all, for ` +
  `${score.slow} slow spans and ${psinkA.profiles().length} profiles indexed)`);
// the split: C - B is the profiles (indexing them; C sees no span), A - C the span path (the scan,
// N+1 fragments, parking, annotation at release). Profiles cost per second of run, whatever the
// span rate; the span path per span: the aim holds from the rate where the two together are 10%
// of B's CPU per span (B's per span taken as measured).
const indexed = (m) => Object.entries(m).filter(([k]) => k.startsWith('hotspan_correlator_profiles_indexed_total'))
  .reduce((n, [, v]) => n + v, 0);
const profilesC = indexed(metricsC);
const ns = (k) => cpu1[k] - cpu0[k];
const spanPathNs = ns('A') - ns('C');
const profilesNs = ns('C') - ns('B');
const bPerSpan = ns('B') / spansB;
const aim = 0.1 * bPerSpan - spanPathNs / spansA;
console.log(`correlator CPU, span path (A - C)             ${(spanPathNs / 1e6).toFixed(0)} CPU-ms: ` +
  `${(spanPathNs / spansA).toFixed(0)} ns per span, ${pc(spanPathNs, ns('B'))} of B's`);
console.log(`correlator CPU, profiles (C - B)              ${(profilesNs / 1e6).toFixed(0)} CPU-ms for ` +
  `${profilesC} profiles indexed: ${(profilesNs / 1e6 / Math.max(profilesC, 1)).toFixed(2)} ms each, ` +
  `${(profilesNs / 1e6 / windowS).toFixed(2)} CPU-ms per second of the run, ${pc(profilesNs, ns('B'))} of B's`);
console.log(`span rate where the aim (+10% per span) holds ${aim > 0
  ? `${((profilesNs / windowS) / aim).toFixed(0)} spans/s and up (this run: ${(spansA / windowS).toFixed(0)}/s over ${windowS.toFixed(0)} s)`
  : `none: the span path alone is ${pc(spanPathNs / spansA, bPerSpan)} of B's CPU per span`}`);
console.log(`peak RSS                                      with ${(peakKiB(hsA.proc.pid) / 1024).toFixed(1)} MiB, ` +
  `without ${(peakKiB(hsB.proc.pid) / 1024).toFixed(1)} MiB`);

agent.destroy();
tee.close();
stopping = true;
await Promise.all([hsA.stop(), hsB.stop(), hsC.stop()]);
await Promise.all([sinkA.stop(), sinkB.stop(), sinkC.stop(), psinkA.stop(), psinkB.stop(),
  psinkC.stop()]);
