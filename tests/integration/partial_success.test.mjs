// Partial success (wire.md §2): spans whose trace_id or span_id is empty or all zero are invalid
// per the OTLP spec. hotspan answers 200 with partial_success.rejected_spans (in the request's
// encoding), forwards the valid spans of the same request, and counts the rejected ones.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { request, postProto } from './lib/http.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import * as otlp from './lib/otlp.mjs';

describe('partial success for spans with invalid ids', () => {
  let sink;
  let hs;
  before(async () => {
    sink = await startSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}, compression: none}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
`);
  });
  after(async () => {
    const r = await hs.stop();
    await sink.stop();
    assert.equal(r.code, 0);
  });

  const zeroTrace = () => otlp.makeSpan({ traceId: '00'.repeat(16) });
  const noSpanId = () => otlp.makeSpan({ spanId: '' });

  it('protobuf: 200, rejected_spans = 2, the valid spans arrive and only they', async () => {
    const good = [otlp.makeSpan(), otlp.makeSpan()];
    const body = otlp.encodeRequest([good[0], zeroTrace(), noSpanId(), good[1]]);
    const res = await postProto(hs.ports.otlp, body);
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/x-protobuf/);
    const resp = otlp.ExportTraceServiceResponse.decode(res.body);
    assert.equal(Number(resp.partialSuccess.rejectedSpans), 2);
    assert.match(resp.partialSuccess.errorMessage, /2 spans rejected: trace_id and span_id/);
    const got = await sink.waitForSpans(2, 5000);
    assert.deepEqual(got.map((s) => s.span.spanId).sort(), good.map((s) => s.spanId).sort());
  });

  it('JSON: partialSuccess with rejectedSpans as a string; all rejected still answers 200', async () => {
    const before = sink.spans().length;
    const res = await request({ port: hs.ports.otlp, body: otlp.encodeRequestJson([zeroTrace()]),
      headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body.toString()), { partialSuccess: {
      rejectedSpans: '1', errorMessage: '1 spans rejected: trace_id and span_id must be set and not all zero' } });
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_receiver_rejected_spans_total', { receiver: 'otlp', transport: 'http' }), 3);
    assert.equal(metric(m, 'hotspan_receiver_accepted_spans_total', { receiver: 'otlp', transport: 'http' }), 2);
    assert.equal(sink.spans().length, before, 'nothing forwarded for an all-invalid request');
  });
});
