// A test sink playing Pyroscope: an HTTP/1.1 server on 127.0.0.1 that records what it is sent
// on the push API (POST /push.v1.PusherService/Push, Connect unary, application/proto, optional
// Content-Encoding gzip; PushRequest decoded with protobufjs from the schema in wire.md §6) and on
// the legacy POST /ingest (query, headers, raw body or multipart parts), with the tenant
// (X-Scope-OrgID) and Authorization. It answers 200 (empty application/proto for Push), or what
// it is told: scripted answers for the next N requests, or down() → 503 (Connect JSON error)
// until up(); down({close: true}) closes the listener instead, as lib/sink.mjs does.
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { readFileSync, existsSync } from 'node:fs';
import { EventEmitter, once } from 'node:events';
import { createRequire } from 'node:module';
import { request } from './http.mjs';

const require = createRequire(import.meta.url);
const protobuf = require('protobufjs');

const pushRoot = protobuf.parse(`
syntax = "proto3";
package push.v1;
message LabelPair { string name = 1; string value = 2; }
message RawSample { bytes raw_profile = 1; string ID = 2; }
message RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
message PushRequest { repeated RawProfileSeries series = 1; }
`, { keepCase: true }).root;
export const PushRequest = pushRoot.lookupType('push.v1.PushRequest');

export const PUSH_PATH = '/push.v1.PusherService/Push';

/** Encodes a PushRequest: series = [{labels: {name: value} | [[name, value]], samples:
 * [{raw: Buffer, id: 'uuid'}]}]. */
export function encodePushRequest(series) {
  const msg = PushRequest.fromObject({
    series: series.map((s) => ({
      labels: (Array.isArray(s.labels) ? s.labels : Object.entries(s.labels || {}))
        .map(([name, value]) => ({ name, value })),
      samples: (s.samples || []).map((x) => ({ raw_profile: x.raw, ID: x.id ?? '' })),
    })),
  });
  return Buffer.from(PushRequest.encode(msg).finish());
}

/** Decodes a PushRequest into [{labels: {name: value}, labelList: [[name, value]], samples:
 * [{raw: Buffer, id}]}] (throws on malformed bytes). */
export function decodePushRequest(buf) {
  const msg = PushRequest.toObject(PushRequest.decode(buf), { bytes: Buffer, defaults: true, arrays: true });
  return msg.series.map((s) => ({
    labelList: s.labels.map((l) => [l.name, l.value]),
    labels: Object.fromEntries(s.labels.map((l) => [l.name, l.value])),
    samples: s.samples.map((x) => ({ raw: Buffer.from(x.raw_profile), id: x.ID })),
  }));
}

/**
 * Parses Pyroscope's `name` syntax (`app{k=v,...}`, wire.md §5.2): {app, labels}. Throws on
 * what the Pyroscope parser rejects.
 */
export function parseIngestName(name) {
  const i = name.indexOf('{');
  const app = (i < 0 ? name : name.slice(0, i)).trim();
  if (!app || !/^[A-Za-z0-9_.\-/]+$/.test(app)) throw new Error(`bad app name in ${JSON.stringify(name)}`);
  const labels = {};
  if (i >= 0) {
    if (!name.endsWith('}')) throw new Error(`unterminated labels in ${JSON.stringify(name)}`);
    const inner = name.slice(i + 1, -1);
    for (const pair of inner.split(',')) {
      if (!pair.trim()) continue;
      const eq = pair.indexOf('=');
      if (eq < 0) throw new Error(`label without '=' in ${JSON.stringify(name)}`);
      const k = pair.slice(0, eq).trim();
      if (!/^[A-Za-z0-9_.]+$/.test(k) || k === '__name__') throw new Error(`bad label key ${k}`);
      labels[k] = pair.slice(eq + 1).trim();
    }
  }
  return { app, labels };
}

/**
 * The series labels Pyroscope derives from an /ingest pprof upload (wire.md §5.3 createLabels),
 * leaving out the `__`-prefixed ones it computes itself: name labels, service_name = the app
 * name unless given, pyroscope_spy = spyName.
 */
export function ingestSeriesLabels(query) {
  const { app, labels } = parseIngestName(query.name);
  const out = { pyroscope_spy: query.spyName || 'unknown' };
  for (const [k, v] of Object.entries(labels)) if (!k.startsWith('__')) out[k] = v;
  out.service_name ??= app;
  return out;
}

/** Drops `__`-prefixed labels (Pyroscope computes or strips them on /ingest). */
export const publicLabels = (labels) =>
  Object.fromEntries(Object.entries(labels).filter(([k]) => !k.startsWith('__')));

