// The official OTLP protos (opentelemetry-proto, as generated with protobufjs by the
// OpenTelemetry JS project and shipped in @opentelemetry/otlp-transformer up to 0.216.0; later
// versions dropped protobufjs, so package.json installs that one under the alias
// `otlp-transformer-protos`), plus helpers to decode requests into plain objects and to build
// raw requests by hand (unknown fields, odd encodings).
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';

const require = createRequire(import.meta.url);
const root = require('otlp-transformer-protos/build/src/generated/root.js');
const protobuf = require('protobufjs');

export const proto = root.opentelemetry.proto;
export const ExportTraceServiceRequest = proto.collector.trace.v1.ExportTraceServiceRequest;
export const ExportTraceServiceResponse = proto.collector.trace.v1.ExportTraceServiceResponse;
export const Span = proto.trace.v1.Span;
export const Resource = proto.resource.v1.Resource;
export const InstrumentationScope = proto.common.v1.InstrumentationScope;
export const { Writer, Reader } = protobuf;

// google.rpc.Status (googleapis google/rpc/status.proto), for OTLP/HTTP error bodies.
const rpc = protobuf.parse(`
syntax = "proto3";
package google.rpc;
message Any { string type_url = 1; bytes value = 2; }
message Status { int32 code = 1; string message = 2; repeated Any details = 3; }
`, { keepCase: true }).root;
export const RpcStatus = rpc.lookupType('google.rpc.Status');

/** Decodes a google.rpc.Status body (throws on malformed bytes). */
export function decodeRpcStatus(buf) {
  return RpcStatus.toObject(RpcStatus.decode(buf), { longs: String, defaults: true });
}

const TO_OBJECT = { longs: String, enums: Number, bytes: Buffer, defaults: true, arrays: true };

/** Replaces every Uint8Array in a toObject() tree with its lowercase hex string. */
export function bytesToHex(v) {
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
  if (Array.isArray(v)) return v.map(bytesToHex);
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = bytesToHex(x);
    return o;
  }
  return v;
}

/** Decodes an ExportTraceServiceRequest (protobuf bytes) into a plain object: longs as
 * decimal strings, enums as numbers, bytes as lowercase hex, defaults filled in. */
export function decodeTraceRequest(buf) {
  const msg = ExportTraceServiceRequest.decode(buf);
  return bytesToHex(ExportTraceServiceRequest.toObject(msg, TO_OBJECT));
}

const HEX_ID_KEYS = new Set(['traceId', 'spanId', 'parentSpanId']);
function otlpJsonToProtoJson(v, key) {
  if (Array.isArray(v)) return v.map((x) => otlpJsonToProtoJson(x));
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = otlpJsonToProtoJson(x, k);
    return o;
  }
  if (HEX_ID_KEYS.has(key) && typeof v === 'string') return Buffer.from(v, 'hex').toString('base64');
  return v;
}

/** Decodes an OTLP/JSON ExportTraceServiceRequest (hex ids, integer enums) into the same
 * normalized form as decodeTraceRequest. */
export function decodeTraceRequestJson(text) {
  const obj = otlpJsonToProtoJson(JSON.parse(text));
  const msg = ExportTraceServiceRequest.fromObject(obj);
  return bytesToHex(ExportTraceServiceRequest.toObject(msg, TO_OBJECT));
}

/** Flattens a decoded request into [{resource, resourceSchemaUrl, scope, scopeSchemaUrl, span}]. */
export function flattenSpans(req) {
  const out = [];
  for (const rs of req.resourceSpans || []) {
    for (const ss of rs.scopeSpans || []) {
      for (const span of ss.spans || []) {
        out.push({
          resource: rs.resource, resourceSchemaUrl: rs.schemaUrl,
          scope: ss.scope, scopeSchemaUrl: ss.schemaUrl, span,
        });
      }
    }
  }
  return out;
}

export const hexId = (bytes) => randomBytes(bytes).toString('hex');

let seq = 0;
/** A span as a fromObject()-able object; ids are hex strings here and converted on encode. */
export function makeSpan(over = {}) {
  seq += 1;
  const now = BigInt(Date.now()) * 1000000n;
  return {
    traceId: hexId(16),
    spanId: hexId(8),
    name: `span-${seq}`,
    kind: 2,
    startTimeUnixNano: String(now - 5000000n),
    endTimeUnixNano: String(now),
    attributes: [
      { key: 'seq', value: { intValue: String(seq) } },
      { key: 'http.route', value: { stringValue: '/users/:id' } },
    ],
    ...over,
  };
}

