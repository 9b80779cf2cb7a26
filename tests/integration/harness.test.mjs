// The test harness checked on its own (no hotspan): the sink decodes what the real SDK
// exporters send (protobuf, JSON, gzip) into identical objects, answers as scripted, goes down
// and comes back on the same port; the hand-made request builder and the Prometheus parser work.
// If these fail, the other files' verdicts about hotspan mean nothing.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { startSink } from './lib/sink.mjs';
import { makeSpans, exportSpans } from './lib/sdk.mjs';
import { parsePrometheus, metric } from './lib/metrics.mjs';
import { parseLogLine } from './lib/hotspan.mjs';
import { postProto, request } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';

const strip = (list) => list.map(({ request: _r, ...x }) => x);

describe('harness', () => {
  let sink;
  after(async () => { if (sink) await sink.stop(); });

  it('the sink decodes SDK protobuf, JSON and gzip exports to the same objects', async () => {
    sink = await startSink();
    const { spans } = makeSpans({ traces: 2, childrenPerTrace: 3 });
    await exportSpans(spans, { url: `${sink.url}/p/v1/traces`, encoding: 'proto' });
    await exportSpans(spans, { url: `${sink.url}/j/v1/traces`, encoding: 'json' });
    await exportSpans(spans, { url: `${sink.url}/g/v1/traces`, encoding: 'proto', compression: 'gzip' });
    const p = sink.spans('/p/v1/traces');
    assert.equal(p.length, spans.length);
    assert.deepEqual(strip(sink.spans('/j/v1/traces')), strip(p));
    assert.deepEqual(strip(sink.spans('/g/v1/traces')), strip(p));
    const root = p.find((s) => s.span.kind === 2 && s.span.links.length === 1);
    assert.ok(root, 'a server span with a link');
    const attrs = Object.fromEntries(root.span.attributes.map((a) => [a.key, a.value]));
    assert.deepEqual(attrs['it.ints'], { arrayValue: { values: ['1', '2', '3', '1'].map((v) => ({ intValue: v })) } });
    assert.deepEqual(attrs['it.bool'], { boolValue: false });
    assert.deepEqual(attrs['it.double'], { doubleValue: 4.25 });
    assert.match(root.span.traceId, /^[0-9a-f]{32}$/);
    assert.match(root.span.spanId, /^[0-9a-f]{16}$/);
    assert.equal(root.resource.attributes[0].key, 'service.name');
  });

  it('the sink scripts answers, goes down and comes back on the same port', async () => {
    const body = otlp.encodeRequest([otlp.makeSpan()]);
    sink.respondWith({ status: 503, headers: { 'retry-after': '1' } }, 2);
    assert.equal((await postProto(sink.port, body)).status, 503);
    const r2 = await postProto(sink.port, body);
    assert.equal(r2.status, 503);
    assert.equal(r2.headers['retry-after'], '1');
    assert.equal((await postProto(sink.port, body)).status, 200);
    const port = sink.port;
    await sink.down();
    await assert.rejects(postProto(port, body), /ECONNREFUSED/);
    await sink.up();
    assert.equal(sink.port, port);
    assert.equal((await postProto(port, body)).status, 200);
    assert.equal(sink.accepted().length, 2, 'only 2xx answers count as accepted');
  });

  it('hand-made requests keep unknown fields and gzip bodies are recorded gunzipped', async () => {
    const span = otlp.makeSpan();
    const unknown = otlp.unknownFieldBytes();
    const body = otlp.wrapSpanBytes([otlp.encodeSpanBytes(span, unknown)]);
    const dec = otlp.flattenSpans(otlp.decodeTraceRequest(body));
    assert.equal(dec.length, 1);
    assert.equal(dec[0].span.spanId, span.spanId);
    assert.equal(dec[0].resource.attributes[0].value.stringValue, 'it-service');
    const res = await postProto(sink.port, gzipSync(body), { 'content-encoding': 'gzip' }, '/u/v1/traces');
    assert.equal(res.status, 200);
    const rec = sink.accepted('/u/v1/traces')[0];
    assert.ok(rec.body.includes(unknown));
    const json = otlp.decodeTraceRequestJson(otlp.encodeRequestJson([span]));
    assert.equal(otlp.flattenSpans(json)[0].span.spanId, span.spanId);
    const st = otlp.RpcStatus.encode(otlp.RpcStatus.fromObject({ code: 3, message: 'bad' })).finish();
    assert.equal(otlp.decodeRpcStatus(st).message, 'bad');
    const bad = await request({ port: sink.port, body: 'x', headers: { 'content-type': 'text/plain' } });
    assert.equal(bad.status, 400);
  });

  it('parses Prometheus text and log lines', () => {
    const m = parsePrometheus([
      '# HELP hotspan_receiver_accepted_spans_total spans accepted',
      '# TYPE hotspan_receiver_accepted_spans_total counter',
      'hotspan_receiver_accepted_spans_total{transport="http",receiver="otlp"} 42',
      'hotspan_exporter_queue_size{exporter="otlp"} 0',
      'hotspan_dropped_total{reason="a \\"quoted\\" one",component="batch"} 3 1700000000000',
      'process_resident_memory_bytes 1.5e+06',
      '',
    ].join('\n'));
    assert.equal(m['hotspan_receiver_accepted_spans_total{receiver="otlp",transport="http"}'], 42);
    assert.equal(metric(m, 'hotspan_exporter_queue_size', { exporter: 'otlp' }), 0);
    assert.equal(metric(m, 'hotspan_dropped_total', { component: 'batch', reason: 'a \\"quoted\\" one' }), 3);
    assert.equal(m.process_resident_memory_bytes, 1500000);
    const l = parseLogLine('ts=2026-11-23T07:00:00.000Z level=info component=otlp/2 msg="listening on 127.0.0.1:43121"');
    assert.deepEqual(l, { ts: '2026-11-23T07:00:00.000Z', level: 'info', component: 'otlp/2', msg: 'listening on 127.0.0.1:43121' });
  });
});
