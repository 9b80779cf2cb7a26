// Correlation quality on a real Node service: apps/shop_node.mjs, traced by the OpenTelemetry JS
// SDK and profiled by @pyroscope/nodejs 0.6.4 (wall profiles with collectCpuTime, and heap
// profiles, both to /ingest as raw gzipped pprof; samples labelled with the request's root
// span id by wrapWithLabels). Its spans and profiles go through hotspan's correlator; each slow
// span must come out saying what the app's own ground truth says.
//
// The plan: the first slow requests end before the SDK's first upload (FLUSH_MS 3 s here, 60 s
// by default: cold start); after a pause more of them: POST /login (AuthService.verifyPassword:
// crypto.pbkdf2Sync, CPU in a Node library) and GET /rates (RateClient.fetchRates blocks on
// Atomics.wait: wall time without CPU, which only the wall profile shows), fast ones between.
//
// Tolerances: a function's share within 3 percentage points of the share computed from the
// span's own samples (as the Pyroscope sink received them) and within 15 points of what the app
// measured; profile.cpu_share within 0.15 of CPU time / duration as the app measured them
// (process.cpuUsage(): the whole process, so it reads a little high).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { summarizePprof } from './lib/pprof.mjs';
import {
  runNodeApp, qualityConfig, attrs, durationMs, hotspanKeys, show, parseEntry, names,
  spanSamples, firstProfileMs, profileFunctionNames, annotatedNames,
} from './lib/quality.mjs';

const THRESHOLD_MS = 200;
const FLUSH_MS = 3000;
const slowReq = (kind) => ({ kind, ms: 400, slow: true });
const fastReq = (kind) => ({ kind, ms: 3 });
const PLAN = [
  slowReq('sign'), fastReq('sign'), slowReq('wait'), fastReq('wait'), // cold
  { kind: 'pause', ms: FLUSH_MS },
  fastReq('sign'), slowReq('sign'), fastReq('wait'), slowReq('wait'), fastReq('sign'),
  slowReq('sign'), fastReq('wait'), slowReq('wait'), fastReq('sign'),
];