function idsToBuffers(span) {
  const s = { ...span };
  for (const k of ['traceId', 'spanId', 'parentSpanId']) {
    if (typeof s[k] === 'string') s[k] = Buffer.from(s[k], 'hex');
  }
  if (s.links) {
    s.links = s.links.map((l) => ({
      ...l,
      traceId: typeof l.traceId === 'string' ? Buffer.from(l.traceId, 'hex') : l.traceId,
      spanId: typeof l.spanId === 'string' ? Buffer.from(l.spanId, 'hex') : l.spanId,
    }));
  }
  return s;
}

export const defaultResource = (service = 'it-service') => ({
  attributes: [{ key: 'service.name', value: { stringValue: service } }],
});
export const defaultScope = { name: 'hotspan-it', version: '1.0.0' };

/** Encodes an ExportTraceServiceRequest with one resource and one scope holding `spans`
 * (objects as makeSpan() returns). */
export function encodeRequest(spans, { resource = defaultResource(), scope = defaultScope } = {}) {
  const msg = ExportTraceServiceRequest.fromObject({
    resourceSpans: [{ resource, scopeSpans: [{ scope, spans: spans.map(idsToBuffers) }] }],
  });
  return Buffer.from(ExportTraceServiceRequest.encode(msg).finish());
}

/** The same request as OTLP/JSON text (hex ids, integer enums, 64-bit ints as strings). */
export function encodeRequestJson(spans, { resource = defaultResource(), scope = defaultScope } = {}) {
  return JSON.stringify({
    resourceSpans: [{ resource, scopeSpans: [{ scope, spans }] }],
  });
}

/** Encodes one Span (makeSpan() shape) to bytes, with `extra` raw bytes appended inside it
 * (e.g. unknown fields: appending is valid protobuf). */
export function encodeSpanBytes(span, extra = Buffer.alloc(0)) {
  const bytes = Span.encode(Span.fromObject(idsToBuffers(span))).finish();
  return Buffer.concat([Buffer.from(bytes), extra]);
}

/** Wraps already-encoded Span messages into an ExportTraceServiceRequest by hand. */
export function wrapSpanBytes(spanBytesList, { resource = defaultResource(), scope = defaultScope } = {}) {
  const scopeBytes = InstrumentationScope.encode(InstrumentationScope.fromObject(scope)).finish();
  const ss = Writer.create();
  ss.uint32((1 << 3) | 2).bytes(scopeBytes);
  for (const sb of spanBytesList) ss.uint32((2 << 3) | 2).bytes(sb);
  const resBytes = Resource.encode(Resource.fromObject(resource)).finish();
  const rs = Writer.create();
  rs.uint32((1 << 3) | 2).bytes(resBytes);
  rs.uint32((2 << 3) | 2).bytes(ss.finish());
  const req = Writer.create();
  req.uint32((1 << 3) | 2).bytes(rs.finish());
  return Buffer.from(req.finish());
}

/** Raw bytes of unknown fields, one of each wire type, for "must survive" checks:
 * field 100 LEN, 101 VARINT, 102 I32, 103 I64 (numbers beyond Span's last field, 16). */
export function unknownFieldBytes(marker = 'hotspan-unknown-field-marker') {
  const w = Writer.create();
  w.uint32((100 << 3) | 2).string(marker);
  w.uint32((101 << 3) | 0).uint64(1234567890123);
  w.uint32((102 << 3) | 5).fixed32(0xdeadbeef);
  w.uint32((103 << 3) | 1).fixed64(0x0102030405060708);
  return Buffer.from(w.finish());
}

// ---- reading spans ----------------------------------------------------------------------

/** An OTLP AnyValue (decoded) as a plain JS value. */
export function plain(v) {
  if (!v) return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('arrayValue' in v) return (v.arrayValue.values || []).map(plain);
  if ('kvlistValue' in v) return Object.fromEntries((v.kvlistValue.values || []).map((kv) => [kv.key, plain(kv.value)]));
  if ('bytesValue' in v) return v.bytesValue;
  return undefined;
}

/** The attributes of a span (or a resource) as an object (the last value of a key that appears
 * twice wins). */
export const attrs = (span) => Object.fromEntries((span?.attributes || []).map((a) => [a.key, plain(a.value)]));
/** How many times key is in the span's attribute list (OTLP requires keys to be unique). */
export const attrCount = (span, key) => (span.attributes || []).filter((a) => a.key === key).length;
export const durationMs = (span) => Number(BigInt(span.endTimeUnixNano) - BigInt(span.startTimeUnixNano)) / 1e6;