/** Parses attime-style from/until (wire.md §5.1): 13 digits ms, 16 µs, 19 ns, else seconds → ns BigInt. */
export function attimeToNs(v) {
  if (v === undefined || v === null || !/^\d+$/.test(v)) return null;
  const n = BigInt(v);
  switch (v.length) {
    case 13: return n * 1000000n;
    case 16: return n * 1000n;
    case 19: return n;
    default: return n * 1000000000n;
  }
}

export class PyroscopeSink extends EventEmitter {
  constructor() {
    super();
    this.requests = [];
    this.port = 0;
    this.scripted = [];
    this.isUp = false;
    this.unavailable = false;
    this.sockets = new Set();
    this.server = null;
  }

  async start(port = 0) {
    this.server = http.createServer((req, res) => { this.#handle(req, res); });
    this.server.keepAliveTimeout = 30000;
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    this.server.listen(port || this.port, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = this.server.address().port;
    this.isUp = true;
    return this;
  }

  get url() { return `http://127.0.0.1:${this.port}`; }

  /** Answer 503 (Connect `unavailable`) to everything until up(); with close: true, close the
   * listener and drop every connection instead. */
  async down({ close = false } = {}) {
    if (!close) { this.unavailable = true; return; }
    if (!this.isUp) return;
    this.isUp = false;
    const closed = new Promise((r) => this.server.close(r));
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await closed;
  }

  async up() {
    this.unavailable = false;
    if (!this.isUp) await this.start(this.port);
  }

  async stop() {
    this.unavailable = false;
    await this.down({ close: true });
  }

  respondWith({ status, headers = {}, body = '' }, count = 1) {
    this.scripted.push({ status, headers, body, remaining: count });
  }

  clearResponses() { this.scripted = []; }

  #nextAnswer() {
    while (this.scripted.length && this.scripted[0].remaining <= 0) this.scripted.shift();
    const s = this.scripted[0];
    if (!s) return null;
    s.remaining -= 1;
    return s;
  }

  async #handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('error', () => {});
    await once(req, 'end').catch(() => {});
    const raw = Buffer.concat(chunks);
    const u = new URL(req.url, 'http://x');
    const rec = {
      seq: this.requests.length,
      time: Date.now(),
      method: req.method,
      path: req.url,
      pathname: u.pathname,
      query: Object.fromEntries(u.searchParams),
      headers: { ...req.headers },
      tenant: req.headers['x-scope-orgid'] ?? null,
      authorization: req.headers.authorization ?? null,
      kind: u.pathname === PUSH_PATH ? 'push' : (u.pathname.endsWith('/ingest') ? 'ingest' : 'other'),
      rawBody: raw,
      body: raw,
      series: null,   // push: decodePushRequest()
      parts: null,    // ingest multipart: {name: {filename, contentType, data}}
      profile: null,  // ingest: the pprof bytes (raw body, or the `profile` part)
      decodeError: null,
      status: 200,
    };
    let errStatus = 400;
    try {
      if (req.method !== 'POST') { errStatus = 405; throw new Error(`method ${req.method}`); }
      const enc = (req.headers['content-encoding'] || '').toLowerCase();
      const ct = (req.headers['content-type'] || '').toLowerCase();
      if (rec.kind === 'push') {
        if (enc === 'gzip') rec.body = gunzipSync(raw);
        else if (enc && enc !== 'identity') throw new Error(`unexpected content-encoding ${enc}`);
        if (ct.split(';')[0].trim() !== 'application/proto') {
          errStatus = 415;
          throw new Error(`unexpected content-type ${req.headers['content-type']}`);
        }
        rec.series = decodePushRequest(rec.body);
      } else if (rec.kind === 'ingest') {
        if (enc && enc !== 'identity') throw new Error(`/ingest does not decode content-encoding ${enc}`);
        if (ct.startsWith('multipart/form-data') && rec.query.format !== 'pprof') {
          const form = await new Response(raw, { headers: { 'content-type': req.headers['content-type'] } }).formData();
          rec.parts = {};
          for (const [name, v] of form.entries()) {
            rec.parts[name] = typeof v === 'string'
              ? { filename: null, contentType: null, data: Buffer.from(v) }
              : { filename: v.name, contentType: v.type, data: Buffer.from(await v.arrayBuffer()) };
          }
          rec.profile = rec.parts.profile?.data ?? null;
        } else {
          rec.profile = raw;
        }
      } else {
        errStatus = 404;
        throw new Error(`unknown path ${u.pathname}`);
      }
    } catch (e) {
      rec.decodeError = e;
    }
    const answer = this.unavailable
      ? { status: 503, headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: 'unavailable', message: 'sink is down' }) }
      : this.#nextAnswer();
    if (answer) {
      rec.status = answer.status;
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    } else if (rec.decodeError) {
      rec.status = errStatus;
      res.writeHead(errStatus, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'invalid_argument', message: String(rec.decodeError.message) }));
    } else if (rec.kind === 'push') {
      res.writeHead(200, { 'content-type': 'application/proto' });
      res.end(Buffer.alloc(0));
    } else {
      res.writeHead(200);
      res.end();
    }
    this.requests.push(rec);
    this.emit('request', rec);
  }

  /** Accepted (2xx) requests, optionally of one kind ('push' | 'ingest'). */
  accepted(kind = null) {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300 && (!kind || r.kind === kind));
  }

  /**
   * Every profile of every accepted request, flattened: [{kind, tenant, authorization, labels
   * (push: the series labels; ingest: ingestSeriesLabels of the query), raw (pprof bytes), id,
   * query, parts, request}].
   */
  profiles(kind = null) {
    const out = [];
    for (const r of this.accepted(kind)) {
      if (r.kind === 'push') {
        for (const s of r.series || []) {
          for (const x of s.samples) {
            out.push({ kind: 'push', tenant: r.tenant, authorization: r.authorization,
              labels: s.labels, labelList: s.labelList, raw: x.raw, id: x.id, request: r });
          }
        }
      } else if (r.kind === 'ingest' && r.profile) {
        let labels = null;
        try { labels = ingestSeriesLabels(r.query); } catch { labels = null; }
        out.push({ kind: 'ingest', tenant: r.tenant, authorization: r.authorization, labels,
          raw: r.profile, id: null, query: r.query, parts: r.parts, request: r });
      }
    }
    return out;
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
        reject(new Error(`pyroscope sink: timed out after ${timeoutMs} ms: ${describe()}`));
      }, timeoutMs);
      this.on('request', onReq);
    });
  }

  /** Resolves with the profiles matching filter once there are at least n of them. */
  async waitForProfiles(n, { timeoutMs = 10000, filter = () => true, kind = null } = {}) {
    const pick = () => this.profiles(kind).filter(filter);
    await this.waitFor(() => pick().length >= n, timeoutMs,
      () => `expected ${n} profiles, have ${pick().length} (requests: ${this.requests.length}, ` +
        `statuses: ${JSON.stringify(this.requests.map((r) => r.status))})`);
    return pick();
  }
}

