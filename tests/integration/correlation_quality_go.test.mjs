// Correlation quality on a real Go service: apps/goapp, built here with Debian's golang-go,
// profiles itself with runtime/pprof, labels its samples as grafana/otel-profiling-go does
// (pprof labels span_id / span_name / trace_id of the local root span, pyroscope.profile.id on
// that span) and uploads as grafana/pyroscope-go does (multipart /ingest every UPLOAD_MS: cpu,
// goroutines, block, mutex and heap deltas). Its spans and profiles go through hotspan's
// correlator; each slow span must come out saying what the app's own ground truth says.
//
// The plan: the app starts just after a period boundary, so that its first upload comes a whole
// period (4 s here; 15 s by default) later, and the first slow requests end before it (cold
// start). Once it uploaded, more: /prefs (UserRepository.loadPreferences hashing with
// crypto/sha256: the time is in a library), /report (buildReport: 72 rows in 36 recursion
// depths, scoreRow 60% / formatRow 40%: >= 32 distinct stacks), /prices (PriceCache.Get blocked
// 400 ms on a lock PriceCache.rebuild holds: waiting, not CPU), fast ones between.
//
// Tolerances: a function's share in profile.top_functions within 3 percentage points of the
// share computed from the span's own samples (what the Pyroscope sink received; hotspan rounds
// to whole percents), and within 15 points of what the app measured with its thread's CPU
// clock (the profiler samples at 100 Hz: a 400 ms span is ~40 samples); profile.cpu_share
// within 0.15 of CPU time / duration as the app measured them.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { summarizePprof } from './lib/pprof.mjs';
import { waitFor } from './lib/wait.mjs';
import {
  buildGoApp, startGoApp, nextPeriod, qualityConfig, attrs, attrCount, durationMs, hotspanKeys,
  show, parseEntry, names, namesExpected, spanSamples, firstProfileMs, profileFunctionNames,
  annotatedNames,
} from './lib/quality.mjs';

const THRESHOLD_MS = 200;
const UPLOAD_MS = 4000;
const SLOW_PREFS = '/prefs?users=40&per=10&slow=1';
const FAST_PREFS = '/prefs?users=2&per=1';
const SLOW_REPORT = '/report?rows=72&depths=36&per=15&slow=1';
const FAST_REPORT = '/report?rows=2&per=1';
const SLOW_PRICES = '/prices?hold=400&slow=1';
// held across an upload: the goroutine profile catches the request waiting (and the span's
// exact match is there)
const CAUGHT_PRICES = `/prices?hold=${UPLOAD_MS + 500}&slow=1`;
const FAST_PRICES = '/prices';
const COLD = [SLOW_PREFS, FAST_PREFS, SLOW_PREFS, FAST_REPORT];
const WARM = [FAST_PREFS, SLOW_PREFS, SLOW_REPORT, SLOW_PRICES, FAST_PRICES, FAST_REPORT,
  SLOW_PREFS, SLOW_PRICES, SLOW_REPORT, FAST_PREFS, FAST_PRICES, CAUGHT_PRICES];

