// bench/tls.mjs (run from the repository root: node bench/tls.mjs): hotspan CPU per request and per new connection, OTLP/HTTP plaintext vs TLS.
import https from 'node:https';
import http from 'node:http';
import { makeCerts } from '../tests/integration/lib/tls.mjs';
import { startHotspan } from '../tests/integration/lib/hotspan.mjs';
import * as otlp from '../tests/integration/lib/otlp.mjs';
import { Sink } from '../tests/integration/lib/sink.mjs';

const c = makeCerts();
const sink = await new Sink().start();
const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
  otlp/tls:
    protocols:
      http: {endpoint: 127.0.0.1:0, tls: {cert_file: ${c.server}, key_file: ${c.serverKey}}}
exporters:
  otlp: {endpoint: ${sink.url}, compression: none}
service:
  telemetry: {admin: 127.0.0.1:0, log_level: info}
  pipelines:
    traces: {receivers: [otlp, otlp/tls], exporters: [otlp]}
`, { waitFor: ['otlp', 'otlp/tls', 'admin'] });
const body = otlp.encodeRequest(Array.from({ length: 1000 }, (_, i) => otlp.makeSpan({ name: `s${i}` })));
const ca = c.read(c.ca);

async function load(mod, port, secs, conns) {
  const agent = new mod.Agent({ keepAlive: true, maxSockets: conns, ca });
  let n = 0;
  const end = Date.now() + secs * 1000;
  const one = () => new Promise((res, rej) => {
    const r = mod.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/traces', agent, ca,
      headers: { 'content-type': 'application/x-protobuf' } }, (resp) => { resp.resume(); resp.on('end', () => { if (resp.statusCode === 200) n++; res(); }); });
    r.on('error', rej); r.end(body);
  });
  await Promise.all(Array.from({ length: conns }, async () => { while (Date.now() < end) await one(); }));
  agent.destroy();
  return n / secs;
}
async function handshakes(mod, port, secs) {
  let n = 0;
  const end = Date.now() + secs * 1000;
  while (Date.now() < end) {
    await new Promise((res, rej) => {
      const r = mod.request({ host: '127.0.0.1', port, method: 'GET', path: '/', agent: false, ca }, (resp) => { resp.resume(); resp.on('end', res); });
      r.on('error', rej); r.end();
    });
    n++;
  }
  return n / secs;
}
import { readFileSync } from 'node:fs';
const cpu = () => { const f = readFileSync(`/proc/${hs.proc.pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) * 10; }; // ms (100 Hz ticks)
async function measured(fn) { const c0 = cpu(); const t0 = Date.now(); const rate = await fn(); const secs = (Date.now() - t0) / 1000; return { rate, cpuPer1000: (cpu() - c0) / (rate * secs) * 1000 }; }
const plainPort = hs.ports.otlp, tlsPort = hs.ports['otlp/tls'];
for (let round = 0; round < 3; round++) {
  const p = await measured(() => load(http, plainPort, 4, 4));
  const t = await measured(() => load(https, tlsPort, 4, 4));
  console.log(`round ${round}: 1000-span requests (${body.length} B), 4 keep-alive conns: plain ${p.rate.toFixed(0)}/s ${p.cpuPer1000.toFixed(0)} hotspan CPU-ms per 1000; TLS ${t.rate.toFixed(0)}/s ${t.cpuPer1000.toFixed(0)} CPU-ms per 1000`);
}
for (let round = 0; round < 3; round++) {
  const p = await measured(() => handshakes(http, plainPort, 3));
  const t = await measured(() => handshakes(https, tlsPort, 3));
  console.log(`round ${round}: new connection + one GET, sequential: plain ${p.rate.toFixed(0)}/s ${p.cpuPer1000.toFixed(0)} CPU-ms per 1000; TLS ${t.rate.toFixed(0)}/s ${t.cpuPer1000.toFixed(0)} CPU-ms per 1000`);
}
await hs.stop();
await sink.stop();
c.cleanup();
