// Hostile connections: one client address holding more sockets than max_connections_per_client
// (idle ones and slow-header ones writing a byte a second) is refused at once past its cap,
// while a good client from another address (127.0.0.2: all of 127/8 is loopback on Linux)
// keeps exporting through the real OpenTelemetry JS SDK and loses nothing, and the admin
// port's /healthz/live answers 200 throughout. Then hotspan under a file limit of 256: the
// receivers' share of it (192; 64 are kept for exporters, files and the admin endpoint) is
// filled by slow-header sockets, the rest are refused (reason file_limit), /healthz/live still
// answers from the reserve, and once busy_timeout has cut the slow sockets a new client gets in.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import { request } from './lib/http.mjs';
import { makeSpans } from './lib/sdk.mjs';
import * as otlp from './lib/otlp.mjs';

const SLOW_REQUEST = 'POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n';

/**
 * Hostile sockets from `from` to `port`: idle ones send nothing, slow ones write SLOW_REQUEST
 * a byte a second and never finish it. Tracks which the server closed.
 */
class Attack {
  constructor() {
    this.sockets = [];
    this.closed = 0;
    this.drips = 0;
    this.waiters = new Set();
    this.timer = setInterval(() => this.#drip(), 1000);
  }

  /** Opens `count` sockets of `kind` ('idle' or 'slow'); resolves once each is connected and
   * (slow) has written its first byte. */
  async open(port, from, kind, count) {
    const ready = [];
    for (let i = 0; i < count; i += 1) {
      const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
      const rec = { s, kind, sent: 0, closed: false };
      s.on('error', () => {}); // a refused slow socket may see its byte answered by a reset
      s.on('close', () => {
        rec.closed = true;
        this.closed += 1;
        for (const w of this.waiters) w();
      });
      this.sockets.push(rec);
      ready.push(once(s, 'connect').then(() => (kind === 'slow' ? this.#write(rec) : null)));
    }
    await Promise.all(ready);
  }

  #write(rec) {
    if (rec.closed || rec.sent >= SLOW_REQUEST.length) return null;
    const byte = SLOW_REQUEST[rec.sent];
    rec.sent += 1;
    return new Promise((res) => rec.s.write(byte, () => res()));
  }

  #drip() {
    for (const rec of this.sockets) if (rec.kind === 'slow') this.#write(rec);
    this.drips += 1;
  }

  get stillOpen() { return this.sockets.length - this.closed; }

  /** Resolves once `n` sockets have been closed by the server. */
  waitClosed(n, timeoutMs = 15000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.closed < n) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`${this.closed} of ${this.sockets.length} hostile sockets closed, ` +
          `waited for ${n}`));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  stop() {
    clearInterval(this.timer);
    for (const rec of this.sockets) rec.s.destroy();
  }
}

