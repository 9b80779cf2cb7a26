// The persistent sending queue (sending_queue.storage) end to end: spans acknowledged with 200
// while the backend is down survive a SIGKILL and are delivered by the next start; requests in
// flight at a SIGKILL (a backend that read them and never answered) are sent again, and only
// they are (at least once, duplicates bounded by what was in flight); SIGTERM leaves the queue on disk and says so; a failing disk (the
// test-only hook HOTSPAN_TEST_QUEUE_STORE_FAIL: writes fail while the named file exists, as no
// tiny filesystem can be mounted without root) answers 503, logs, counts, and recovers; a
// corrupt store is moved aside at start; the pyroscope exporter (push and /ingest) replays its
// profiles byte for byte with their tenants and per-request URLs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { gunzipSync } from 'node:zlib';
import { mkdtempSync, rmSync, writeFileSync, unlinkSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import { postProto } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';
import { startPyroscopeSink, postIngest } from './lib/pyroscope_sink.mjs';
import { encodeProfile, sha256 } from './lib/pprof.mjs';

const EXP = { exporter: 'otlp' };
const CONSUMERS = 2;
const PER_REQUEST = 50;

// No batch processor: a 200 then means the spans are in the exporter's queue, on disk. (With
// one, what it holds until its timeout is in memory only: see docs/operations.md.)
const config = (sinkPort, dir, retry = 'initial_interval: 100ms, max_interval: 200ms') => `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sinkPort}
    sending_queue: {storage: ${dir}, num_consumers: ${CONSUMERS}, queue_size: 100}
    retry_on_failure: {${retry}, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
`;

async function sendBatches(port, n, tag) {
  const ids = [];
  for (let i = 0; i < n; i += 1) {
    const spans = Array.from({ length: PER_REQUEST }, (_, k) => otlp.makeSpan({ name: `${tag}-${i}-${k}` }));
    const res = await postProto(port, otlp.encodeRequest(spans));
    assert.equal(res.status, 200, `request ${i} answered ${res.status}: ${res.body}`);
    for (const s of spans) ids.push(s.spanId);
  }
  return ids;
}

async function waitMetric(adminPort, name, labels, pred, what, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let m;
  let v;
  do {
    m = await fetchMetrics(adminPort);
    v = metric(m, name, labels);
    if (pred(v)) return v;
    await new Promise((r) => setTimeout(r, 50));
  } while (Date.now() < deadline);
  assert.fail(`${name}${JSON.stringify(labels)} = ${v}: ${what}`);
}

function delivery(sink, accepted) {
  const counts = new Map();
  for (const s of sink.spans()) counts.set(s.span.spanId, (counts.get(s.span.spanId) || 0) + 1);
  const missing = accepted.filter((id) => !counts.has(id));
  let duplicates = 0;
  for (const n of counts.values()) duplicates += n - 1;
  return { missing, duplicates, total: sink.spans().length };
}

describe('persistent queue: SIGKILL with the backend down, then restart', () => {
  let sink;
  let hs;
  let dir;
  let accepted = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hotspan-queue-'));
    sink = await startSink();
    await sink.down();
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (sink) await sink.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('acknowledges spans while the backend is down and keeps them on disk', async () => {
    hs = await startHotspan(config(sink.port, dir));
    accepted = await sendBatches(hs.ports.otlp, 20, 'kill');
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_exporter_storage_batches', EXP), 20, 'batches on disk');
    assert.ok(metric(m, 'hotspan_exporter_storage_bytes', EXP) > 0, 'bytes on disk');
    hs.proc.kill('SIGKILL');
    const e = await hs.waitExit(5000);
    assert.equal(e.signal, 'SIGKILL');
    await hs.stop();
    hs = null;
  });

  it('the next start delivers every acknowledged span (at least once)', async () => {
    await sink.up();
    hs = await startHotspan(config(sink.port, dir));
    await hs.waitForLog(/resuming 20 batches \(1000 spans/);
    await sink.waitFor(() => delivery(sink, accepted).missing.length === 0, 15000,
      () => `missing ${delivery(sink, accepted).missing.length} of ${accepted.length} spans`);
    const d = delivery(sink, accepted);
    // in flight at the kill: at most one batch per consumer (here none got through: the sink
    // was down the whole first run, so any duplicate is a bug too)
    console.log(`persistence: ${accepted.length} acknowledged, ${d.total} delivered, ` +
      `${d.duplicates} duplicates`);
    assert.ok(d.duplicates <= CONSUMERS * PER_REQUEST, `${d.duplicates} duplicates`);
    assert.equal(d.duplicates, 0, 'nothing was sent before the kill, so nothing is sent twice');
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_exporter_replayed_spans_total', EXP), accepted.length,
      'every span found on disk counted as replayed');
    await waitMetric(hs.ports.admin, 'hotspan_exporter_storage_batches', EXP, (v) => v === 0,
      'the store empties once sent');
    const r = await hs.stop();
    hs = null;
    assert.equal(r.code, 0);
  });
});

// A backend that reads each request and never answers: what it got was in flight at the kill.
async function startBlackHole() {
  const got = [];
  const sockets = new Set();
  const server = http.createServer((req) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = gunzipSync(Buffer.concat(chunks));
      got.push(otlp.flattenSpans(otlp.decodeTraceRequest(body)).map((s) => s.span.spanId));
    });
  });
  server.on('connection', (c) => { sockets.add(c); c.on('close', () => sockets.delete(c)); });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    got,
    close: () => { for (const c of sockets) c.destroy(); return new Promise((r) => server.close(r)); },
  };
}

