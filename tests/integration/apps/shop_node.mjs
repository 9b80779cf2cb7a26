// shop_node: a Node service for hotspan's correlation-quality suite, traced by the OpenTelemetry
// JS SDK (OTLP/HTTP protobuf) and profiled by @pyroscope/nodejs 0.6.4 as a user sets it up: wall
// profiling with collectCpuTime and heap profiling (Pyroscope.start()), samples of a request
// labelled span_id = its root span's id with wrapWithLabels (the SDK has no OpenTelemetry
// integration; wire.md §5.5). Requests run in-process, one at a time, each a root SERVER span:
//   sign:  AuthService.verifyPassword hashes with crypto.pbkdf2Sync until `ms` of CPU is spent:
//          the time is in a Node library function, called from the app's verifyPassword;
//   wait:  RateClient.fetchRates blocks the thread `ms` on Atomics.wait (a timer wait, as a
//          synchronous socket or file read would block): wall time, next to no CPU.
// For each request it records the ground truth (CPU time from process.cpuUsage(), per function;
// the time waited) and prints, when done, one JSON line {service, spans, exported}.
// Env: OTLP_URLS (comma-separated …/v1/traces; each gets every span), PYROSCOPE_URL, SERVICE
// (default shop-node), FLUSH_MS (the SDK's flushIntervalMs, default 60000), PLAN (JSON:
// [{kind, ms, slow}] run in order, PAUSE_MS apart; kind `pause` waits ms), or else RATE
// (requests/s) for DURATION_MS, every SLOW_EVERYth request slow (SLOW_MS; sign and wait in
// turn); TAIL_MS: profiling goes on after the last request, so that an upload covers it plus
// the correlator's slack.
import { trace, context, SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import Pyroscope from '@pyroscope/nodejs';
import { pbkdf2Sync } from 'node:crypto';
import { stopProfiling } from './sdk_stop.mjs';

const env = process.env;
const service = env.SERVICE || 'shop-node';
const urls = (env.OTLP_URLS || '').split(',').filter(Boolean);
let exported = 0; // by the first exporter: each URL gets every span
let failed = 0;
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': service, 'service.version': '2.1.0' }),
  spanProcessors: urls.map((url, i) => {
    const exporter = new OTLPTraceExporter({ url, timeoutMillis: 10000 });
    const send = exporter.export.bind(exporter);
    exporter.export = (spans, done) => send(spans, (r) => {
      if (r.code !== 0) failed += spans.length;
      else if (i === 0) exported += spans.length;
      done(r);
    });
    return new BatchSpanProcessor(exporter, { scheduledDelayMillis: 200, maxExportBatchSize: 512 });
  }),
});
const tracer = provider.getTracer('shop-node.http', '1.0.0');

Pyroscope.init({
  serverAddress: env.PYROSCOPE_URL,
  appName: service,
  flushIntervalMs: Number(env.FLUSH_MS || 60000),
  wall: { collectCpuTime: true },
});
Pyroscope.start(); // wall (with CPU time) and heap

const cpuNow = () => { const u = process.cpuUsage(); return (u.user + u.system) * 1000; }; // ns
const salt = Buffer.from('hotspan-salt');

// The application's own code.
const AuthService = {
  verifyPassword(password, budgetNs, t) {
    const c0 = cpuNow();
    let key;
    let used = 0;
    // the clock read less and less often (each read is a frame of its own in the profile)
    for (let batch = 1; used < budgetNs; batch *= used < budgetNs / 4 ? 2 : 1) {
      for (let i = 0; i < batch; i += 1) key = pbkdf2Sync(password, salt, 5000, 32, 'sha256');
      used = cpuNow() - c0;
    }
    t.fns.verifyPassword = used;
    t.fns['node:crypto pbkdf2Sync'] = used; // all of it but the clock reads
    return key;
  },
};

const shared = new Int32Array(new SharedArrayBuffer(4));
const RateClient = {
  fetchRates(ms, t) {
    const w0 = process.hrtime.bigint();
    const c0 = cpuNow();
    Atomics.wait(shared, 0, 0, ms); // nothing wakes it: it waits the whole `ms`
    t.waitNs = Number(process.hrtime.bigint() - w0);
    t.waitedIn = 'fetchRates';
    t.fns.fetchRates = cpuNow() - c0;
    return { EUR: 1.08 };
  },
};

const routes = {
  sign: { name: 'POST /login', run: (ms, t) => AuthService.verifyPassword('hunter2', ms * 1e6, t) },
  wait: { name: 'GET /rates', run: (ms, t) => RateClient.fetchRates(ms, t) },
};

const spans = [];
function handle({ kind, ms, slow = false }) {
  const r = routes[kind];
  const root = tracer.startSpan(r.name, { kind: SpanKind.SERVER,
    attributes: { 'http.request.method': kind === 'sign' ? 'POST' : 'GET' } });
  const sc = root.spanContext();
  const t = { traceId: sc.traceId, spanId: sc.spanId, name: r.name, kind, slow, fns: {} };
  const c0 = cpuNow();
  context.with(trace.setSpan(context.active(), root), () => {
    Pyroscope.wrapWithLabels({ span_id: sc.spanId }, () => r.run(ms, t));
  });
  t.cpuNs = cpuNow() - c0;
  root.end();
  const [s, e] = [root.startTime, root.endTime];
  t.startNs = s[0] * 1e9 + s[1];
  t.endNs = e[0] * 1e9 + e[1];
  spans.push(t);
}

const pause = (ms) => new Promise((res) => setTimeout(res, ms));
if (env.PLAN) {
  for (const req of JSON.parse(env.PLAN)) {
    if (req.kind === 'pause') await pause(req.ms);
    else handle(req);
    await pause(Number(env.PAUSE_MS || 50)); // the loop runs: span export, profile uploads
  }
} else {
  const rate = Number(env.RATE || 20);
  const every = Number(env.SLOW_EVERY || 50);
  const end = Date.now() + Number(env.DURATION_MS || 10000);
  const slowMs = Number(env.SLOW_MS || 300);
  for (let i = 0; Date.now() < end; i += 1) {
    const t0 = Date.now();
    const slow = i % every === every - 1;
    const kind = (slow ? Math.floor(i / every) : i) % 2 ? 'wait' : 'sign';
    handle({ kind, ms: slow ? slowMs : 2, slow });
    await pause(Math.max(0, 1000 / rate - (Date.now() - t0)));
  }
}
await provider.forceFlush();
await pause(Number(env.TAIL_MS || 0));
await stopProfiling(() => Pyroscope.stop());
await provider.shutdown();
process.stdout.write(`${JSON.stringify({ service, spans, exported, failed })}\n`);