describe('correlation quality: a Node service (OpenTelemetry JS + @pyroscope/nodejs wall and heap)', () => {
  let sink;
  let psink;
  let hs;
  let report;
  let spans;
  let coldBefore;
  const byId = new Map();

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    hs = await startHotspan(qualityConfig({ sinkPort: sink.port, psinkPort: psink.port }),
      { waitFor: ['otlp', 'pyroscope', 'admin'] });
    report = await runNodeApp({
      otlpUrls: [`http://127.0.0.1:${hs.ports.otlp}/v1/traces`],
      pyroscopeUrl: `http://127.0.0.1:${hs.ports.pyroscope}`,
      // TAIL_MS: the last upload's `until` (whole seconds) passes the last span's end + slack
      env: { FLUSH_MS: String(FLUSH_MS), PLAN: JSON.stringify(PLAN), PAUSE_MS: '100', TAIL_MS: '2500' },
    });
    assert.equal(report.failed, 0, 'hotspan took every span');
    await sink.waitForSpans(report.exported, 25000);
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

  it('the app ran the plan: slow spans slow, every span delivered once, wall and heap uploaded', () => {
    assert.equal(report.spans.length, PLAN.filter((r) => r.kind !== 'pause').length);
    for (const t of report.spans.filter((x) => x.slow)) {
      assert.ok((t.endNs - t.startNs) / 1e6 >= THRESHOLD_MS + 100, `slow ${t.kind} took ${(t.endNs - t.startNs) / 1e6} ms`);
    }
    assert.equal(spans.length, report.exported, 'every span arrived');
    assert.equal(byId.size, report.exported, 'no span twice');
    const types = new Set(psink.profiles().filter((p) => p.labels.service_name === report.service)
      .map((p) => summarizePprof(p.raw).types.map((x) => x.join('/')).join(',')));
    for (const want of ['samples/count,wall/nanoseconds,cpu/nanoseconds', 'inuse_objects/count,inuse_space/bytes']) {
      assert.ok(types.has(want), `the Pyroscope sink got ${want} profiles: ${[...types].join(' | ')}`);
    }
    assert.ok(slow('sign').some(isCold) && slow('wait').some(isCold), 'slow spans ended before the first profile');
    assert.ok(warm('sign').length && warm('wait').length);
  });

  it('fast spans are never annotated', () => {
    let fast = 0;
    for (const { span: s } of spans) {
      if (durationMs(s) >= THRESHOLD_MS) continue;
      fast += 1;
      const a = attrs(s);
      // the Node SDK sets no pyroscope.profile.id: hotspan writes it only on exact matches
      assert.deepEqual([...hotspanKeys(a), ...Object.keys(a).filter((k) => k.startsWith('pyroscope.'))],
        [], `fast span "${s.name}" (${durationMs(s)} ms): ${show(a)}`);
    }
    assert.ok(fast >= 6, `fast spans checked: ${fast}`);
  });

  it('busy spans are matched exactly from the wall profile\'s CPU values, with their CPU share', () => {
    for (const t of warm('sign')) {
      const a = attrs(span(t));
      assert.equal(a['profile.match'], 'span', `${t.spanId}: ${show(a)}`);
      assert.match(a['profile.type'], /:cpu:nanoseconds:/, show(a));
      assert.equal(a['pyroscope.profile.id'], t.spanId);
      const measured = t.cpuNs / (t.endNs - t.startNs);
      assert.ok(Math.abs(a['profile.cpu_share'] - measured) <= 0.15,
        `profile.cpu_share ${a['profile.cpu_share']} vs measured ${measured.toFixed(3)}: ${show(a)}`);
    }
  });

  it('cold start: slow spans that ended before the service\'s first profile are annotated from it',
    () => {
      const cold = report.spans.filter((t) => t.slow && isCold(t));
      assert.ok(cold.length > 0);
      for (const t of cold) {
        const a = attrs(span(t));
        assert.equal(a['profile.match'], 'span', `cold ${t.kind} ${t.spanId}: ${show(a)}`);
        const fn = t.kind === 'sign' ? 'verifyPassword' : 'fetchRates';
        // (what it names first is the library and off-CPU cases' to check)
        assert.ok(annotatedNames(a).some((n) => names(n, fn)), `cold ${t.kind} ${t.spanId} names ${fn}: ${show(a)}`);
      }
    });

  it('a function that spends its time in a library (crypto.pbkdf2Sync) is named, not the library\'s frames',
    () => {
      for (const t of warm('sign')) {
        const a = attrs(span(t));
        const top = a['profile.top_functions'];
        assert.ok(Array.isArray(top) && top.length, show(a));
        const first = parseEntry(top[0]);
        assert.ok(names(first.name, 'verifyPassword'), `first entry names verifyPassword: ${show(a)}`);
        assert.match(top[0], /crypto|pbkdf2/i, `the library it spends its time in is said: ${show(a)}`);
        const exact = 100 * spanSamples(psink, t.spanId, 'cpu').share('verifyPassword');
        const measured = (100 * t.fns.verifyPassword) / t.cpuNs;
        assert.ok(Math.abs(first.pct - exact) <= 3, `${top[0]}: its samples say ${exact.toFixed(1)}%`);
        assert.ok(Math.abs(first.pct - measured) <= 15, `${top[0]}: the app measured ${measured.toFixed(1)}%`);
        for (const e of top) {
          assert.doesNotMatch(parseEntry(e).name, /pbkdf2Sync|PBKDF2Job/, `no entry is a Node crypto frame in the app's place: ${show(a)}`);
        }
      }
    });

  it('a span waiting on I/O is matched exactly from its wall samples and explained off-CPU',
    () => {
      for (const t of warm('wait')) {
        assert.ok(t.waitNs / 1e6 >= 390, `the app waited ${t.waitNs / 1e6} ms`);
        const a = attrs(span(t));
        assert.equal(a['profile.match'], 'span', show(a));
        if (a['profile.cpu_share'] !== undefined) assert.ok(a['profile.cpu_share'] <= 0.1, show(a));
        assert.match(String(a['profile.offcpu.type']), /^wall/, show(a));
        const off = (a['profile.offcpu.top_functions'] || []).map(parseEntry);
        assert.ok(off.length && names(off[0].name, 'fetchRates'), `fetchRates first: ${show(a)}`);
        const exact = 100 * spanSamples(psink, t.spanId, 'wall').share('fetchRates');
        assert.ok(Math.abs(off[0].pct - exact) <= 3, `${off[0].name} ${off[0].pct}%: its wall samples say ${exact.toFixed(1)}%`);
      }
    });

  it('functions are named in full, as the profiler wrote them', () => {
    const known = profileFunctionNames(psink, report.service);
    let checked = 0;
    for (const t of report.spans.filter((x) => x.slow && ['sign', 'wait'].includes(x.kind))) {
      const a = attrs(span(t));
      for (const n of annotatedNames(a)) {
        checked += 1;
        assert.ok(known.has(n), `"${n}" is a function name of the profiles: ${show(a)}`);
      }
    }
    assert.ok(checked > 0);
  });
});
