// The seed scenario (design.md §1) with real clients: apps/nplus1.mjs runs `api-server` calling
// `user-db`, whose UserRepository.findByEmail does N+1 "SELECT preferences" queries, traced by
// the OpenTelemetry JS SDK (to hotspan's otlp receiver) and profiled by @pyroscope/nodejs (to
// hotspan's pyroscope receiver), with samples labelled by the findByEmail span id. Through the
// correlator: every slow user-db span reaches the sink saying which functions were hot
// (findByEmail / loadPreferences), hotspan.slow, profile.match span|window, and the N+1 pattern
// with the exact number of preference queries; fast spans are untouched; api-server spans are
// never given user-db's functions; profiles pass through to the Pyroscope sink.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { runAppReport } from './lib/apps.mjs';
import { attrs, durationMs } from './lib/otlp.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { fetchMetrics, metricSum } from './lib/metrics.mjs';

const THRESHOLD_MS = 300;
const PLAN = 'FFFSFFSFFSFF';
const USER_FNS = /findByEmail|loadPreferences/;

/** An OTLP AnyValue (decoded) as a plain JS value. */
const hotspanKeys = (a) => Object.keys(a).filter((k) => /^(profile\.|hotspan\.|pyroscope\.)/.test(k));


describe('correlator: N+1 in user-db, real OpenTelemetry and Pyroscope SDKs', () => {
  let sink;
  let psink;
  let hs;
  let run;
  let spans;

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
  pyroscope:
    endpoint: 127.0.0.1:0
processors:
  correlator:
    slow: {threshold: ${THRESHOLD_MS}ms}
    max_wait: 20s
    bucket: 5s
    # api-server sends no profiles: its slow spans need not wait for a first one (user-db's
    # first upload comes before its first slow span, WARMUP_MS)
    first_profile_wait: 1s
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
  pyroscope:
    endpoint: http://127.0.0.1:${psink.port}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [correlator], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [correlator], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'pyroscope', 'admin'] });

    run = await runAppReport('nplus1.mjs', {
      OTLP_URL: `http://127.0.0.1:${hs.ports.otlp}/v1/traces`,
      PYROSCOPE_URL: `http://127.0.0.1:${hs.ports.pyroscope}`,
      PLAN,
      FAST_USERS: '3',
      SLOW_USERS: '45',
      FLUSH_MS: '1000',
      // the first upload reaches hotspan before the first slow span does
      WARMUP_MS: '1500',
      // an upload's `until` (whole seconds) must pass the last span's end + slack (5 s default)
      TAIL_MS: '7000',
    });
    const expected = run.requests.reduce((n, r) => n + 2 + r.users, 0);
    // slow spans are parked until their profile window is complete or max_wait (20 s) passes
    spans = await sink.waitForSpans(expected, 40000);
    // nothing more arrives (no duplicates from a late release)
    await new Promise((r) => setTimeout(r, 300));
    spans = sink.spans();
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
    if (psink) await psink.stop();
  });

  const service = (s) => attrs(s.resource)['service.name'];

  it('the app ran the plan: slow requests over the threshold, fast ones well under it', () => {
    assert.equal(run.requests.filter((r) => r.kind === 'slow').length, [...PLAN].filter((k) => k === 'S').length);
    assert.ok(run.requests.length > PLAN.length, 'warm-up requests ran first');
    for (const r of run.requests) {
      if (r.kind === 'slow') assert.ok(r.ms >= THRESHOLD_MS + 100, `slow request took ${r.ms} ms`);
    }
    const expected = run.requests.reduce((n, r) => n + 2 + r.users, 0);
    assert.equal(spans.length, expected, 'every span arrived exactly once');
    assert.equal(new Set(spans.map((s) => s.span.spanId)).size, expected, 'no span twice');
  });

  it('every slow user-db span names findByEmail / loadPreferences, the match and the N+1 count', () => {
    const slowReqs = run.requests.filter((r) => r.kind === 'slow');
    assert.ok(slowReqs.length >= 3);
    for (const r of slowReqs) {
      const s = spans.find((x) => x.span.spanId === r.dbSpanId);
      assert.ok(s, `slow user-db span ${r.dbSpanId} reached the sink`);
      assert.equal(service(s), 'user-db');
      assert.ok(durationMs(s.span) >= THRESHOLD_MS, `slow span lasted ${durationMs(s.span)} ms`);
      const a = attrs(s.span);
      const show = JSON.stringify(Object.fromEntries(hotspanKeys(a).map((k) => [k, a[k]])));
      assert.equal(a['hotspan.slow'], true, `hotspan.slow on ${r.dbSpanId}: ${show}`);
      assert.ok(['span', 'window'].includes(a['profile.match']), `profile.match: ${show}`);
      assert.ok(Array.isArray(a['profile.top_functions']) && a['profile.top_functions'].length > 0,
        `profile.top_functions is a non-empty array: ${show}`);
      assert.ok(a['profile.top_functions'].some((f) => USER_FNS.test(f)),
        `profile.top_functions names findByEmail and/or loadPreferences: ${show}`);
      for (const f of a['profile.top_functions']) {
        assert.match(f, /^.+ \d+(\.\d+)?%( \(in .+\))?$/, `"function N%[ (in lib)]": ${f}`);
      }
      if (a['profile.match'] === 'span') {
        assert.equal(a['pyroscope.profile.id'], r.dbSpanId, `pyroscope.profile.id on a span match: ${show}`);
      }
      assert.equal(a['hotspan.pattern'], 'n_plus_one', `hotspan.pattern: ${show}`);
      assert.equal(a['hotspan.n_plus_one.count'], r.users,
        `hotspan.n_plus_one.count = the ${r.users} preference queries: ${show}`);
      // the children really were r.users preference queries under this span
      const kids = spans.filter((x) => x.span.parentSpanId === r.dbSpanId && x.span.name === 'SELECT preferences');
      assert.equal(kids.length, r.users);
    }
  });

  it('no fast span carries any profile.* / hotspan.* attribute', () => {
    let fast = 0;
    for (const s of spans) {
      if (durationMs(s.span) >= THRESHOLD_MS) continue;
      fast += 1;
      const a = attrs(s.span);
      assert.deepEqual(hotspanKeys(a), [],
        `fast span ${service(s)} "${s.span.name}" (${durationMs(s.span)} ms) was annotated`);
    }
    assert.ok(fast > PLAN.length, `fast spans checked: ${fast}`);
    // the fast requests' user-db spans are among them and untouched (unless a loaded machine
    // made one last past the threshold: then it is slow, and rightly annotated)
    for (const r of run.requests.filter((x) => x.kind === 'fast')) {
      const s = spans.find((x) => x.span.spanId === r.dbSpanId);
      assert.ok(s, `fast user-db span ${r.dbSpanId} arrived`);
      if (durationMs(s.span) >= THRESHOLD_MS) continue;
      assert.deepEqual(hotspanKeys(attrs(s.span)), [],
        `fast user-db span ${r.dbSpanId} (${durationMs(s.span)} ms)`);
    }
  });

  it('api-server spans are never annotated with user-db functions', () => {
    const api = spans.filter((s) => service(s) === 'api-server');
    assert.equal(api.length, run.requests.length);
    for (const s of api) {
      const a = attrs(s.span);
      for (const k of ['profile.top_functions', 'profile.hot_path', 'profile.grown_functions']) {
        const v = a[k];
        if (v === undefined) continue;
        for (const f of Array.isArray(v) ? v : [v]) {
          assert.doesNotMatch(String(f), USER_FNS, `api-server span ${s.span.spanId} got ${k}=${JSON.stringify(v)}`);
        }
      }
      assert.notEqual(a['profile.match'], 'span', 'no api-server sample has its span id');
      assert.notEqual(a['hotspan.pattern'], 'n_plus_one', 'the N+1 children are user-db\'s, not api-server\'s');
      if (durationMs(s.span) >= THRESHOLD_MS) {
        assert.equal(a['hotspan.slow'], true, `a slow api-server span is marked slow too: ${JSON.stringify(a)}`);
        if (a['profile.match'] !== undefined) assert.equal(a['profile.match'], 'none', 'api-server sends no profiles');
      }
    }
  });

  it('profiles pass through to Pyroscope, and the correlator counts its matches', async () => {
    const ps = psink.profiles().filter((p) => p.labels.service_name === 'user-db');
    assert.ok(ps.length >= 2, `user-db profiles at the Pyroscope sink: ${ps.length}`);
    assert.ok(ps.every((p) => p.labels.env === 'it' && p.labels.pyroscope_spy === 'nodespy'));
    const m = await fetchMetrics(hs.ports.admin);
    const annotated = metricSum(m, 'hotspan_correlator_annotated_spans_total');
    const slowDb = run.requests.filter((r) => r.kind === 'slow').length;
    assert.ok(annotated >= slowDb, `hotspan_correlator_annotated_spans_total = ${annotated} (≥ ${slowDb})\n` +
      Object.entries(m).filter(([k]) => k.includes('correlator')).map(([k, v]) => `${k} ${v}`).join('\n'));
  });
});
