// OTLP profiles through hotspan (issue 19): the otlp receiver takes them over OTLP/HTTP
// (protobuf, JSON) and OTLP/gRPC, the correlator joins them to spans by the links their samples
// carry, and they go on to an OTLP backend over HTTP and gRPC and to Pyroscope's push API.
//  a) real spans from the OpenTelemetry JS SDK (its OTLP/HTTP protobuf exporter) and a profile,
//     encoded by protobufjs from the published .proto files (lib/otlp_profiles.mjs, not our
//     code), whose samples link to those spans by trace and span id: every slow span gets
//     profile.match=span and, first in profile.top_functions, the function its samples ran;
//     fast spans get nothing;
//  b) the OTLP sinks (otlp_http: HTTP; otlp_grpc: gRPC) receive each request byte for byte as
//     it was sent in (protobuf over HTTP or gRPC), a JSON request as the protobuf it denotes;
//  c) the Pyroscope sink receives one push series per profile and service: pprof whose totals,
//     functions and span values equal the source's, labelled as Pyroscope's OTLP ingestion does;
//  d) bad input (a dictionary index past its table, out-of-range link, stack and location
//     references, an attribute index, an oversized table) is a 400 / INVALID_ARGUMENT whose
//     message names the field and index, over HTTP protobuf, HTTP JSON and gRPC, while a good
//     client sending all along gets 200 for every request and loses nothing;
//  e) the receiver's metrics count the Profile messages it accepted, per transport;
//  f) backpressure: a full profiles queue is 503 + Retry-After / UNAVAILABLE (not spans: the
//     exporter's spans have their own queue), and what was answered 200 arrives exactly once.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import grpc from '@grpc/grpc-js';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startGrpcProfilesSink, PROFILES_EXPORT, raw } from './lib/grpc_sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { summarizePprof } from './lib/pprof.mjs';
import { makeProvider, exportSpans } from './lib/sdk.mjs';
import { request } from './lib/http.mjs';
import { decodeRpcStatus } from './lib/otlp.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import { waitFor } from './lib/wait.mjs';
import {
  buildProfilesRequest, encodeProfilesObject, encodeProfilesObjectJson, decodeProfilesRequest,
  expectedPprof,
} from './lib/otlp_profiles.mjs';

const PATH = '/v1development/profiles';
const THRESHOLD_MS = 200;
// the function each slow span's samples ran in (the leaf of its stacks)
const FNS = ['CartService.priceItems', 'TaxClient.lookupRates', 'InventoryRepo.reserve',
  'CouponEngine.apply', 'ShippingQuote.fetch', 'FraudCheck.score'];

const attrs = (list) => Object.fromEntries((list || []).map((kv) => [kv.key, kvValue(kv.value)]));
function kvValue(v) {
  if (!v) return undefined;
  if (v.stringValue !== undefined && v.stringValue !== null) return v.stringValue;
  if (v.boolValue !== undefined && v.boolValue !== null) return v.boolValue;
  if (v.intValue !== undefined && v.intValue !== null) return Number(v.intValue);
  if (v.arrayValue) return v.arrayValue.values.map(kvValue);
  return v.doubleValue;
}

/** POST to the receiver's profiles path. */
const post = (port, body, json = false) => request({ port, path: PATH, body,
  headers: { 'content-type': json ? 'application/json' : 'application/x-protobuf' } });

/** One unary ProfilesService/Export call; resolves {code, details}. */
function grpcExport(port, body) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(PROFILES_EXPORT, raw.serialize, raw.deserialize, body,
      new grpc.Metadata(), { deadline: Date.now() + 10000 }, (err) => {
        client.close();
        resolve({ code: err ? err.code : 0, details: err?.details });
      });
  });
}

/** A profile description (lib/otlp_profiles.mjs) of `service`, cpu sampled every 10 ms. */
const cpuProfile = (samples, startMs) => ({
  sampleType: ['samples', 'count'], periodType: ['cpu', 'nanoseconds'], period: 10000000,
  timeNanos: BigInt(startMs) * 1000000n, durationNanos: 40000000000n, samples,
});

