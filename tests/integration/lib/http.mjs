// Small HTTP/1.1 client helpers for the tests (no keep-alive unless asked, bounded in time).
import http from 'node:http';
import net from 'node:net';

/** One request; resolves {status, headers, body: Buffer}. Rejects on socket errors/timeouts. */
export function request({ port, host = '127.0.0.1', method = 'POST', path = '/v1/traces',
  headers = {}, body = null, timeoutMs = 10000, agent = false }) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port, method, path, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
        body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    if (body !== null) req.end(body); else req.end();
  });
}

/** POST an OTLP protobuf body to /v1/traces. */
export function postProto(port, body, headers = {}, path = '/v1/traces') {
  return request({ port, path, body,
    headers: { 'content-type': 'application/x-protobuf', ...headers } });
}

/**
 * Raw TCP exchange: connects, writes `data` (string/Buffer), collects everything the server
 * sends until it closes or `timeoutMs` passes. Resolves {data: Buffer, closed: bool,
 * firstByteMs}. `keepOpen` leaves the write side open (no FIN) so the server must decide.
 */
export function rawExchange(port, data, { timeoutMs = 5000, host = '127.0.0.1' } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const chunks = [];
    let firstByteMs = null;
    const sock = net.connect({ port, host }, () => { if (data) sock.write(data); });
    const timer = setTimeout(() => { sock.destroy(); finish(false); }, timeoutMs);
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ data: Buffer.concat(chunks), closed, firstByteMs });
    };
    sock.on('data', (c) => { if (firstByteMs === null) firstByteMs = Date.now() - t0; chunks.push(c); });
    sock.on('end', () => { sock.end(); finish(true); });
    sock.on('close', () => finish(true));
    sock.on('error', (e) => { if (e.code === 'ECONNRESET') finish(true); else { clearTimeout(timer); reject(e); } });
  });
}

/** Parses the status line and headers of a raw HTTP/1.1 response. */
export function parseRawResponse(buf) {
  const text = buf.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = text.slice(0, end).split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) return null;
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(m[1]), headers, body: buf.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1')) };
}
