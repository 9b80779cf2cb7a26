// Profiles through hotspan: the pyroscope receiver (/ingest and the push API) fans out to a
// pyroscope exporter speaking push, one speaking /ingest, and the file exporter.
//  a) the real @pyroscope/nodejs SDK profiling a child Node program: every upload reaches both
//     fake Pyroscopes byte for byte with the labels Pyroscope would derive, and the file
//     exporter's summary equals a summary computed here from the same bytes;
//  b) a pprof built here with known functions and values, sent as /ingest multipart and as a
//     push, is summarised with exactly those values, and `go tool pprof -top` on the bytes the
//     sink received prints them too;
//  c) the /ingest exporter sends format=pprof (or multipart with the sample_type_config that came
//     in), a name that parses back to the same labels, and the same from/until;
//  d) the client's X-Scope-OrgID reaches the sinks; no tenant stays no tenant;
//  e) one Go service's mutex and block profiles, uploaded as pyroscope-go does (same sample
//     types, sample_type_config display names), and a Node wall profile with CPU time reach
//     the push sink named mutex, block and wall, in series that never share a type id.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { startHotspan } from './lib/hotspan.mjs';
import { runApp } from './lib/apps.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import {
  startPyroscopeSink, postIngest, postPush, multipartBody, encodePushRequest, waitForFileProfiles,
  ingestSeriesLabels, publicLabels, attimeToNs, parseIngestName,
} from './lib/pyroscope_sink.mjs';
import {
  encodeProfile, expectedSummary, summarizePprof, strs, sha256, findGo, goPprofTop,
} from './lib/pprof.mjs';

const b64sha = (b64) => sha256(Buffer.from(b64, 'base64'));

/** The file exporter's functions as {`name\tfile`: {self, total}} (decimal strings). */
const fileFunctions = (line) => Object.fromEntries(line.functions.map((f) =>
  [`${f.name}\t${f.file}`, { self: f.self, total: f.total }]));
const decodedFunctions = (s) => Object.fromEntries(Object.entries(s.byNameFile).map(([k, v]) =>
  [k, { self: strs(v.self), total: strs(v.total) }]));
const sortSpans = (spans) => [...spans].sort((a, b) => (a.span_id < b.span_id ? -1 : 1));

/** A tee in front of hotspan's pyroscope port: records each request (query, headers, body as
 * sent) and relays it, answering what hotspan answered. */
