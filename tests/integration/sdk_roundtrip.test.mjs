// The real OpenTelemetry JS SDK exports the same spans twice: once through hotspan (OTLP
// protobuf, OTLP JSON, gzip) and once straight to the sink. Every span that reaches the sink
// through hotspan must deep-equal its direct twin (ids, attributes of every type, events,
// links, status, kind, resource, scope), arrive exactly once, and the counters must agree.
// A hand-made request's unknown Span fields must reach the sink byte for byte.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import { makeSpans, exportSpans } from './lib/sdk.mjs';
import { postProto, request } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';

// proto3: an absent sub-message equals an empty one; toObject gives null for the former.
function normalize(x) {
  const span = { ...x.span, status: x.span.status ?? { message: '', code: 0 } };
  const emptyRes = { attributes: [], entityRefs: [], droppedAttributesCount: 0 };
  const emptyScope = { attributes: [], name: '', version: '', droppedAttributesCount: 0 };
  return {
    resource: x.resource ?? emptyRes,
    resourceSchemaUrl: x.resourceSchemaUrl,
    scope: x.scope ?? emptyScope,
    scopeSchemaUrl: x.scopeSchemaUrl,
    span,
  };
}

const bySpanId = (list) => {
  const m = new Map();
  for (const s of list) {
    const id = s.span.spanId;
    m.set(id, [...(m.get(id) || []), s]);
  }
  return m;
};

