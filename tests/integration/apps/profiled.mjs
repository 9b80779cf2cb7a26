// A small Node program profiled by the real @pyroscope/nodejs SDK (wall profiling only): two
// CPU-busy functions with known names burn the CPU for DURATION_MS; the SDK uploads every
// FLUSH_MS to SERVER_ADDRESS and once more on stop. Samples taken in hotspanBusyAlpha carry the
// label span_id = SPAN_ID (Pyroscope.wrapWithLabels). Prints one JSON line when done.
// Env: SERVER_ADDRESS, APP_NAME, TAGS (JSON object), TENANT_ID, AUTH_TOKEN, DURATION_MS,
// FLUSH_MS, SPAN_ID.
import Pyroscope from '@pyroscope/nodejs';
import { stopProfiling } from './sdk_stop.mjs';

const env = process.env;
const durationMs = Number(env.DURATION_MS || 2500);
const spanId = env.SPAN_ID || '';

Pyroscope.init({
  serverAddress: env.SERVER_ADDRESS,
  appName: env.APP_NAME || 'hotspan-it-app',
  tags: JSON.parse(env.TAGS || '{}'),
  tenantID: env.TENANT_ID || undefined,
  authToken: env.AUTH_TOKEN || undefined,
  flushIntervalMs: Number(env.FLUSH_MS || 1000),
  wall: { samplingIntervalMicros: 5000 },
});

let sink = 0;
function spin(ms) {
  const end = Date.now() + ms;
  let x = 1.0001;
  while (Date.now() < end) {
    for (let i = 0; i < 2000; i += 1) x = Math.sqrt(x * 1.0001 + i) + 1;
  }
  sink += x;
}
function hotspanBusyAlpha() { spin(20); }
function hotspanBusyBeta() { spin(10); }

Pyroscope.startWallProfiling();
const t0 = Date.now();
let rounds = 0;
while (Date.now() - t0 < durationMs) {
  if (spanId) Pyroscope.wrapWithLabels({ span_id: spanId }, hotspanBusyAlpha);
  else hotspanBusyAlpha();
  hotspanBusyBeta();
  rounds += 1;
  // let the SDK's flush timer and uploads run
  await new Promise((r) => setImmediate(r));
}
await stopProfiling(() => Pyroscope.stopWallProfiling());
process.stdout.write(`${JSON.stringify({ rounds, ms: Date.now() - t0, sink: sink > 0 })}\n`);