describe('persistent queue: SIGKILL with requests in flight', () => {
  let sink;
  let hole;
  let hs;
  let dir;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hotspan-queue-'));
    sink = await startSink();
    hole = await startBlackHole();
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (sink) await sink.stop();
    if (hole) await hole.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends what was in flight again, and nothing else twice', async () => {
    hs = await startHotspan(config(hole.port, dir));
    const accepted = await sendBatches(hs.ports.otlp, 10, 'flight');
    const deadline = Date.now() + 5000;
    while (hole.got.length < CONSUMERS && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(hole.got.length, CONSUMERS, 'one request out per consumer');
    hs.proc.kill('SIGKILL');
    await hs.waitExit(5000);
    await hs.stop();
    const inFlight = hole.got.flat();

    // the restart points at the real backend: the stored records follow the config's endpoint
    hs = await startHotspan(config(sink.port, dir));
    await sink.waitFor(() => delivery(sink, accepted).missing.length === 0, 15000,
      () => `missing ${delivery(sink, accepted).missing.length} of ${accepted.length} spans`);
    const d = delivery(sink, accepted);
    assert.equal(d.duplicates, 0, 'the sink got a span twice');
    const delivered = new Set(sink.spans().map((s) => s.span.spanId));
    const again = inFlight.filter((id) => delivered.has(id)).length;
    console.log(`persistence: ${inFlight.length} spans in flight at the kill, ${again} sent again`);
    assert.equal(again, inFlight.length, 'a request in flight at the kill is sent again');
    assert.ok(again <= CONSUMERS * PER_REQUEST, `${again} duplicates > what can be in flight`);
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_exporter_replayed_spans_total', EXP), accepted.length);
    const r = await hs.stop();
    hs = null;
    assert.equal(r.code, 0);
  });
});