describe('correlation quality: a Go service (runtime/pprof, otel-profiling-go labels, pyroscope-go uploads)', () => {
  let sink;
  let psink;
  let hs;
  let report;
  let spans;
  let coldBefore;
  const byId = new Map();

  before(async () => {
    const bin = buildGoApp();
    sink = await startSink();
    psink = await startPyroscopeSink();
    hs = await startHotspan(qualityConfig({ sinkPort: sink.port, psinkPort: psink.port }),
      { waitFor: ['otlp', 'pyroscope', 'admin'] });
    await nextPeriod(UPLOAD_MS);
    const app = await startGoApp(bin, {
      otlpUrls: [`http://127.0.0.1:${hs.ports.otlp}/v1/traces`],
      pyroscopeUrls: [`http://127.0.0.1:${hs.ports.pyroscope}`],
      // every contention and blocking event recorded (pyroscope-go's README suggests 5: sampled)
      env: { UPLOAD_MS: String(UPLOAD_MS), MUTEX_FRACTION: '1', BLOCK_RATE: '1' },
    });
    try {
      for (const p of COLD) await app.get(p);
      await waitFor(async () => (await app.truth()).uploads.length > 0, 3 * UPLOAD_MS,
        () => 'the app\'s first profile upload');
      for (const p of WARM) await app.get(p);
      // every span ended is exported, then released by the correlator once profiles cover it
      const t = await waitFor(async () => {
        const x = await app.truth();
        return x.exported === x.ended && x;
      }, 10000, () => 'the app to export its spans');
      assert.equal(t.failedExports, 0, 'hotspan took every span');
      await sink.waitForSpans(t.exported, 20000 + 3 * UPLOAD_MS);
    } finally {
      report = await app.stop();
    }
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives (no duplicates)
    spans = sink.spans();
    for (const s of spans) byId.set(s.span.spanId, s);
    coldBefore = firstProfileMs(psink, report.service);
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
    if (psink) await psink.stop();
  });

  const slow = (kind) => report.spans.filter((t) => t.kind === kind && t.slow);
  const isCold = (t) => t.endNs / 1e6 < coldBefore;
  const warm = (kind) => slow(kind).filter((t) => !isCold(t));
  const span = (t) => {
    const s = byId.get(t.spanId);
    assert.ok(s, `span ${t.spanId} (${t.kind}) reached the sink`);
    return s.span;
  };
  const pct = (part, whole) => (100 * part) / whole;

  it('the app ran the plan: slow spans slow, every span delivered once, five profile types uploaded', () => {
    assert.equal(report.spans.length, COLD.length + WARM.length);
    for (const t of report.spans.filter((x) => x.slow)) {
      assert.ok((t.endNs - t.startNs) / 1e6 >= THRESHOLD_MS + 100, `slow ${t.kind} took ${(t.endNs - t.startNs) / 1e6} ms`);
    }
    assert.equal(spans.length, report.exported, 'every span arrived');
    assert.equal(byId.size, report.exported, 'no span twice');
    assert.ok(report.uploads.every((u) => u.statuses.every((s) => s === 200)), JSON.stringify(report.uploads));
    assert.equal(report.droppedUploads, 0, 'no profile dropped at the app');
    const types = new Set(psink.profiles().filter((p) => p.labels.service_name === report.service)
      .map((p) => summarizePprof(p.raw).types.map((x) => x.join('/')).join(',')));
    for (const want of ['samples/count,cpu/nanoseconds', 'goroutine/count',
      'contentions/count,delay/nanoseconds',
      'alloc_objects/count,alloc_space/bytes,inuse_objects/count,inuse_space/bytes']) {
      assert.ok(types.has(want), `the Pyroscope sink got ${want} profiles: ${[...types].join(' | ')}`);
    }
    assert.ok(slow('prefs').some(isCold), `a slow span ended before the first profile (${coldBefore})`);
    assert.ok(warm('prefs').length && warm('report').length && warm('prices').length);
  });

  it('fast spans are never annotated, and keep the SDK\'s pyroscope.profile.id', () => {
    let fast = 0;
    for (const { span: s } of spans) {
      if (durationMs(s) >= THRESHOLD_MS) continue;
      fast += 1;
      const a = attrs(s);
      assert.deepEqual(hotspanKeys(a), [], `fast span "${s.name}" (${durationMs(s)} ms): ${show(a)}`);
      if (!s.parentSpanId) assert.equal(a['pyroscope.profile.id'], s.spanId);
    }
    assert.ok(fast >= 6, `fast spans checked: ${fast}`);
  });

  it('busy spans are matched exactly from the CPU profile among the five types, with their CPU share', () => {
    for (const t of [...warm('prefs'), ...warm('report')]) {
      const a = attrs(span(t));
      assert.equal(a['profile.match'], 'span', `${t.kind} ${t.spanId}: ${show(a)}`);
      assert.match(a['profile.type'], /:cpu:nanoseconds:/, show(a));
      const measured = t.cpuNs / (t.endNs - t.startNs);
      assert.ok(Math.abs(a['profile.cpu_share'] - measured) <= 0.15,
        `${t.kind} profile.cpu_share ${a['profile.cpu_share']} vs measured ${measured.toFixed(3)}: ${show(a)}`);
    }
  });

  it('cold start: a slow span that ended before the service\'s first profile is annotated from it',
    () => {
      const cold = slow('prefs').filter(isCold);
      assert.ok(cold.length > 0);
      for (const t of cold) {
        const a = attrs(span(t));
        assert.equal(a['profile.match'], 'span', `cold ${t.spanId}: ${show(a)}`);
        // (what it names first is the library case's to check)
        assert.ok(annotatedNames(a).some((n) => names(n, 'loadPreferences')),
          `cold ${t.spanId} names loadPreferences: ${show(a)}`);
      }
    });

  it('a function that spends its time in a library is named, not the library\'s frames',
    () => {
      for (const t of warm('prefs')) {
        const a = attrs(span(t));
        const top = a['profile.top_functions'];
        assert.ok(Array.isArray(top) && top.length, show(a));
        const first = parseEntry(top[0]);
        assert.ok(names(first.name, 'loadPreferences'), `first entry names loadPreferences: ${show(a)}`);
        assert.match(top[0], /crypto\/sha256/, `the library it spends its time in is said: ${show(a)}`);
        const exact = pct(spanSamples(psink, t.spanId).share('loadPreferences'), 1);
        const measured = pct(t.fns['main.(*UserRepository).loadPreferences'], t.cpuNs);
        assert.ok(Math.abs(first.pct - exact) <= 3, `${top[0]}: its samples say ${exact.toFixed(1)}%`);
        assert.ok(Math.abs(first.pct - measured) <= 15, `${top[0]}: the app measured ${measured.toFixed(1)}%`);
        for (const e of top) {
          assert.doesNotMatch(parseEntry(e).name, /^(crypto\/sha256\.|sha256\.|digest\.)/,
            `no entry is a crypto/sha256 function in the app's place: ${show(a)}`);
        }
      }
    });

  it('a span with >= 32 distinct stacks: shares from all of its samples', () => {
    for (const t of warm('report')) {
      const own = spanSamples(psink, t.spanId);
      assert.ok(own.stacks.size >= 32, `the span's samples fell into ${own.stacks.size} distinct stacks`);
      const a = attrs(span(t));
      assert.equal(a['profile.match'], 'span', show(a));
      const top = (a['profile.top_functions'] || []).map(parseEntry);
      const score = top.find((e) => names(e.name, 'scoreRow'));
      assert.ok(score, `scoreRow is listed: ${show(a)}`);
      assert.ok(Math.abs(score.pct - pct(t.fns['main.scoreRow'], t.cpuNs)) <= 15,
        `scoreRow ${score.pct}%: the app measured ${pct(t.fns['main.scoreRow'], t.cpuNs).toFixed(1)}%`);
      for (const e of top) {
        const fn = ['buildReport', 'renderSection', 'scoreRow', 'formatRow'].find((f) => names(e.name, f));
        if (!fn) continue;
        const exact = 100 * own.share(fn);
        assert.ok(Math.abs(e.pct - exact) <= 3, `${e.name} ${e.pct}%: its samples say ${exact.toFixed(1)}% (${own.stacks.size} stacks)`);
      }
    }
  });

  it('a span waiting on a mutex: off-CPU attributes name the lock\'s functions', () => {
    for (const t of warm('prices')) {
      assert.ok(t.waitNs / 1e6 >= 300, `the app waited ${t.waitNs / 1e6} ms for the lock`);
      const a = attrs(span(t));
      if (a['profile.cpu_share'] !== undefined) {
        const measured = t.cpuNs / (t.endNs - t.startNs);
        assert.ok(a['profile.cpu_share'] <= measured + 0.1, `cpu_share ${a['profile.cpu_share']}: ${show(a)}`);
      }
      assert.match(String(a['profile.offcpu.type']), /^(mutex|block|goroutines?)[:]?/, show(a));
      const off = a['profile.offcpu.top_functions'];
      assert.ok(Array.isArray(off) && off.length && namesExpected('prices', off[0]),
        `profile.offcpu.top_functions names PriceCache.Get or .rebuild first: ${show(a)}`);
    }
  });

  it('a span the goroutine profile caught waiting: the waiting function is named, not its callers', () => {
    const caught = warm('prices').filter((t) => t.waitNs / 1e6 >= UPLOAD_MS);
    assert.equal(caught.length, 1);
    const t = caught[0];
    const a = attrs(span(t));
    assert.equal(a['profile.match'], 'span', show(a));
    // its own samples: in the goroutine profile, unless the CPU profile caught its price
    // formatting (1 ms), which is then its match, and the goroutine profile its off-CPU one
    const cpu = /:cpu:/.test(a['profile.type']);
    if (!cpu) assert.match(a['profile.type'], /^goroutines:/, show(a));
    assert.match(a['profile.offcpu.type'], /^goroutines:/, show(a));
    for (const key of cpu ? ['profile.offcpu.top_functions'] : ['profile.top_functions', 'profile.offcpu.top_functions']) {
      const top = a[key] || [];
      assert.ok(top.length && names(parseEntry(top[0]).name, 'Get') && /\(in sync\)$/.test(top[0]),
        `${key} names PriceCache.Get first, waiting in sync: ${show(a)}`);
      for (const e of top) {
        const n = parseEntry(e).name;
        assert.match(n, /^main\./, `only the application's functions are listed: ${show(a)}`);
        assert.ok(!['serve', 'func1', 'handlePrices', 'lookup'].some((f) => names(n, f)),
          `the handlers above the wait are not listed: ${show(a)}`);
      }
    }
    assert.equal(a['profile.offcpu.match'], 'span', show(a));
    // written when a CPU profile covering the span had arrived by its release (a loaded machine
    // can hold the CPU upload back past the other types')
    if (a['profile.cpu_share'] !== undefined) {
      assert.ok(a['profile.cpu_share'] <= t.cpuNs / (t.endNs - t.startNs) + 0.1, show(a));
    }
  });

  it('pyroscope.profile.id, which the SDK set, is on every root span exactly once', () => {
    for (const t of report.spans) {
      const s = span(t);
      assert.equal(attrCount(s, 'pyroscope.profile.id'), 1,
        `${t.kind}${t.slow ? ' (slow)' : ''} ${t.spanId}: ${JSON.stringify(s.attributes.map((x) => x.key))}`);
      assert.equal(attrs(s)['pyroscope.profile.id'], t.spanId);
    }
  });

  it('mutex and block profiles reach Pyroscope as two series', () => {
    const lock = psink.profiles().filter((p) => p.labels.service_name === report.service &&
      summarizePprof(p.raw).types.some(([ty]) => ty === 'contentions'));
    const byName = {};
    for (const p of lock) byName[p.labels.__name__] = (byName[p.labels.__name__] || 0) + 1;
    assert.deepEqual(Object.keys(byName).sort(), ['block', 'mutex'], JSON.stringify(byName));
    assert.equal(byName.block, byName.mutex);
  });

  it('functions are named in full, as the profiler wrote them', () => {
    const known = profileFunctionNames(psink, report.service);
    let checked = 0;
    for (const t of report.spans.filter((x) => x.slow && ['prefs', 'report', 'prices'].includes(x.kind))) {
      const a = attrs(span(t));
      for (const n of annotatedNames(a)) {
        checked += 1;
        assert.ok(known.has(n), `"${n}" is a function name of the profiles: ${show(a)}`);
      }
    }
    assert.ok(checked > 0);
  });
});