describe('OpenTelemetry JS SDK → hotspan → sink', () => {
  let sink;
  let hs;
  let sentToHotspan = 0; // spans whose request hotspan answered 200

  before(async () => {
    sink = await startSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
        max_request_body_size: 4MiB
processors:
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
    compression: gzip
    headers: {X-Scope-OrgID: tenant-a}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
  });

  // Sends `spans` through hotspan with `encoding` and straight to the sink under `direct`;
  // checks the twins.
  async function roundtrip({ encoding, compression = 'none', tag }) {
    const { spans } = makeSpans({ traces: 5, childrenPerTrace: 4, tag });
    const direct = `/direct/${tag}/v1/traces`;
    await exportSpans(spans, { url: `http://127.0.0.1:${hs.ports.otlp}/v1/traces`, encoding, compression });
    sentToHotspan += spans.length;
    await exportSpans(spans, { url: `${sink.url}${direct}`, encoding });

    const ids = new Set(spans.map((s) => s.spanContext().spanId));
    assert.equal(ids.size, spans.length, 'the SDK made distinct span ids');
    const viaHotspan = () => sink.spans().filter((s) => ids.has(s.span.spanId));
    await sink.waitFor(() => viaHotspan().length >= spans.length, 10000,
      () => `${encoding}: ${viaHotspan().length}/${spans.length} spans arrived through hotspan`);

    const twins = bySpanId(sink.spans(direct));
    const got = bySpanId(viaHotspan());
    assert.equal(twins.size, spans.length, 'direct export delivered every span');
    assert.equal(got.size, spans.length, 'every span arrived through hotspan');
    for (const [id, list] of got) {
      assert.equal(list.length, 1, `span ${id} arrived ${list.length} times through hotspan`);
      const twin = twins.get(id);
      assert.ok(twin, `span ${id} has a direct twin`);
      assert.deepEqual(normalize(list[0]), normalize(twin[0]),
        `span ${id} (${twin[0].span.name}) through hotspan differs from its direct twin`);
    }
    // The content covers what it claims to: every kind, error status, events, links, nesting.
    const all = [...got.values()].map((l) => l[0].span);
    assert.deepEqual(new Set(all.map((s) => s.kind)), new Set([1, 2, 3, 4, 5]));
    assert.ok(all.some((s) => s.status?.code === 2 && s.status.message.startsWith('query failed')));
    assert.ok(all.some((s) => s.events.length >= 2 && s.events[0].attributes.length === 4));
    assert.ok(all.some((s) => s.links.length === 1 && s.links[0].attributes.length === 2));
    assert.ok(all.some((s) => s.parentSpanId && ids.has(s.parentSpanId) &&
      all.find((p) => p.spanId === s.parentSpanId)?.parentSpanId));
  }

  it('protobuf exporter: every span equals its direct twin', async () => {
    await roundtrip({ encoding: 'proto', tag: 'proto' });
  });

  it('JSON exporter: every span equals its direct twin', async () => {
    await roundtrip({ encoding: 'json', tag: 'json' });
  });

  it('gzip-compressed protobuf exporter: every span equals its direct twin', async () => {
    await roundtrip({ encoding: 'proto', compression: 'gzip', tag: 'gzip' });
  });

  it('forwards with the configured compression, headers and content type', () => {
    const reqs = sink.accepted('/v1/traces');
    assert.ok(reqs.length > 0);
    for (const r of reqs) {
      assert.equal(r.method, 'POST');
      assert.equal(r.headers['content-type'], 'application/x-protobuf');
      assert.equal(r.headers['content-encoding'], 'gzip');
      assert.equal(r.headers['x-scope-orgid'], 'tenant-a');
      assert.equal(r.decodeError, null);
    }
  });

  it('unknown fields inside a Span reach the sink byte for byte', async () => {
    const span = otlp.makeSpan({ name: 'with-unknown-fields' });
    const unknown = otlp.unknownFieldBytes('hotspan-it-unknown-0123456789');
    const body = otlp.wrapSpanBytes([otlp.encodeSpanBytes(span, unknown),
      otlp.encodeSpanBytes(otlp.makeSpan({ name: 'plain-neighbour' }))]);
    const res = await postProto(hs.ports.otlp, body);
    assert.equal(res.status, 200, `hand-made request answered ${res.status}: ${res.body}`);
    sentToHotspan += 2;
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === span.spanId), 10000,
      () => 'the span with unknown fields did not arrive');
    const rec = sink.accepted().find((r) => r.decoded &&
      otlp.flattenSpans(r.decoded).some((s) => s.span.spanId === span.spanId));
    assert.ok(rec.body.includes(unknown),
      `the gunzipped body at the sink lacks the unknown-field bytes ${unknown.toString('hex')}`);
    const got = otlp.flattenSpans(rec.decoded).find((s) => s.span.spanId === span.spanId);
    assert.equal(got.span.name, 'with-unknown-fields');
  });

  it('hand-made OTLP/JSON (every value form, escapes, unknown keys) arrives as protobufjs reads it', async () => {
    // Each case is one span; the expected reading is protobufjs's fromObject of the same JSON
    // (with hex ids), so hotspan's JSON→protobuf conversion is checked field by field.
    const cases = {
      upperHexIds: { traceId: otlp.hexId(16).toUpperCase(), spanId: otlp.hexId(8).toUpperCase(), parentSpanId: '1111111111111111' },
      bytesValue: { attributes: [{ key: 'b', value: { bytesValue: Buffer.from([0, 1, 2, 255]).toString('base64') } }] },
      kvlistNested: { attributes: [{ key: 'k', value: { kvlistValue: { values: [
        { key: 'x', value: { intValue: '5' } },
        { key: 'y', value: { arrayValue: { values: [{ boolValue: true }, { kvlistValue: { values: [] } }, { arrayValue: { values: [] } }] } } }] } } }] },
      int64AsNumber: { attributes: [{ key: 'n', value: { intValue: 42 } }], startTimeUnixNano: 1700000000000000000 },
      int64Min: { attributes: [{ key: 'n', value: { intValue: '-9223372036854775808' } }, { key: 'm', value: { intValue: '9223372036854775807' } }] },
      doubleSpecial: { attributes: [{ key: 'nan', value: { doubleValue: 'NaN' } }, { key: 'inf', value: { doubleValue: 'Infinity' } },
        { key: 'ninf', value: { doubleValue: '-Infinity' } }, { key: 'int', value: { doubleValue: 3 } }, { key: 'neg0', value: { doubleValue: -0.0 } }] },
      unknownKeys: { fooBar: { a: [1, 2, { b: null }] }, attributes: [{ key: 'a', value: { stringValue: 'x' }, extra: 1 }] },
      emptyValues: { attributes: [{ key: 'e', value: {} }, { key: 'e2' }, { key: 's', value: { stringValue: '' } }, { key: 'z', value: { intValue: '0' } }] },
      escapes: { name: 'q"b\\s/\n\t\u0001é😀', attributes: [{ key: '☃', value: { stringValue: '\ud83d\ude00 \u2028' } }] },
      nulInString: { name: 'nul\u0000inside', attributes: [{ key: 'k', value: { stringValue: 'a\u0000b' } }] },
      flagsStatusKind: { flags: 769, status: { code: 2, message: 'bad' }, kind: 5, traceState: 'a=b,c=d' },
      eventsAndCounts: { events: [{ timeUnixNano: '1700000000000000001', name: 'e', attributes: [{ key: 'q', value: { doubleValue: 1.5 } }],
        droppedAttributesCount: 3 }], droppedEventsCount: 2, droppedLinksCount: 1, droppedAttributesCount: 7 },
      links: { links: [{ traceId: '0102030405060708090a0b0c0d0e0f10', spanId: '0102030405060708', traceState: 'x=y', flags: 1,
        attributes: [{ key: 'l', value: { stringValue: 'v' } }], droppedAttributesCount: 1 }] },
      nulls: { traceState: null, events: null, status: null },
    };
    const spans = Object.entries(cases).map(([name, over]) => ({ ...otlp.makeSpan({ name }), ...over }));
    const json = JSON.stringify({ resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'json-hand' } }], droppedAttributesCount: 1 },
      schemaUrl: 'https://opentelemetry.io/schemas/1.26.0',
      scopeSpans: [{ scope: { name: 'sc', version: '1', attributes: [{ key: 'sa', value: { stringValue: 'v' } }], droppedAttributesCount: 2 },
        schemaUrl: 'https://opentelemetry.io/schemas/1.27.0', spans }] }] });
    const expected = new Map(otlp.flattenSpans(otlp.decodeTraceRequestJson(json)).map((x) => [x.span.spanId, x]));
    const res = await request({ port: hs.ports.otlp, body: json, headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 200, `hand-made JSON answered ${res.status}: ${res.body}`);
    sentToHotspan += spans.length;
    const arrived = () => sink.spans().filter((x) => expected.has(x.span.spanId));
    await sink.waitFor(() => arrived().length >= spans.length, 10000,
      () => `${arrived().length}/${spans.length} hand-made JSON spans arrived`);
    for (const got of arrived()) {
      const want = expected.get(got.span.spanId);
      assert.deepEqual(normalize(got), normalize(want), `JSON case "${want.span.name}"`);
    }
  });

  it('N sent = N received, no span id twice, counters agree', async () => {
    await sink.waitFor(() => sink.spans().length >= sentToHotspan, 10000,
      () => `${sink.spans().length}/${sentToHotspan} spans at the sink`);
    const all = sink.spans();
    assert.equal(all.length, sentToHotspan, 'spans at the sink through hotspan');
    const seen = new Set();
    for (const s of all) {
      assert.ok(!seen.has(s.span.spanId), `span id ${s.span.spanId} arrived twice`);
      seen.add(s.span.spanId);
    }
    // The sent counter moves when the sink's answer is processed: allow a moment.
    const want = { accepted: sentToHotspan, sent: sentToHotspan };
    let m;
    const deadline = Date.now() + 5000;
    for (;;) {
      m = await fetchMetrics(hs.ports.admin);
      const sent = metric(m, 'hotspan_exporter_sent_spans_total', { exporter: 'otlp' });
      if (sent === want.sent || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(metric(m, 'hotspan_receiver_accepted_spans_total', { receiver: 'otlp', transport: 'http' }),
      want.accepted, 'hotspan_receiver_accepted_spans_total{receiver="otlp",transport="http"}');
    assert.equal(metric(m, 'hotspan_receiver_refused_spans_total', { receiver: 'otlp', transport: 'http' }) ?? 0,
      0, 'hotspan_receiver_refused_spans_total{receiver="otlp",transport="http"}');
    assert.equal(metric(m, 'hotspan_exporter_sent_spans_total', { exporter: 'otlp' }),
      want.sent, 'hotspan_exporter_sent_spans_total{exporter="otlp"}');
    assert.equal(metric(m, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' }) ?? 0,
      0, 'hotspan_exporter_send_failed_spans_total{exporter="otlp"}');
  });
});