describe('OTLP profiles: received, joined to OTel JS spans, sent on to OTLP and Pyroscope', () => {
  let sink;      // OTLP/HTTP backend (spans and profiles)
  let gsink;     // OTLP/gRPC backend (profiles)
  let psink;     // Pyroscope push API
  let hs;
  let httpPort;
  let grpcPort;
  const sent = []; // {via, body (protobuf sent, or the protobuf a JSON body denotes), desc}
  let spans;       // as the sink received them
  let slow;        // [{spanId, traceId, fn}]

  before(async () => {
    sink = await startSink();
    gsink = await startGrpcProfilesSink();
    psink = await startPyroscopeSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
      grpc: {endpoint: 127.0.0.1:0}
    profiles: {max_table_entries: 2000}
processors:
  correlator:
    slow: {threshold: ${THRESHOLD_MS}ms}
    max_wait: 20s
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:${sink.port}
  otlp_grpc:
    endpoint: 127.0.0.1:${gsink.port}
    tls: {insecure: true}
  pyroscope:
    endpoint: http://127.0.0.1:${psink.port}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], processors: [correlator], exporters: [otlp_http]}
    profiles: {receivers: [otlp], processors: [correlator], exporters: [otlp_http, otlp_grpc, pyroscope]}
`, { waitFor: ['otlp', 'otlp/grpc', 'admin'] }); httpPort = hs.ports.otlp;
    grpcPort = hs.ports['otlp/grpc'];

    // real spans, made by the OTel JS SDK: slow ones (400 ms) and fast ones (20 ms), in the past
    const base = Date.now() - 30000;
    const { provider, memory } = makeProvider({ service: 'checkout' });
    const tracer = provider.getTracer('it.checkout', '1.0.0');
    for (let i = 0; i < FNS.length; i += 1) {
      const t0 = base + i * 1000;
      tracer.startSpan(`POST /cart/${i}`, { startTime: t0 }).end(t0 + 400);
      tracer.startSpan(`GET /health/${i}`, { startTime: t0 + 500 }).end(t0 + 520);
    }
    const made = memory.getFinishedSpans();
    slow = made.filter((s) => s.name.startsWith('POST')).map((s, i) => ({
      spanId: s.spanContext().spanId, traceId: s.spanContext().traceId, fn: FNS[i],
    }));

    // their profile: each slow span's samples linked to it, in its own function; plus samples
    // of no span, and a second service in the same request
    const checkout = cpuProfile([
      ...slow.map((s, i) => ({ stack: ['main', 'http.Server.serve', 'CartHandler.post', s.fn],
        value: 20 + i, link: { traceId: s.traceId, spanId: s.spanId } })),
      ...slow.map((s, i) => ({ stack: ['main', 'http.Server.serve', 'CartHandler.post'],
        value: 2, link: { traceId: s.traceId, spanId: s.spanId }, attributes: { 'thread.name': `w${i}` } })),
      { stack: ['main', 'runtime.gcBgMarkWorker'], value: 7 },
    ], base - 5000);
    const inventory = cpuProfile([
      { stack: ['main', 'Inventory.scan'], value: 11 }, { stack: ['main', 'Inventory.scan', 'db.query'], value: 4 },
    ], base - 5000);
    const desc1 = { resources: [
      { attributes: { 'service.name': 'checkout', 'deployment.environment.name': 'it', 'host.name': 'box-1' },
        scopes: [{ name: 'otel-ebpf', attributes: { 'profiler.mode': 'cpu' }, profiles: [checkout] }] },
      { attributes: { 'service.name': 'inventory' }, scopes: [{ profiles: [inventory] }] },
    ] };
    const r1 = encodeProfilesObject(buildProfilesRequest(desc1));
    let res = await post(httpPort, r1);
    assert.equal(res.status, 200, `profiles over HTTP: ${res.body}`);
    assert.equal(res.headers['content-type'], 'application/x-protobuf');
    assert.equal(res.body.length, 0, 'an empty ExportProfilesServiceResponse: no partial success');
    sent.push({ via: 'http', body: r1, desc: desc1 });

    // the spans, through the SDK's own OTLP/HTTP protobuf exporter
    await exportSpans(made, { url: `http://127.0.0.1:${httpPort}/v1/traces` });

    // more profiles: over gRPC, and as OTLP/JSON
    const desc2 = { resources: [{ attributes: { 'service.name': 'payments', 'process.executable.name': 'pay' },
      scopes: [{ profiles: [cpuProfile([{ stack: ['main', 'Ledger.post'], value: 9 }], base)] }] }] };
    const r2 = encodeProfilesObject(buildProfilesRequest(desc2));
    const g = await grpcExport(grpcPort, r2);
    assert.equal(g.code, 0, `profiles over gRPC: ${g.details}`);
    sent.push({ via: 'grpc', body: r2, desc: desc2 });
    const desc3 = { resources: [{ attributes: { 'service.name': 'search' },
      scopes: [{ profiles: [cpuProfile([{ stack: ['main', 'Index.lookup'], value: 5 },
        { stack: ['main', 'Index.lookup', 'Index.score'], value: 6 }], base)] }] }] };
    const obj3 = buildProfilesRequest(desc3);
    res = await post(httpPort, encodeProfilesObjectJson(obj3), true);
    assert.equal(res.status, 200, `profiles as JSON: ${res.body}`);
    assert.equal(res.body.toString(), '{}');
    sent.push({ via: 'json', body: encodeProfilesObject(obj3), desc: desc3 });

    spans = await sink.waitForSpans(made.length, 30000);
    await sink.waitFor(() => sink.accepted(PATH).length >= 3, 10000, () => 'three profiles requests');
    const nprofiles = sent.reduce((n, x) => n + x.desc.resources.length, 0); // one profile each
    await psink.waitFor(() => psink.profiles('push').length >= nprofiles, 10000,
      () => `${nprofiles} push series, have ${psink.profiles('push').length}`);
    await waitFor(() => gsink.requests.length >= sent.length, 10000, () => 'every request at the gRPC sink');
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
    if (gsink) await gsink.stop();
    if (psink) await psink.stop();
  });

  it('every slow span whose samples are linked: profile.match=span, its own function first', () => {
    assert.equal(slow.length, FNS.length);
    for (const s of slow) {
      const got = spans.find((x) => x.span.spanId === s.spanId);
      assert.ok(got, `slow span ${s.spanId} reached the sink`);
      const a = attrs(got.span.attributes);
      const show = JSON.stringify(Object.fromEntries(Object.entries(a)
        .filter(([k]) => k.startsWith('profile.') || k.startsWith('hotspan.') || k.startsWith('pyroscope.'))));
      assert.equal(a['hotspan.slow'], true, `hotspan.slow: ${show}`);
      assert.equal(a['profile.match'], 'span', `profile.match: ${show}`);
      assert.equal(a['pyroscope.profile.id'], s.spanId, `pyroscope.profile.id: ${show}`);
      const top = a['profile.top_functions'];
      assert.ok(Array.isArray(top) && top.length > 0, `profile.top_functions: ${show}`);
      assert.ok(top[0].startsWith(`${s.fn} `), `${s.fn} first in profile.top_functions: ${show}`);
      for (const other of FNS.filter((f) => f !== s.fn)) {
        assert.ok(!top.some((f) => f.startsWith(`${other} `)), `no other span's function: ${show}`);
      }
    }
  });

  it('fast spans carry no profile.* or hotspan.* attribute', () => {
    const fast = spans.filter((x) => x.span.name.startsWith('GET /health'));
    assert.equal(fast.length, FNS.length);
    for (const x of fast) {
      const keys = Object.keys(attrs(x.span.attributes));
      assert.deepEqual(keys.filter((k) => k.startsWith('profile.') || k.startsWith('hotspan.')), []);
    }
  });

  it('the OTLP/HTTP sink receives each request as sent: the same bytes (JSON: the protobuf it denotes)', () => {
    const got = sink.accepted(PATH);
    assert.equal(got.length, sent.length);
    for (const r of got) {
      assert.equal(r.headers['content-type'], 'application/x-protobuf');
      assert.equal(r.headers['content-encoding'], 'gzip');
    }
    for (const s of sent) {
      if (s.via === 'json') {
        // protobuf-c and protobufjs may order nothing differently here, but the claim is the
        // request's content: compare what each decodes to
        const want = decodeProfilesRequest(s.body);
        assert.ok(got.some((r) => JSON.stringify(decodeProfilesRequest(r.body)) === JSON.stringify(want)),
          'the JSON request arrived as the protobuf it denotes');
      } else {
        assert.ok(got.some((r) => r.body.equals(s.body)), `the ${s.via} request arrived byte for byte`);
      }
    }
  });

  it('the OTLP/gRPC sink receives the same requests over ProfilesService/Export', () => {
    assert.equal(gsink.requests.length, sent.length);
    for (const s of sent.filter((x) => x.via !== 'json')) {
      assert.ok(gsink.requests.some((r) => r.body.equals(s.body)), `the ${s.via} request, byte for byte`);
    }
    const json = sent.find((x) => x.via === 'json');
    assert.ok(gsink.requests.some((r) => JSON.stringify(decodeProfilesRequest(r.body)) ===
      JSON.stringify(decodeProfilesRequest(json.body))));
  });

  it('the Pyroscope sink receives pprof with the source totals, functions and spans, labelled as Pyroscope derives', () => {
    const series = psink.profiles('push');
    const expected = [];
    for (const s of sent) {
      for (const r of s.desc.resources) {
        for (const sc of r.scopes) {
          for (const p of sc.profiles) expected.push({ resource: r.attributes, scope: sc.attributes || {}, p });
        }
      }
    }
    assert.equal(series.length, expected.length, 'one series per profile and service');
    for (const e of expected) {
      const svc = e.resource['service.name'];
      const got = series.filter((x) => x.labels.service_name === svc);
      assert.equal(got.length, 1, `one series of ${svc}`);
      const { labels } = got[0];
      assert.equal(labels.__name__, 'process_cpu');
      assert.equal(labels.__otel__, 'true');
      assert.equal(labels.__delta__, 'false');
      for (const [k, v] of Object.entries({ ...e.scope, ...e.resource })) {
        assert.equal(labels[k.replaceAll('.', '_')], String(v), `label ${k} of ${svc}`);
      }
      const have = summarizePprof(got[0].raw);
      const want = expectedPprof(e.p);
      assert.deepEqual(have.types, want.types, `sample type of ${svc}`);
      assert.deepEqual(have.totals, want.totals, `totals of ${svc}`);
      assert.equal(have.samples, want.samples, `samples of ${svc}`);
      for (const [fn, v] of Object.entries(want.functions)) {
        assert.deepEqual(have.functions[fn], v, `${fn} of ${svc}`);
      }
      assert.deepEqual(have.spans, want.spans, `span values of ${svc}`);
    }
  });

  it('bad input: 400 / INVALID_ARGUMENT naming the field, over HTTP (protobuf, JSON) and gRPC; a good client loses nothing', async () => {
    const good = (i) => ({ resources: [{ attributes: { 'service.name': 'steady', 'it.seq': i },
      scopes: [{ profiles: [cpuProfile([{ stack: ['main', 'Steady.tick'], value: i + 1 }], Date.now() - 20000)] }] }] });
    const base = () => buildProfilesRequest({ resources: [{ attributes: { 'service.name': 'bad' },
      scopes: [{ profiles: [cpuProfile([
        { stack: ['main', 'handle', 'leaf'], value: 3, link: { traceId: '0102030405060708090a0b0c0d0e0f10', spanId: '0102030405060708' } },
        { stack: ['main', 'gc'], value: 1 }], Date.now())] }] }] });
    const sample = (o, i) => o.resourceProfiles[0].scopeProfiles[0].profiles[0].samples[i];
    const at = 'resource_profiles[0].scope_profiles[0].profiles[0].samples';
    const cases = [
      { what: 'a string index past string_table', bad: (o) => { o.dictionary.functionTable[2].nameStrindex = 999; },
        want: /^dictionary\.function_table\[2\]\.name_strindex: 999 is out of range \(string_table has \d+ entries\)$/ },
      { what: 'a link index past link_table', bad: (o) => { sample(o, 1).linkIndex = 50; },
        want: new RegExp(`^${at.replace(/[[\].]/g, '\\$&')}\\[1\\]\\.link_index: 50 is out of range \\(link_table has 2 entries\\)$`) },
      { what: 'a stack index past stack_table', bad: (o) => { sample(o, 0).stackIndex = 77; },
        want: new RegExp(`^${at.replace(/[[\].]/g, '\\$&')}\\[0\\]\\.stack_index: 77 is out of range \\(stack_table has 3 entries\\)$`) },
      { what: 'a location index past location_table', bad: (o) => { o.dictionary.stackTable[1].locationIndices = [1, 40]; },
        want: /^dictionary\.stack_table\[1\]\.location_indices\[1\]: 40 is out of range \(location_table has \d+ entries\)$/ },
      { what: 'an attribute index past attribute_table', bad: (o) => { sample(o, 0).attributeIndices = [9]; },
        want: new RegExp(`^${at.replace(/[[\].]/g, '\\$&')}\\[0\\]\\.attribute_indices\\[0\\]: 9 is out of range \\(attribute_table has 1 entries\\)$`) },
      { what: 'a table past max_table_entries', bad: (o) => { for (let i = 0; i < 2100; i += 1) o.dictionary.stringTable.push(`s${i}`); },
        want: /^dictionary\.string_table\[2000\]: more than max_table_entries \(2000\) in one ProfilesDictionary$/ },
    ];

    // the good client: one distinct request at a time, all along
    const before = sink.accepted(PATH).length;
    const pushedBefore = psink.profiles('push').length;
    const goodBodies = [];
    let stop = false;
    const steady = (async () => {
      for (let i = 0; !stop || i < 5; i += 1) {
        const body = encodeProfilesObject(buildProfilesRequest(good(i)));
        const r = await post(httpPort, body);
        assert.equal(r.status, 200, `good request ${i}: ${r.body}`);
        goodBodies.push(body);
      }
    })();

    for (const c of cases) {
      const o = base();
      c.bad(o);
      const r = await post(httpPort, encodeProfilesObject(o));
      assert.equal(r.status, 400, `${c.what} (protobuf)`);
      assert.equal(r.headers['content-type'], 'application/x-protobuf');
      const st = decodeRpcStatus(r.body);
      assert.equal(st.code, grpc.status.INVALID_ARGUMENT);
      assert.match(st.message, c.want, `${c.what} (protobuf)`);
      const j = await post(httpPort, encodeProfilesObjectJson(o), true);
      assert.equal(j.status, 400, `${c.what} (JSON)`);
      assert.equal(j.headers['content-type'], 'application/json');
      const js = JSON.parse(j.body.toString());
      assert.equal(js.code, grpc.status.INVALID_ARGUMENT);
      assert.match(js.message, c.want, `${c.what} (JSON)`);
      const g = await grpcExport(grpcPort, encodeProfilesObject(o));
      assert.equal(g.code, grpc.status.INVALID_ARGUMENT, `${c.what} (gRPC)`);
      assert.match(g.details, c.want, `${c.what} (gRPC)`);
    }
    stop = true;
    await steady;

    // every good request arrived, byte for byte, once; no bad one did
    await sink.waitFor(() => sink.accepted(PATH).length >= before + goodBodies.length, 10000,
      () => `${goodBodies.length} good requests at the OTLP sink`);
    const arrived = sink.accepted(PATH).slice(before);
    assert.equal(arrived.length, goodBodies.length);
    for (const b of goodBodies) assert.equal(arrived.filter((r) => r.body.equals(b)).length, 1);
    await psink.waitFor(() => psink.profiles('push').length >= pushedBefore + goodBodies.length, 10000,
      () => `${goodBodies.length} good profiles at the Pyroscope sink`);
    const pushed = psink.profiles('push').slice(pushedBefore);
    assert.equal(pushed.length, goodBodies.length);
    assert.ok(pushed.every((x) => x.labels.service_name === 'steady'), 'no bad profile was pushed');
  });

  it('the receiver counts the Profile messages it accepted, per transport', async () => {
    const steadyN = sink.accepted(PATH).length - sent.length;
    await waitFor(() => gsink.requests.length === sent.length + steadyN, 10000,
      () => 'every request at the gRPC sink');
    const m = await fetchMetrics(hs.ports.admin);
    const http = metric(m, 'hotspan_receiver_accepted_profiles_total', { receiver: 'otlp', transport: 'http' });
    const grpcN = metric(m, 'hotspan_receiver_accepted_profiles_total', { receiver: 'otlp', transport: 'grpc' });
    // before: 2 (http) + 1 (json); the good client's, one each
    const steady = sink.accepted(PATH).length - sent.length;
    assert.equal(http, 3 + steady);
    assert.equal(grpcN, 1);
    assert.ok(metric(m, 'hotspan_receiver_failed_requests_total',
      { receiver: 'otlp', transport: 'grpc', reason: 'malformed' }) >= 5);
    // each exporter carried its signal on its own queue, and nothing needed a second try
    // (libcurl 7.88's h2c multiplexing once failed gRPC requests sent back to back)
    const profiles = sent.reduce((n, x) => n + x.desc.resources.length, 0) + steady;
    assert.equal(metric(m, 'hotspan_exporter_sent_profiles_total', { exporter: 'otlp_grpc', signal: 'profiles' }),
      profiles);
    assert.equal(metric(m, 'hotspan_exporter_sent_spans_total', { exporter: 'otlp_http' }), spans.length);
    for (const exporter of ['otlp_http', 'otlp_grpc']) {
      assert.equal(metric(m, 'hotspan_exporter_retries_total', { exporter, signal: 'profiles' }), 0, exporter);
    }
  });
});