/** GETs /healthz/live on a new connection every 50 ms until stopped; keeps every status. */
function pollLive(adminPort) {
  const seen = { statuses: [], errors: [] };
  let running = true;
  const done = (async () => {
    while (running) {
      try {
        const r = await request({ port: adminPort, method: 'GET', path: '/healthz/live',
          timeoutMs: 3000 });
        seen.statuses.push(r.status);
      } catch (e) {
        seen.errors.push(e.message);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return { seen, stop: async () => { running = false; await done; return seen; } };
}

function assertLiveThroughout(seen, what) {
  assert.deepEqual(seen.errors, [], `${what}: /healthz/live failed`);
  assert.ok(seen.statuses.length >= 3, `${what}: only ${seen.statuses.length} polls`);
  assert.ok(seen.statuses.every((s) => s === 200),
    `${what}: /healthz/live answered ${JSON.stringify(seen.statuses)}`);
}

function exportOnce(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

const refused = (m, reason, server = 'otlp') =>
  metric(m, 'hotspan_http_server_connections_refused_total', { server, reason }) ?? 0;

describe('hostile connections', () => {
  const cleanups = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('one address past max_connections_per_client: refused at once past the cap; a client ' +
     'from another address loses nothing; /healthz/live answers throughout', async () => {
    const CAP = 16;
    const sink = await startSink();
    cleanups.push(() => sink.stop());
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0, max_connections: 64, max_connections_per_client: ${CAP}}
processors:
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
    cleanups.push(() => hs.stop());
    const port = hs.ports.otlp;
    const live = pollLive(hs.ports.admin);
    const attack = new Attack();
    cleanups.push(() => attack.stop());

    // 20 idle and 20 slow-header sockets from 127.0.0.1: the first CAP stay, the rest are
    // closed as soon as they are accepted
    await attack.open(port, '127.0.0.1', 'idle', 20);
    await attack.open(port, '127.0.0.1', 'slow', 20);
    await attack.waitClosed(40 - CAP);
    // one more from the same address while it holds its cap: closed at once too
    await attack.open(port, '127.0.0.1', 'idle', 1);
    await attack.waitClosed(40 - CAP + 1);

    // the good client: the SDK's exporter with its own keep-alive agent on 127.0.0.2
    const exporter = new OTLPTraceExporter({
      url: `http://127.0.0.1:${port}/v1/traces`,
      timeoutMillis: 10000,
      httpAgentOptions: { keepAlive: true, localAddress: '127.0.0.2' },
    });
    // it exports while the slow sockets write at least three more bytes each
    const ids = new Set();
    const results = [];
    const drips = attack.drips;
    for (let i = 0; i < 20 || attack.drips < drips + 3; i += 1) {
      const { spans } = makeSpans({ traces: 1, childrenPerTrace: 4, tag: `good-${i}` });
      for (const s of spans) ids.add(s.spanContext().spanId);
      results.push(await exportOnce(exporter, spans));
    }
    await exporter.shutdown();
    assert.deepEqual(results.map((r) => r.code), results.map(() => 0),
      `exports failed: ${results.filter((r) => r.code !== 0).map((r) => r.error?.message)}`);
    await sink.waitFor(() => sink.spans().filter((s) => ids.has(s.span.spanId)).length >= ids.size,
      10000, () => `the sink has ${sink.spans().length} spans, want the ${ids.size} sent`);
    const got = sink.spans().filter((s) => ids.has(s.span.spanId));
    assert.equal(got.length, ids.size, 'every good span exactly once');

    // the attacker still holds exactly its cap: nothing it held was taken away
    assert.equal(attack.stillOpen, CAP, 'the hostile sockets still open');
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(refused(m, 'max_connections_per_client'), 40 - CAP + 1);
    assert.equal(refused(m, 'max_connections'), 0);
    assertLiveThroughout(await live.stop(), 'per-client cap');
    attack.stop();
    const r = await hs.stop();
    assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    assert.ok(r.logs.some((l) => /connection from 127\.0\.0\.1:\d+ refused: its address holds max_connections_per_client \(16\)/.test(l)),
      'the refusal is logged with the address and the limit');
  });

  it('a file limit of 256: the receivers get 192 connections, the admin endpoint answers ' +
     'from the reserve, busy_timeout frees the slots', async () => {
    const SHARE = 192;
    const sink = await startSink();
    cleanups.push(() => sink.stop());
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0, busy_timeout: 3s}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
`, { wrap: ['prlimit', '--nofile=256:256', '--'] });
    cleanups.push(() => hs.stop());
    await hs.waitForLog(/file limit 256 \(hard limit 256\): the receivers' connections may use 192 of it, 64 are kept/);
    await hs.waitForLog(/max_connections add up to \d+, more than the file limit \(256\) leaves them \(192/);
    const port = hs.ports.otlp;
    const live = pollLive(hs.ports.admin);
    const attack = new Attack();
    cleanups.push(() => attack.stop());

    // slow-header sockets (not idle once their first byte is read, so none gives way) from two
    // addresses, 16 at a time up to the share, then 28 more; a round trip to the admin port
    // after each batch lets the loop read the batch's first bytes before the next comes
    const TOTAL = SHARE + 28;
    for (let i = 0; i < TOTAL; i += 16) {
      const n = i < SHARE ? 16 : TOTAL - SHARE;
      await attack.open(port, i % 32 ? '127.0.0.3' : '127.0.0.1', 'slow', n);
      assert.equal((await request({ port: hs.ports.admin, method: 'GET', path: '/healthz/live' })).status, 200);
      if (i >= SHARE) break;
    }
    await attack.waitClosed(TOTAL - SHARE);
    let m = await fetchMetrics(hs.ports.admin);
    assert.equal(refused(m, 'file_limit'), TOTAL - SHARE);
    assert.equal(metric(m, 'hotspan_http_server_connections_reclaimed_total', { server: 'otlp' }), 0);
    assert.equal(metric(m, 'hotspan_http_server_connections_open', { server: 'otlp' }), SHARE);
    // a client from elsewhere is refused too while the share is held
    const late = new Attack();
    cleanups.push(() => late.stop());
    await late.open(port, '127.0.0.2', 'idle', 1);
    await late.waitClosed(1);

    // busy (past 3/4 of the share): every slow socket's header wait is cut to busy_timeout, 3 s
    await attack.waitClosed(TOTAL, 20000);
    const res = await request({ port, path: '/v1/traces', body: otlp.encodeRequest([otlp.makeSpan()]),
      headers: { 'content-type': 'application/x-protobuf' } });
    assert.equal(res.status, 200, 'a client gets in once the slow sockets are cut');
    m = await fetchMetrics(hs.ports.admin);
    assert.equal(refused(m, 'file_limit'), TOTAL - SHARE + 1);
    assert.ok(metric(m, 'hotspan_http_server_responses_total', { server: 'otlp', code_class: '4xx' }) >= SHARE,
      'each slow socket was answered 408');
    assertLiveThroughout(await live.stop(), 'file limit');
    attack.stop();
    late.stop();
    const r = await hs.stop();
    assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
  });
});