export async function startPyroscopeSink() {
  return new PyroscopeSink().start();
}

/** The profile lines of a file exporter's output ({profile: {...}} objects), [] if absent. */
export function readFileProfiles(path) {
  if (!existsSync(path)) return [];
  const out = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const obj = JSON.parse(line);
    if (obj.profile) out.push(obj.profile);
  }
  return out;
}

/** Polls the file exporter's output until pred(profiles) holds; resolves with the profiles. */
export async function waitForFileProfiles(path, pred, { timeoutMs = 10000, describe } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let profiles = [];
    let err = null;
    try { profiles = readFileProfiles(path); } catch (e) { err = e; } // a line being written
    if (!err && pred(profiles)) return profiles;
    if (Date.now() > deadline) {
      throw new Error(`file exporter ${path}: timed out after ${timeoutMs} ms: ` +
        `${describe ? describe(profiles) : `${profiles.length} profiles`}${err ? ` (${err.message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A multipart/form-data body as Go's mime/multipart writes it: parts = [{name, filename,
 * contentType, data}]. Returns {body, contentType}. */
export function multipartBody(parts, boundary = `hotspanit${Math.random().toString(16).slice(2)}`) {
  const chunks = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename) head += `; filename="${p.filename}"`;
    head += '\r\n';
    head += `Content-Type: ${p.contentType || 'application/octet-stream'}\r\n\r\n`;
    chunks.push(Buffer.from(head), Buffer.from(p.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** POST /ingest?<query> to a Pyroscope-API port; resolves {status, headers, body, json}. */
export async function postIngest(port, { query = {}, body, contentType = 'application/octet-stream',
  headers = {}, path = '/ingest' }) {
  const qs = new URLSearchParams(query).toString();
  const res = await request({ port, path: qs ? `${path}?${qs}` : path, body,
    headers: { 'content-type': contentType, ...headers } });
  return withJson(res);
}

/** POST a PushRequest body (Connect unary, application/proto unless told). */
export async function postPush(port, body, { headers = {}, contentType = 'application/proto' } = {}) {
  const res = await request({ port, path: PUSH_PATH, body,
    headers: { 'content-type': contentType, 'connect-protocol-version': '1', ...headers } });
  return withJson(res);
}

function withJson(res) {
  let json = null;
  if (String(res.headers['content-type'] || '').startsWith('application/json')) {
    try { json = JSON.parse(res.body.toString('utf8')); } catch { json = null; }
  }
  return { ...res, json };
}