// Backpressure as for spans: with the backend down and a queue of two, the receiver answers
// 503 + Retry-After (HTTP) and UNAVAILABLE (gRPC) once the profiles queue is full, and the spans'
// queue of the same exporter is not full for it; once the backend is back, every request
// answered 200 arrives exactly once and no refused one does.
describe('OTLP profiles: backpressure with the backend down', () => {
  let sink;
  let hs;

  before(async () => {
    sink = await startSink();
    await sink.down(); // the port is known; nothing listens there now
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
      grpc: {endpoint: 127.0.0.1:0}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:${sink.port}
    sending_queue: {queue_size: 2, num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp_http]}
    profiles: {receivers: [otlp], exporters: [otlp_http]}
`, { waitFor: ['otlp', 'otlp/grpc', 'admin'] });
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (sink) await sink.stop();
  });

  it('503 + Retry-After and UNAVAILABLE when full; what was accepted arrives once, nothing refused does', async () => {
    const body = (i) => encodeProfilesObject(buildProfilesRequest({ resources: [{
      attributes: { 'service.name': 'bp', 'it.seq': i },
      scopes: [{ profiles: [cpuProfile([{ stack: ['main', 'Work.do'], value: i + 1 }], Date.now())] }] }] }));
    const accepted = [];
    const refused = [];
    let first503 = null;
    for (let i = 0; i < 20 && !first503; i += 1) {
      const b = body(i);
      const r = await post(hs.ports.otlp, b);
      if (r.status === 200) accepted.push(b);
      else if (r.status === 503) { first503 = r; refused.push(b); } else assert.fail(`request ${i}: ${r.status}`);
    }
    assert.ok(first503, 'no 503 with the profiles queue full');
    assert.ok(accepted.length >= 2, `${accepted.length} accepted before the queue was full`);
    assert.match(String(first503.headers['retry-after']), /^\d+$/);
    assert.ok(decodeRpcStatus(first503.body).message.includes('pipeline is full'));
    const refusedGrpc = body(100);
    const g = await grpcExport(hs.ports['otlp/grpc'], refusedGrpc);
    assert.equal(g.code, grpc.status.UNAVAILABLE, `gRPC: ${g.details}`);
    refused.push(refusedGrpc);
    // the spans' queue of the same exporter is its own: spans are still taken
    const spansReq = await request({ port: hs.ports.otlp, path: '/v1/traces',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: '0102030405060708090a0b0c0d0e0f10',
        spanId: '0102030405060708', name: 'bp', startTimeUnixNano: '1', endTimeUnixNano: '2' }] }] }] }) });
    assert.equal(spansReq.status, 200, 'a full profiles queue does not refuse spans');
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_receiver_refused_profiles_total', { receiver: 'otlp', transport: 'http' }), 1);
    assert.equal(metric(m, 'hotspan_receiver_refused_profiles_total', { receiver: 'otlp', transport: 'grpc' }), 1);

    await sink.up();
    await sink.waitFor(() => sink.accepted(PATH).length >= accepted.length, 15000,
      () => `${accepted.length} accepted requests at the sink, have ${sink.accepted(PATH).length}`);
    await new Promise((r) => setTimeout(r, 300)); // nothing more comes
    const got = sink.accepted(PATH);
    assert.equal(got.length, accepted.length);
    for (const b of accepted) assert.equal(got.filter((r) => r.body.equals(b)).length, 1);
    for (const b of refused) assert.equal(got.filter((r) => r.body.equals(b)).length, 0);
  });
});
