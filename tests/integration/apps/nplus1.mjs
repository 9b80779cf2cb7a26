// The seed scenario (design.md §1) as a real program: `api-server` handles GET /users/by-email
// and calls `user-db`, whose UserRepository.findByEmail "loads users" and then runs one
// "SELECT preferences" query per user (N+1). A normal request has few users (~50 ms); a slow one
// many (~600 ms). Traces go through the OpenTelemetry JS SDK (two providers, one per service) to
// OTLP_URL; user-db is profiled by @pyroscope/nodejs (wall) and uploads to PYROSCOPE_URL, its
// samples inside findByEmail labelled span_id = the findByEmail span's id (wrapWithLabels).
// Env: OTLP_URL (…/v1/traces), PYROSCOPE_URL, WARMUP_MS (fast requests first), PLAN (e.g.
// "FFSFFS"), FAST_USERS, SLOW_USERS, QUERY_MS (per preferences query), ROW_MS (per user row),
// FLUSH_MS, TAIL_MS (profiling goes on after the last request, so that an upload covers its end
// + the correlator's slack), API_SERVICE and DB_SERVICE (the two services' names), TENANT (sent
// as X-Scope-OrgID with spans and profiles). Prints one JSON line: {requests: [...]}.
import { trace, context, SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import Pyroscope from '@pyroscope/nodejs';
import { stopProfiling } from './sdk_stop.mjs';

const env = process.env;
const plan = env.PLAN || 'FFFSFFSFFSFF';
const fastUsers = Number(env.FAST_USERS || 3);
const slowUsers = Number(env.SLOW_USERS || 45);
const queryMs = Number(env.QUERY_MS || 10);
const rowMs = Number(env.ROW_MS || 3);
const tailMs = Number(env.TAIL_MS || 7000);
const apiService = env.API_SERVICE || 'api-server';
const dbService = env.DB_SERVICE || 'user-db';
const tenantHeaders = env.TENANT ? { 'X-Scope-OrgID': env.TENANT } : {};

function provider(service) {
  const exporter = new OTLPTraceExporter({ url: env.OTLP_URL, timeoutMillis: 10000, headers: tenantHeaders });
  return new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service, 'service.version': '1.0.0' }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 200, maxExportBatchSize: 512 })],
  });
}
const apiProvider = provider(apiService);
const dbProvider = provider(dbService);
const apiTracer = apiProvider.getTracer(`${apiService}.http`);
const dbTracer = dbProvider.getTracer(`${dbService}.repository`);

Pyroscope.init({
  serverAddress: env.PYROSCOPE_URL,
  appName: dbService,
  ...(env.TENANT ? { tenantID: env.TENANT } : {}),
  tags: { env: 'it' },
  flushIntervalMs: Number(env.FLUSH_MS || 1000),
  wall: { samplingIntervalMicros: 5000 },
});
Pyroscope.startWallProfiling();

let acc = 0;
function spin(ms) {
  const end = Date.now() + ms;
  let x = 1.0001;
  while (Date.now() < end) {
    for (let i = 0; i < 2000; i += 1) x = Math.sqrt(x * 1.0001 + i) + 1;
  }
  acc += x;
}

function loadUsers(n) {
  spin(4 + rowMs * n); // the users query and decoding its rows
  return Array.from({ length: n }, (_, i) => ({ id: 1000 + i }));
}

function loadPreferences(ctx, user) {
  const span = dbTracer.startSpan('SELECT preferences', {
    kind: SpanKind.CLIENT,
    attributes: {
      'db.system': 'postgresql',
      'db.statement': `SELECT * FROM preferences WHERE user_id = ${user.id}`,
    },
  }, ctx);
  spin(queryMs); // the query's client-side work
  span.end();
}

function findByEmail(ctx, users) {
  const list = loadUsers(users);
  for (const u of list) loadPreferences(ctx, u);
  return list.length;
}

const requests = [];
function handle(kind) {
  const users = kind === 'S' ? slowUsers : fastUsers;
  const api = apiTracer.startSpan('GET /users/by-email', { kind: SpanKind.SERVER,
    attributes: { 'http.request.method': 'GET', 'http.route': '/users/by-email' } });
  const apiCtx = trace.setSpan(context.active(), api);
  spin(2);
  const db = dbTracer.startSpan('UserRepository.findByEmail', { kind: SpanKind.SERVER,
    attributes: { 'db.system': 'postgresql', 'user.count': users } }, apiCtx);
  const dbCtx = trace.setSpan(apiCtx, db);
  const dbSpanId = db.spanContext().spanId;
  const t0 = Date.now();
  Pyroscope.wrapWithLabels({ span_id: dbSpanId }, () => { findByEmail(dbCtx, users); });
  db.end();
  spin(2);
  api.end();
  requests.push({ kind: kind === 'S' ? 'slow' : 'fast', users, traceId: db.spanContext().traceId,
    apiSpanId: api.spanContext().spanId, dbSpanId, ms: Date.now() - t0 });
}

// warm-up: normal traffic until the profiler has uploaded at least once (a service runs a while
// before the incident; the correlator waits for profiles only of services that send them)
const warmupEnd = Date.now() + Number(env.WARMUP_MS || 1500);
while (Date.now() < warmupEnd) {
  handle('F');
  await new Promise((r) => setTimeout(r, 100));
}
for (const k of plan) {
  handle(k);
  // between requests the loop runs: span export and profile uploads
  await new Promise((r) => setTimeout(r, 30));
}
await Promise.all([apiProvider.forceFlush(), dbProvider.forceFlush()]);
// keep profiling (idle) so an upload's `until` passes the last span's end, then flush the last
await new Promise((r) => setTimeout(r, tailMs));
await stopProfiling(() => Pyroscope.stopWallProfiling());
await Promise.all([apiProvider.shutdown(), dbProvider.shutdown()]);
process.stdout.write(`${JSON.stringify({ requests, acc: acc > 0 })}\n`);
