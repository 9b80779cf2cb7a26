// OTLP/gRPC through the real binary: the OpenTelemetry JS gRPC exporter and a raw @grpc/grpc-js
// client send over h2c to hotspan's otlp receiver (protocols.grpc), whose otlp exporter
// (protocol: grpc) forwards to a TraceService sink written with @grpc/grpc-js. Every span must
// arrive once and equal its twin exported straight to the sink; gzip both ways; bad messages are
// INVALID_ARGUMENT; HTTP/1.1 on the gRPC port is refused; the HTTP port also speaks h2c.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import grpc from '@grpc/grpc-js';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { startHotspan } from './lib/hotspan.mjs';
import { fetchMetrics } from './lib/metrics.mjs';
import { makeSpans } from './lib/sdk.mjs';
import { request } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';
import { waitFor } from './lib/wait.mjs';
import { startGrpcSink, EXPORT, raw } from './lib/grpc_sink.mjs';

function exportGrpc(spans, { url, compression = 'none', headers = {} }) {
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(headers)) metadata.set(k, v);
  const exporter = new GrpcExporter({ url, compression, metadata, timeoutMillis: 10000 });
  return new Promise((resolve, reject) => {
    exporter.export(spans, (r) => (r.code === 0 ? resolve() : reject(r.error || new Error(`code ${r.code}`))));
  }).finally(() => exporter.shutdown());
}

/** One unary call with a raw client; resolves {code, details, metadata, response}. */
function rawCall(port, body, { path = EXPORT, gzip = false } = {}) {
  const opts = gzip ? { 'grpc.default_compression_algorithm': 2 } : {};
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), opts);
  return new Promise((resolve) => {
    const call = client.makeUnaryRequest(path, raw.serialize, raw.deserialize, body,
      new grpc.Metadata(), { deadline: Date.now() + 10000 }, (err, response) => {
        client.close();
        resolve({ code: err ? err.code : 0, details: err?.details, metadata: err?.metadata, response });
      });
    call.on('status', () => {});
  });
}

const normalize = (x) => ({ ...x, span: { ...x.span, status: x.span.status ?? { message: '', code: 0 } } });