describe('persistent queue: SIGTERM leaves the queue on disk; a corrupt store is moved aside', () => {
  let sink;
  let hs;
  let dir;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hotspan-queue-'));
    sink = await startSink();
    await sink.down();
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (sink) await sink.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('SIGTERM with the backend down exits 0 at once and logs what is left', async () => {
    // a long retry interval: shutdown must not wait for it
    hs = await startHotspan(config(sink.port, dir, 'initial_interval: 60s, max_interval: 60s'));
    const ids = await sendBatches(hs.ports.otlp, 3, 'term');
    const t0 = Date.now();
    const r = await hs.stop({ timeoutMs: 10000 });
    hs = null;
    assert.equal(r.code, 0, r.logs.slice(-20).join('\n'));
    assert.ok(Date.now() - t0 < 5000, 'shutdown waited for the retry interval');
    assert.ok(r.logs.some((l) => /left 3 batches \(150 spans/.test(l)), r.logs.join('\n'));

    await sink.up();
    hs = await startHotspan(config(sink.port, dir));
    await sink.waitFor(() => delivery(sink, ids).missing.length === 0, 15000,
      () => `missing ${delivery(sink, ids).missing.length} spans after the restart`);
    assert.equal(delivery(sink, ids).duplicates, 0);
    const r2 = await hs.stop();
    hs = null;
    assert.equal(r2.code, 0);
  });

  it('a garbage store file is moved aside, counted, and a fresh store works', async () => {
    const file = readdirSync(dir).find((f) => f.endsWith('.queue.db'));
    assert.equal(file, 'otlp.queue.db', `store file name: ${readdirSync(dir)}`);
    writeFileSync(join(dir, file), Buffer.alloc(8192, 0x5a));
    hs = await startHotspan(config(sink.port, dir));
    await hs.waitForLog(/queue store .* is unreadable .*moved aside to .*corrupt-/);
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_exporter_storage_errors_total', { ...EXP, op: 'corrupt' }), 1);
    assert.ok(readdirSync(dir).some((f) => /^otlp\.queue\.db\.corrupt-\d+$/.test(f)), 'kept aside');
    const before = sink.spans().length;
    await sendBatches(hs.ports.otlp, 1, 'fresh');
    await sink.waitForSpans(before + PER_REQUEST, 10000);
    const r = await hs.stop();
    hs = null;
    assert.equal(r.code, 0);
  });
});

describe('persistent queue: a failing disk refuses with 503, then recovers', () => {
  let sink;
  let hs;
  let dir;
  let flag;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hotspan-queue-'));
    flag = join(dir, 'disk-full');
    sink = await startSink();
    hs = await startHotspan(config(sink.port, dir),
      { env: { HOTSPAN_TEST_QUEUE_STORE_FAIL: flag } });
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (sink) await sink.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('503 + log + metric while writes fail; 200 and delivered once they work again', async () => {
    const ok1 = await sendBatches(hs.ports.otlp, 1, 'before');
    writeFileSync(flag, '');
    const spans = Array.from({ length: 7 }, () => otlp.makeSpan());
    const res = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
    assert.equal(res.status, 503, `answered ${res.status}: ${res.body}`);
    assert.ok(res.headers['retry-after'], '503 without Retry-After');
    await hs.waitForLog(/level=error .*queue store write, batch refused: .*disk is full/);
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_exporter_storage_errors_total', { ...EXP, op: 'write' }), 1);
    assert.equal(metric(m, 'hotspan_exporter_enqueue_failed_spans_total', EXP), 7);
    assert.equal(hs.exited(), null, 'hotspan keeps running');

    unlinkSync(flag);
    const ok2 = await sendBatches(hs.ports.otlp, 1, 'after');
    await sink.waitFor(() => delivery(sink, [...ok1, ...ok2]).missing.length === 0, 10000,
      () => 'spans accepted around the failure were not delivered');
    const refused = new Set(spans.map((s) => s.spanId));
    assert.equal(sink.spans().filter((s) => refused.has(s.span.spanId)).length, 0,
      'refused spans were delivered');
    const r = await hs.stop();
    hs = null;
    assert.equal(r.code, 0);
  });
});

describe('persistent queue: pyroscope push and /ingest survive a SIGKILL', () => {
  let push;
  let ingest;
  let hs;
  let dir;

  const pyroConfig = () => `
receivers:
  pyroscope: {endpoint: 127.0.0.1:0}
exporters:
  pyroscope:
    endpoint: http://127.0.0.1:${push.port}
    compression: gzip
    sending_queue: {storage: ${dir}}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
  pyroscope/ingest:
    endpoint: http://127.0.0.1:${ingest.port}
    protocol: ingest
    headers: {Authorization: Bearer it-token}
    sending_queue: {storage: ${dir}}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    profiles: {receivers: [pyroscope], exporters: [pyroscope, pyroscope/ingest]}
`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hotspan-queue-'));
    push = await startPyroscopeSink();
    ingest = await startPyroscopeSink();
    await push.down({ close: true });
    await ingest.down({ close: true });
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (push) await push.stop();
    if (ingest) await ingest.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('delivers every acknowledged profile after the restart, bytes, tenant and name intact', async () => {
    hs = await startHotspan(pyroConfig(), { waitFor: ['pyroscope', 'admin'] });
    const sent = [];
    for (let i = 0; i < 3; i += 1) {
      const body = encodeProfile({ samples: [{ stack: ['main', `work${i}`], values: [1, 10000000] }] });
      const name = `it-persist{i=${i},env=x}`;
      const res = await postIngest(hs.ports.pyroscope, { query: { name, format: 'pprof' }, body,
        headers: { 'X-Scope-OrgID': `tenant-${i}` } });
      assert.equal(res.status, 200, `ingest ${i}: ${res.body}`);
      // the name the exporter sends: labels sorted, service_name derived (Pyroscope's rule)
      sent.push({ sha: sha256(body), tenant: `tenant-${i}`,
        name: `it-persist{env=x,i=${i},service_name=it-persist}` });
    }
    assert.deepEqual(readdirSync(dir).filter((f) => f.endsWith('.queue.db')).sort(),
      ['pyroscope%2Fingest.queue.db', 'pyroscope.queue.db'], 'one store per exporter id');
    hs.proc.kill('SIGKILL');
    await hs.waitExit(5000);
    await hs.stop();

    await push.up();
    await ingest.up();
    hs = await startHotspan(pyroConfig(), { waitFor: ['pyroscope', 'admin'] });
    for (const [sink, kind] of [[push, 'push'], [ingest, 'ingest']]) {
      await sink.waitFor(() => sink.profiles(kind).length >= 3, 10000,
        () => `${kind}: ${sink.profiles(kind).length} of 3 profiles`);
      const got = sink.profiles(kind).map((p) => ({ sha: sha256(p.raw), tenant: p.tenant }));
      assert.deepEqual(got.map((g) => g.sha).sort(), sent.map((x) => x.sha).sort(), `${kind}: bytes`);
      for (const x of sent) {
        assert.equal(got.find((g) => g.sha === x.sha).tenant, x.tenant, `${kind}: tenant`);
      }
    }
    const names = ingest.accepted('ingest').map((r) => r.query.name).sort();
    assert.deepEqual(names, sent.map((x) => x.name).sort(), '/ingest names');
    for (const r of ingest.accepted('ingest')) {
      assert.equal(r.headers.authorization, 'Bearer it-token');
    }
    for (const r of push.accepted('push')) assert.equal(r.headers['content-encoding'], 'gzip');
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_exporter_replayed_profiles_total', { exporter: 'pyroscope/ingest' }), 3);
    const r = await hs.stop();
    hs = null;
    assert.equal(r.code, 0);
  });
});
