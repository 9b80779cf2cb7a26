// A test sink playing Tempo: an HTTP/1.1 server on 127.0.0.1 that records every POST (path,
// headers, body after gunzip), decodes OTLP protobuf and JSON bodies with the official protos
// (ExportProfilesServiceRequest on a path ending in /profiles, from proto/ by protobufjs),
// and answers 200 with an empty ExportTraceServiceResponse unless told otherwise: scripted
// answers for the next N requests (e.g. 503 + Retry-After), or "down" (listener closed and
// connections dropped; `up()` reopens it on the same port), or slow (`setDelay(ms)`: every
// answer waits that long, as an overloaded backend does).
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { EventEmitter, once } from 'node:events';
import { decodeTraceRequest, decodeTraceRequestJson, flattenSpans } from './otlp.mjs';
import { decodeProfilesRequest } from './otlp_profiles.mjs';

export class Sink extends EventEmitter {
  constructor() {
    super();
    this.requests = [];
    this.port = 0;
    this.scripted = []; // [{status, headers, body, remaining}]
    this.isUp = false;
    this.sockets = new Set();
    this.server = null;
    this.delayMs = 0;
    this.host = '127.0.0.1';
  }

  /** Opens the listener (on `port`, or a free one the first time; on `host`, any loopback
   * address, 127.0.0.1 unless given). */
  async start(port = 0, host = this.host) {
    this.host = host;
    this.server = http.createServer((req, res) => this.#handle(req, res));
    this.server.keepAliveTimeout = 30000;
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    this.server.listen(port || this.port, this.host);
    await once(this.server, 'listening');
    this.port = this.server.address().port;
    this.isUp = true;
    return this;
  }

  get url() { return `http://${this.host}:${this.port}`; }

  /** Closes the listener and every open connection (the backend is gone). */
  async down() {
    if (!this.isUp) return;
    this.isUp = false;
    const closed = new Promise((r) => this.server.close(r));
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await closed;
  }

  /** Reopens the listener on the same port. */
  async up() {
    if (this.isUp) return;
    await this.start(this.port);
  }

  async stop() { await this.down(); }

  /** The next `count` requests get this answer instead of 200. */
  respondWith({ status, headers = {}, body = '' }, count = 1) {
    this.scripted.push({ status, headers, body, remaining: count });
  }

  /** Always answer like this until clearResponses(). */
  respondAlways({ status, headers = {}, body = '' }) {
    this.scripted.push({ status, headers, body, remaining: Infinity });
  }

  clearResponses() { this.scripted = []; }

  /** Every answer from now on waits `ms` (0: answer at once). The request is recorded when its
   * answer is sent, with `time` still the moment it arrived. */
  setDelay(ms) { this.delayMs = ms; }

  #nextAnswer() {
    while (this.scripted.length && this.scripted[0].remaining <= 0) this.scripted.shift();
    const s = this.scripted[0];
    if (!s) return null;
    s.remaining -= 1;
    return s;
  }

  #handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('error', () => {});
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const rec = {
        seq: this.requests.length,
        time: Date.now(),
        method: req.method,
        path: req.url,
        headers: { ...req.headers },
        rawBody: raw,
        body: raw,
        decoded: null,
        decodeError: null,
        status: 200,
      };
      try {
        const enc = (req.headers['content-encoding'] || '').toLowerCase();
        if (enc === 'gzip') rec.body = gunzipSync(raw);
        else if (enc && enc !== 'identity') throw new Error(`unexpected content-encoding ${enc}`);
        const ct = (req.headers['content-type'] || '').split(';')[0].trim().toLowerCase();
        const profiles = req.url.split('?')[0].endsWith('/profiles');
        if (ct === 'application/x-protobuf') {
          rec.decoded = profiles ? decodeProfilesRequest(rec.body) : decodeTraceRequest(rec.body);
        } else if (ct === 'application/json') {
          const text = rec.body.toString('utf8');
          rec.decoded = profiles ? JSON.parse(text) : decodeTraceRequestJson(text);
        } else {
          throw new Error(`unexpected content-type ${req.headers['content-type']}`);
        }
      } catch (e) {
        rec.decodeError = e;
      }
      if (this.delayMs > 0) setTimeout(() => this.#answer(req, res, rec), this.delayMs);
      else this.#answer(req, res, rec);
    });
  }

  #answer(req, res, rec) {
    const answer = req.method === 'POST' ? this.#nextAnswer() : null;
    if (rec.decodeError && !answer) {
      rec.status = 400;
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(String(rec.decodeError.message));
    } else if (answer) {
      rec.status = answer.status;
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    } else {
      const ct = (req.headers['content-type'] || '').startsWith('application/json')
        ? 'application/json' : 'application/x-protobuf';
      res.writeHead(200, { 'content-type': ct });
      res.end(ct === 'application/json' ? '{}' : Buffer.alloc(0));
    }
    this.requests.push(rec);
    this.emit('request', rec);
  }

  /** Requests answered 2xx (accepted), optionally only those to `path`. */
  accepted(path = '/v1/traces') {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300 &&
      (path === null || r.path === path));
  }

  /** Every span of every accepted request to `path`, with its resource and scope. */
  spans(path = '/v1/traces') {
    const out = [];
    for (const r of this.accepted(path)) {
      if (!r.decoded) continue;
      for (const s of flattenSpans(r.decoded)) out.push({ ...s, request: r.seq });
    }
    return out;
  }

  /** Resolves with spans(path) once it holds at least n spans; rejects after timeoutMs. */
  waitForSpans(n, timeoutMs = 10000, path = '/v1/traces') {
    return this.waitFor(() => this.spans(path).length >= n, timeoutMs,
      () => `expected ${n} spans at ${path}, have ${this.spans(path).length}`)
      .then(() => this.spans(path));
  }

  /** Resolves once pred() is true, re-checking on every request; rejects after timeoutMs. */
  waitFor(pred, timeoutMs = 10000, describe = () => 'condition not met') {
    return new Promise((resolve, reject) => {
      if (pred()) { resolve(); return; }
      const onReq = () => {
        if (pred()) { clearTimeout(timer); this.off('request', onReq); resolve(); }
      };
      const timer = setTimeout(() => {
        this.off('request', onReq);
        reject(new Error(`sink: timed out after ${timeoutMs} ms: ${describe()}`));
      }, timeoutMs);
      this.on('request', onReq);
    });
  }
}

export async function startSink({ host = '127.0.0.1', port = 0 } = {}) {
  return new Sink().start(port, host);
}