describe('OTLP/gRPC in and out, over h2c', () => {
  let sink;
  let hs;
  let grpcPort;
  let httpPort;
  let adminPort;
  let viaHotspan = 0;

  before(async () => {
    sink = await startGrpcSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
      grpc: {endpoint: 127.0.0.1:0, max_request_body_size: 1MiB}
processors:
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp:
    protocol: grpc
    endpoint: 127.0.0.1:${sink.port}
    tls: {insecure: true}
    compression: gzip
    headers: {X-Scope-OrgID: tenant-g}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`, { waitFor: ['otlp', 'otlp/grpc', 'admin'] });
    grpcPort = hs.ports['otlp/grpc'];
    httpPort = hs.ports.otlp;
    adminPort = hs.ports.admin;
    assert.ok(grpcPort && httpPort && grpcPort !== httpPort, JSON.stringify(hs.ports));
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
  });

  async function roundtrip(tag, compression) {
    const { spans } = makeSpans({ traces: 4, childrenPerTrace: 3, tag });
    const ids = new Set(spans.map((s) => s.spanContext().spanId));
    await exportGrpc(spans, { url: `http://127.0.0.1:${grpcPort}`, compression });
    viaHotspan += spans.length;
    await exportGrpc(spans, { url: `http://127.0.0.1:${sink.port}`, headers: { 'x-direct': tag } });
    const through = () => sink.spans((m) => !m['x-direct']).filter((s) => ids.has(s.span.spanId));
    await waitFor(() => through().length >= spans.length, 10000,
      () => `${tag}: ${through().length}/${spans.length} spans arrived through hotspan`);
    const twins = new Map(sink.spans((m) => m['x-direct'] === tag).map((s) => [s.span.spanId, s]));
    const got = through();
    assert.equal(got.length, spans.length, 'each span arrived exactly once');
    for (const s of got)
      assert.deepEqual(normalize(s), normalize(twins.get(s.span.spanId)), `span ${s.span.name} differs`);
    // the exporter's metadata reached the sink as gRPC metadata
    const req = sink.requests.find((r) => !r.metadata['x-direct'] && r.spans.some((s) => ids.has(s.span.spanId)));
    assert.equal(req.metadata['x-scope-orgid'], 'tenant-g');
  }

  it('SDK gRPC exporter → hotspan → gRPC sink: spans arrive identical', async () => {
    await roundtrip('grpc-plain', 'none');
  });

  it('gzip both ways: a gzipped SDK request, a gzipped export', async () => {
    await roundtrip('grpc-gzip', 'gzip');
  });

  it('raw grpc-js client: OK with an empty ExportTraceServiceResponse, gzip or not', async () => {
    for (const gzip of [false, true]) {
      const spans = [otlp.makeSpan({ name: `raw-${gzip}` })];
      const r = await rawCall(grpcPort, otlp.encodeRequest(spans), { gzip });
      assert.equal(r.code, 0, r.details);
      assert.equal(otlp.ExportTraceServiceResponse.decode(r.response).partialSuccess, null);
      viaHotspan += 1;
      await waitFor(() => sink.spans().some((s) => s.span.name === `raw-${gzip}`), 10000, () => `raw-${gzip}`);
    }
  });

  it('a zero span id is a partial success, not an error', async () => {
    const good = otlp.makeSpan({ name: 'ps-good' });
    const bad = otlp.makeSpan({ name: 'ps-bad', spanId: '0'.repeat(16) });
    const r = await rawCall(grpcPort, otlp.encodeRequest([good, bad]));
    assert.equal(r.code, 0, r.details);
    const ps = otlp.ExportTraceServiceResponse.decode(r.response).partialSuccess;
    assert.equal(Number(ps.rejectedSpans), 1);
    viaHotspan += 1;
  });

  it('bad messages are INVALID_ARGUMENT, other methods UNIMPLEMENTED', async () => {
    const r = await rawCall(grpcPort, Buffer.from([0x0a, 0xff, 0xff, 0x01]));
    assert.equal(r.code, grpc.status.INVALID_ARGUMENT);
    assert.ok(r.details.length > 0);
    const u = await rawCall(grpcPort, Buffer.alloc(0), {
      path: '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export' });
    assert.equal(u.code, grpc.status.UNIMPLEMENTED);
    // over max_request_body_size (1 MiB): RESOURCE_EXHAUSTED
    const big = otlp.encodeRequest([otlp.makeSpan({ name: 'x'.repeat(1100000) })]);
    const b = await rawCall(grpcPort, big);
    assert.equal(b.code, grpc.status.RESOURCE_EXHAUSTED);
  });

  it('HTTP/1.1 to the gRPC port is refused clearly', async () => {
    const r = await request({ port: grpcPort, body: 'x', headers: { 'content-type': 'application/grpc' } });
    assert.equal(r.status, 426);
    assert.match(r.body.toString(), /HTTP\/2/);
  });

  it('curl --http2-prior-knowledge reaches the OTLP/HTTP endpoint', async () => {
    const body = otlp.encodeRequest([otlp.makeSpan({ name: 'curl-h2' })]);
    const out = await new Promise((res, rej) => {
      const p = execFile('curl', ['-sS', '--http2-prior-knowledge', '-o', '/dev/null', '-w',
        '%{http_version} %{http_code}', '-H', 'content-type: application/x-protobuf',
        '--data-binary', '@-', `http://127.0.0.1:${httpPort}/v1/traces`],
      (err, stdout) => (err ? rej(err) : res(stdout)));
      p.stdin.end(body);
    });
    assert.equal(out, '2 200');
    viaHotspan += 1;
    await waitFor(() => sink.spans().some((s) => s.span.name === 'curl-h2'), 10000, () => 'curl-h2');
  });

  it('counters agree: accepted over gRPC and sent', async () => {
    await waitFor(() => sink.spans((m) => !m['x-direct']).length >= viaHotspan, 10000,
      () => `${sink.spans((m) => !m['x-direct']).length}/${viaHotspan}`);
    const m = await fetchMetrics(adminPort);
    const grpcAccepted = Object.entries(m).filter(([k]) =>
      /accepted_spans_total\{/.test(k) && k.includes('transport="grpc"')).reduce((a, [, v]) => a + v, 0);
    assert.equal(grpcAccepted, viaHotspan - 1, 'all but the curl span came over gRPC');
    assert.equal(sink.spans((m2) => !m2['x-direct']).length, viaHotspan);
  });
});