async function startTee(targetPort) {
  const seen = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const rec = { path: req.url, query: Object.fromEntries(new URL(req.url, 'http://x').searchParams),
        headers: { ...req.headers }, body, status: null };
      seen.push(rec);
      const fwd = http.request({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url,
        headers: { ...req.headers, host: `127.0.0.1:${targetPort}` }, agent: false }, (r) => {
        const out = [];
        r.on('data', (c) => out.push(c));
        r.on('end', () => {
          rec.status = r.statusCode;
          rec.answer = Buffer.concat(out).toString('utf8');
          res.writeHead(r.statusCode, r.headers);
          res.end(Buffer.concat(out));
        });
      });
      fwd.on('error', (e) => { rec.status = 599; rec.answer = e.message; res.writeHead(502); res.end(); });
      fwd.end(body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { seen, port: server.address().port, close: () => new Promise((r) => server.close(r)) };
}


// The known profile of b): three services' worth of stacks, two span ids, every sample value
// distinct so a mixed-up column or function shows.
const KNOWN_FILES = {
  main: 'cmd/api/main.go',
  'http.HandlerFunc.ServeHTTP': 'net/http/server.go',
  'UserRepository.findByEmail': 'internal/users/repo.go',
  'UserRepository.loadPreferences': 'internal/users/repo.go',
  'pg.Client.query': 'vendor/pg/client.go',
  'runtime.gcBgMarkWorker': 'runtime/mgc.go',
};
const SPAN_A = '00f067aa0ba902b7';
const SPAN_B = '1a2b3c4d5e6f7081';
const knownSpec = () => ({
  files: KNOWN_FILES,
  timeNanos: BigInt(Date.now() - 20000) * 1000000n,
  durationNanos: 10000000000n,
  samples: [
    { stack: ['main', 'http.HandlerFunc.ServeHTTP', 'UserRepository.findByEmail'], values: [7, 70000000],
      labels: { span_id: SPAN_A } },
    { stack: ['main', 'http.HandlerFunc.ServeHTTP', 'UserRepository.findByEmail', 'UserRepository.loadPreferences'],
      values: [13, 130000000], labels: { span_id: SPAN_A } },
    { stack: ['main', 'http.HandlerFunc.ServeHTTP', 'UserRepository.findByEmail', 'UserRepository.loadPreferences',
      'pg.Client.query'], values: [29, 290000000], labels: { span_id: SPAN_B } },
    { stack: ['main', 'http.HandlerFunc.ServeHTTP', 'UserRepository.findByEmail', 'UserRepository.loadPreferences',
      'pg.Client.query'], values: [2, 20000000] },
    { stack: ['runtime.gcBgMarkWorker'], values: [5, 50000000] },
  ],
});

describe('profiles: pyroscope receiver → pyroscope (push, ingest) + file exporters', () => {
  let pushSink;
  let ingestSink;
  let hs;
  let dir;
  let outFile;

  before(async () => {
    pushSink = await startPyroscopeSink();
    ingestSink = await startPyroscopeSink();
    dir = mkdtempSync(join(tmpdir(), 'hotspan-profiles-'));
    outFile = join(dir, 'profiles.jsonl');
    hs = await startHotspan(`receivers:
  pyroscope: {endpoint: 127.0.0.1:0}
exporters:
  pyroscope:
    endpoint: http://127.0.0.1:${pushSink.port}
  pyroscope/ingest:
    endpoint: http://127.0.0.1:${ingestSink.port}
    protocol: ingest
    headers: {Authorization: Bearer it-ingest-token}
  file:
    path: ${outFile}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    profiles: {receivers: [pyroscope], exporters: [pyroscope, pyroscope/ingest, file]}
`, { waitFor: ['pyroscope', 'admin'] });
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (pushSink) await pushSink.stop();
    if (ingestSink) await ingestSink.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a) @pyroscope/nodejs uploads reach both sinks byte for byte, with their labels and time range', async () => {
    const tee = await startTee(hs.ports.pyroscope);
    const appName = 'it-node-app';
    const spanId = 'a1b2c3d4e5f60718';
    try {
      await runApp('profiled.mjs', {
        SERVER_ADDRESS: `http://127.0.0.1:${tee.port}`,
        APP_NAME: appName,
        TAGS: JSON.stringify({ env: 'it', region: 'eu-1' }),
        TENANT_ID: 'tenant-sdk',
        DURATION_MS: '2600',
        FLUSH_MS: '1000',
        SPAN_ID: spanId,
      });
    } finally {
      await tee.close();
    }
    const uploads = tee.seen;
    assert.ok(uploads.length >= 2, `the SDK uploaded ${uploads.length} profiles (want ≥ 2)`);
    for (const u of uploads) {
      assert.equal(u.status, 200, `hotspan answered ${u.status} to the SDK: ${u.answer}`);
      assert.equal(u.query.format, 'pprof');
      assert.equal(u.query.spyName, 'nodespy');
      assert.equal(u.headers['x-scope-orgid'], 'tenant-sdk');
    }
    const shas = uploads.map((u) => sha256(u.body));
    assert.equal(new Set(shas).size, shas.length, 'every upload is a distinct profile');

    const mine = (p) => p.tenant === 'tenant-sdk';
    const viaPush = await pushSink.waitForProfiles(uploads.length, { filter: mine, timeoutMs: 15000 });
    const viaIngest = await ingestSink.waitForProfiles(uploads.length, { filter: mine, timeoutMs: 15000 });
    const lines = await waitForFileProfiles(outFile,
      (ps) => ps.filter((p) => p.labels.service_name === appName).length >= uploads.length,
      { timeoutMs: 15000 });
    assert.equal(viaPush.length, uploads.length, 'push sink: one profile per upload');
    assert.equal(viaIngest.length, uploads.length, 'ingest sink: one profile per upload');

    let alpha = 0n;
    let beta = 0n;
    for (const u of uploads) {
      const sha = sha256(u.body);
      const fromNs = attimeToNs(u.query.from);
      const untilNs = attimeToNs(u.query.until);
      const { app, labels: tagLabels } = parseIngestName(u.query.name);
      assert.equal(app, appName);
      assert.equal(tagLabels.env, 'it');
      assert.equal(tagLabels.region, 'eu-1');

      // the file exporter: same bytes, time range, labels; summary equal to ours
      const line = lines.filter((p) => p.pprof && b64sha(p.pprof) === sha);
      assert.equal(line.length, 1, `file exporter: one line with the bytes of upload ${sha.slice(0, 12)}`);
      const l = line[0];
      assert.equal(l.tenant, 'tenant-sdk');
      assert.equal(l.from_ns, String(fromNs));
      assert.equal(l.until_ns, String(untilNs));
      assert.equal(l.id, null);
      const expectLabels = { ...tagLabels, service_name: appName, pyroscope_spy: 'nodespy', __name__: 'wall',
        __delta__: 'false' };
      assert.deepEqual(l.labels, expectLabels, 'file exporter labels');
      const ours = summarizePprof(u.body);
      assert.deepEqual(l.types.map((t) => [t.type, t.unit]), ours.types);
      const wallIdx = ours.types.findIndex(([t]) => t === 'wall');
      assert.ok(wallIdx >= 0, `a wall sample type in ${JSON.stringify(ours.types)}`);
      assert.equal(l.main_type, wallIdx, 'main_type is the wall column');
      assert.equal(l.types[wallIdx].id, `wall:wall:nanoseconds:${ours.periodType.join(':')}`);
      assert.deepEqual(l.types.map((t) => t.total), strs(ours.totals));
      assert.equal(l.samples, ours.samples);
      assert.deepEqual(fileFunctions(l), decodedFunctions(ours), 'per-function self/total');
      assert.deepEqual(sortSpans(l.spans),
        sortSpans(Object.entries(ours.spans).map(([id, v]) => ({ span_id: id, values: strs(v) }))),
        'per-span values');
      for (const [k, v] of Object.entries(ours.byNameFile)) {
        // the SDK names frames `./apps/profiled.mjs:hotspanBusyAlpha:32`; spin() is the leaf
        if (k.split('\t')[0].includes(':hotspanBusyAlpha:')) alpha += v.total[wallIdx];
        if (k.split('\t')[0].includes(':hotspanBusyBeta:')) beta += v.total[wallIdx];
      }

      // the push sink: same bytes, the series labels
      const p = viaPush.filter((x) => sha256(x.raw) === sha);
      assert.equal(p.length, 1, 'push sink: the upload arrived once, byte for byte');
      assert.equal(p[0].tenant, 'tenant-sdk');
      for (const [k, v] of Object.entries(expectLabels)) {
        if (k === '__delta__') continue;
        assert.equal(p[0].labels[k], v, `push sink label ${k}`);
      }

      // the ingest sink: same bytes, same labels after Pyroscope's parsing, same time range
      const q = viaIngest.filter((x) => sha256(x.raw) === sha);
      assert.equal(q.length, 1, 'ingest sink: the upload arrived once, byte for byte');
      assert.equal(q[0].query.format, 'pprof');
      assert.deepEqual(ingestSeriesLabels(q[0].query), publicLabels(expectLabels));
      assert.equal(attimeToNs(q[0].query.from), fromNs);
      assert.equal(attimeToNs(q[0].query.until), untilNs);
      assert.equal(q[0].authorization, 'Bearer it-ingest-token');
    }
    // the SDK really profiled the busy functions, and the labelled ones carry the span id
    assert.ok(alpha > 0n && beta > 0n, `wall total of hotspanBusyAlpha ${alpha}, hotspanBusyBeta ${beta}`);
    assert.ok(alpha > beta, `hotspanBusyAlpha (20 ms a round) ${alpha} > hotspanBusyBeta (10 ms) ${beta}`);
    assert.ok(lines.some((l) => l.labels.service_name === appName && l.spans.some((s) => s.span_id === spanId)),
      `some profile has samples labelled span_id=${spanId}`);
  });

  it('b) a known pprof via /ingest multipart and via push is summarised with exactly its values', async (t) => {
    const spec = knownSpec();
    const exp = expectedSummary(spec);
    const gz = encodeProfile(spec); // gzipped, for /ingest
    const raw = encodeProfile(spec, { gzip: false }); // plain, for push
    const stc = JSON.stringify({ cpu: { units: 'samples', aggregation: 'sum', sampled: true } });
    const mp = multipartBody([
      { name: 'profile', filename: 'profile.pprof', data: gz },
      { name: 'sample_type_config', filename: 'sample_type_config.json', data: stc },
    ]);
    const fromNs = spec.timeNanos;
    const untilNs = spec.timeNanos + spec.durationNanos;
    const r1 = await postIngest(hs.ports.pyroscope, {
      query: { name: 'it-known{case=multipart,env=b}', from: String(fromNs), until: String(untilNs),
        spyName: 'gospy', sampleRate: '100' },
      body: mp.body, contentType: mp.contentType, headers: { 'X-Scope-OrgID': 't-b' },
    });
    assert.equal(r1.status, 200, `multipart /ingest: ${r1.body}`);
    const pushId = randomUUID();
    const r2 = await postPush(hs.ports.pyroscope, encodePushRequest([{
      labels: { __name__: 'process_cpu', service_name: 'it-known', case: 'push', env: 'b' },
      samples: [{ raw, id: pushId }],
    }]), { headers: { 'X-Scope-OrgID': 't-b' } });
    assert.equal(r2.status, 200, `push: ${r2.body}`);
    assert.equal(r2.headers['content-type'], 'application/proto');
    assert.equal(r2.body.length, 0, 'empty PushResponse');

    const lines = await waitForFileProfiles(outFile,
      (ps) => ps.some((p) => p.labels.case === 'multipart') && ps.some((p) => p.labels.case === 'push'));
    const expFunctions = Object.entries(exp.functions).map(([name, v]) => ({
      name, file: KNOWN_FILES[name], self: strs(v.self), total: strs(v.total) }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    const expSpans = sortSpans(Object.entries(exp.spans).map(([id, v]) => ({ span_id: id, values: strs(v) })));
    const common = (labels, bytes, from, until, id) => ({
      tenant: 't-b', labels, from_ns: String(from), until_ns: String(until), id,
      samples: spec.samples.length, period_type: 'cpu', period_unit: 'nanoseconds', period: '10000000',
      types: [
        { type: 'samples', unit: 'count', id: 'process_cpu:samples:count:cpu:nanoseconds', total: String(exp.totals[0]) },
        { type: 'cpu', unit: 'nanoseconds', id: 'process_cpu:cpu:nanoseconds:cpu:nanoseconds', total: String(exp.totals[1]) },
      ],
      main_type: 1, functions: expFunctions, spans: expSpans, pprof: bytes.toString('base64'),
    });
    const norm = (l) => ({ ...l, functions: [...l.functions].sort((a, b) => (a.name < b.name ? -1 : 1)),
      spans: sortSpans(l.spans) });
    const mpLines = lines.filter((p) => p.labels.case === 'multipart');
    const pushLines = lines.filter((p) => p.labels.case === 'push');
    assert.equal(mpLines.length, 1);
    assert.equal(pushLines.length, 1);
    assert.deepEqual(norm(mpLines[0]), common({ __delta__: 'false', __name__: 'process_cpu', case: 'multipart',
      env: 'b', pyroscope_spy: 'gospy', service_name: 'it-known' }, gz, fromNs, untilNs, null),
    'file exporter line of the /ingest multipart upload');
    assert.deepEqual(norm(pushLines[0]), common({ __name__: 'process_cpu', case: 'push', env: 'b',
      service_name: 'it-known' }, raw, fromNs, untilNs, pushId),
    'file exporter line of the push (time range from time_nanos + duration_nanos)');

    // what the push sink received is the same bytes, and go tool pprof reads those values
    const got = await pushSink.waitForProfiles(2, { filter: (p) => p.labels.service_name === 'it-known' });
    const gotMp = got.find((p) => p.labels.case === 'multipart');
    const gotPush = got.find((p) => p.labels.case === 'push');
    assert.equal(sha256(gotMp.raw), sha256(gz), 'multipart profile forwarded byte for byte');
    assert.equal(sha256(gotPush.raw), sha256(raw), 'pushed profile forwarded byte for byte');
    assert.equal(gotPush.id, pushId, 'RawSample.ID kept');
    assert.equal(gotMp.labels.__name__, 'process_cpu');
    assert.equal(gotMp.labels.pyroscope_spy, 'gospy');

    const go = findGo();
    if (!go) {
      t.skip('go tool pprof not run: no go binary on PATH or in /usr/lib/go/bin (Debian golang-go; '
        + 'scripts/setup installs it)');
      return;
    }
    for (const bytes of [gotMp.raw, gotPush.raw]) {
      const cpu = await goPprofTop(go, bytes, { sampleIndex: 'cpu', unit: 'ns' });
      const cnt = await goPprofTop(go, bytes, { sampleIndex: 'samples' });
      for (const [name, v] of Object.entries(exp.functions)) {
        assert.ok(cpu.rows[name], `go tool pprof -top lists ${name}\n${cpu.text}`);
        assert.equal(BigInt(cpu.rows[name].flat), v.self[1], `${name} flat cpu ns\n${cpu.text}`);
        if (v.self[1] > 0n) assert.equal(cpu.rows[name].flatUnit, 'ns');
        assert.equal(BigInt(cpu.rows[name].cum), v.total[1], `${name} cum cpu ns\n${cpu.text}`);
        assert.equal(BigInt(cnt.rows[name].flat), v.self[0], `${name} flat samples\n${cnt.text}`);
      }
    }
  });

  it('c) the ingest exporter: format=pprof or multipart as received, name and from/until round-trip', async () => {
    // b) has run: find its two profiles at the ingest sink
    const got = await ingestSink.waitForProfiles(2, { filter: (p) => p.labels?.service_name === 'it-known' });
    const lines = await waitForFileProfiles(outFile, (ps) => ps.filter((p) => p.labels.service_name === 'it-known').length >= 2);
    assert.deepEqual(got.map((p) => p.labels.case).sort(), ['multipart', 'push'], 'one /ingest upload per profile');
    for (const p of got) {
      const q = p.query;
      const line = lines.find((l) => l.labels.service_name === 'it-known' && l.labels.case === p.labels.case);
      assert.ok(line, `a file line for case=${p.labels.case}`);
      const bytes = Buffer.from(line.pprof, 'base64');
      assert.equal(sha256(p.raw), sha256(bytes), `case=${p.labels.case}: the pprof bytes as received`);
      // Pyroscope sets pyroscope_spy from spyName, `unknown` without one: a pushed profile that
      // had no pyroscope_spy gains that label on /ingest whatever the exporter does.
      assert.deepEqual(ingestSeriesLabels(q), { pyroscope_spy: 'unknown', ...publicLabels(line.labels) },
        `case=${p.labels.case}: name=${q.name} spyName=${q.spyName} parses back to the labels`);
      assert.equal(attimeToNs(q.from), BigInt(line.from_ns), `from=${q.from}`);
      assert.equal(attimeToNs(q.until), BigInt(line.until_ns), `until=${q.until}`);
      assert.equal(p.tenant, 't-b');
      assert.equal(p.authorization, 'Bearer it-ingest-token', 'exporter headers sent');
      const ct = String(p.request.headers['content-type'] || '');
      if (p.labels.case === 'multipart') {
        // a sample_type_config came in: it goes on, so the upload is multipart (Go SDK shape)
        assert.match(ct, /^multipart\/form-data; boundary=/, 'sample_type_config ⇒ multipart');
        assert.equal(q.format, undefined, 'multipart must not carry format=pprof (wire.md §5.3)');
        assert.deepEqual(JSON.parse(p.parts.sample_type_config.data.toString('utf8')),
          { cpu: { units: 'samples', aggregation: 'sum', sampled: true } }, 'sample_type_config forwarded');
      } else {
        assert.equal(q.format, 'pprof', `case=${p.labels.case}: raw pprof goes with format=pprof`);
      }
    }
  });

  it('d) the client tenant (X-Scope-OrgID) reaches the sinks; none stays none', async () => {
    const mk = (svc) => encodePushRequest([{
      labels: { __name__: 'process_cpu', service_name: svc },
      samples: [{ raw: encodeProfile({ samples: [{ stack: ['main', `work_${svc.replace(/-/g, '_')}`], values: [1, 10000000] }] }) }],
    }]);
    const a = await postPush(hs.ports.pyroscope, mk('it-tenant-d'), { headers: { 'X-Scope-OrgID': 'tenant-d' } });
    const b = await postPush(hs.ports.pyroscope, mk('it-tenant-none'));
    assert.equal(a.status, 200, String(a.body));
    assert.equal(b.status, 200, String(b.body));
    for (const sink of [pushSink, ingestSink]) {
      const [pa] = await sink.waitForProfiles(1, { filter: (p) => p.labels?.service_name === 'it-tenant-d' });
      const [pb] = await sink.waitForProfiles(1, { filter: (p) => p.labels?.service_name === 'it-tenant-none' });
      assert.equal(pa.tenant, 'tenant-d', `${pa.kind} sink: X-Scope-OrgID of the client`);
      assert.equal(pb.tenant, null, `${pb.kind} sink: no X-Scope-OrgID when the client sent none`);
      // a request never mixes tenants
      assert.ok(!pa.request.series || pa.request.series.every((s) => s.labels.service_name !== 'it-tenant-none'));
    }
    const lines = await waitForFileProfiles(outFile, (ps) => ps.some((p) => p.labels.service_name === 'it-tenant-none'));
    assert.equal(lines.find((p) => p.labels.service_name === 'it-tenant-d').tenant, 'tenant-d');
    assert.equal(lines.find((p) => p.labels.service_name === 'it-tenant-none').tenant, null);

    const m = await fetchMetrics(hs.ports.admin);
    const accepted = metric(m, 'hotspan_receiver_accepted_profiles_total', { receiver: 'pyroscope', transport: 'http' });
    assert.ok(accepted >= 6, `hotspan_receiver_accepted_profiles_total = ${accepted}`);
  });

  it('e) Go mutex and block (pyroscope-go) and Node wall+cpu are forwarded as mutex, block and wall', async () => {
    const svc = 'it-types';
    const contention = { sampleTypes: [['contentions', 'count'], ['delay', 'nanoseconds']],
      periodType: ['contentions', 'count'], period: 1,
      samples: [{ stack: ['main', 'sync.(*Mutex).Lock'], values: [3, 4500000] }] };
    // grafana/pyroscope-go session.go sampleTypeConfigMutex / sampleTypeConfigBlock
    const stc = (kind) => JSON.stringify({
      contentions: { 'display-name': `${kind}_count`, units: 'lock_samples' },
      delay: { 'display-name': `${kind}_duration`, units: 'lock_nanoseconds' } });
    for (const kind of ['mutex', 'block']) {
      const mp = multipartBody([
        { name: 'profile', filename: 'profile.pprof', data: encodeProfile(contention) },
        { name: 'sample_type_config', filename: 'sample_type_config.json', data: stc(kind) },
      ]);
      const r = await postIngest(hs.ports.pyroscope, {
        query: { name: `${svc}{kind=${kind}}`, spyName: 'gospy' },
        body: mp.body, contentType: mp.contentType,
      });
      assert.equal(r.status, 200, `${kind}: ${r.body}`);
    }
    const wall = encodeProfile({ sampleTypes: [['samples', 'count'], ['wall', 'nanoseconds'], ['cpu', 'nanoseconds']],
      periodType: ['wall', 'nanoseconds'], samples: [{ stack: ['./app.js:main:1'], values: [1, 10000000, 7000000] }] });
    const r = await postIngest(hs.ports.pyroscope, { query: { name: `${svc}{kind=wall}`, format: 'pprof',
      spyName: 'nodespy' }, body: wall });
    assert.equal(r.status, 200, `wall: ${r.body}`);

    const got = await pushSink.waitForProfiles(3, { filter: (p) => p.labels.service_name === svc });
    const byKind = Object.fromEntries(got.map((p) => [p.labels.kind, p.labels.__name__]));
    assert.deepEqual(byKind, { mutex: 'mutex', block: 'block', wall: 'wall' }, 'push labels __name__');
    const lines = await waitForFileProfiles(outFile, (ps) => ps.filter((p) => p.labels.service_name === svc).length >= 3);
    const ids = Object.fromEntries(lines.filter((l) => l.labels.service_name === svc)
      .map((l) => [l.labels.kind, l.types.map((t) => t.id)]));
    assert.deepEqual(ids, {
      mutex: ['mutex:contentions:count:contentions:count', 'mutex:delay:nanoseconds:contentions:count'],
      block: ['block:contentions:count:contentions:count', 'block:delay:nanoseconds:contentions:count'],
      // Pyroscope's relabel rule stores a wall profile's cpu column as process_cpu
      wall: ['wall:samples:count:wall:nanoseconds', 'wall:wall:nanoseconds:wall:nanoseconds',
        'process_cpu:cpu:nanoseconds:wall:nanoseconds'],
    });
  });
});
