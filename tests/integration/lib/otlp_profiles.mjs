// OTLP profiles requests (ExportProfilesServiceRequest, opentelemetry-proto v1.11.0) for the
// tests, encoded by protobufjs from the .proto files in proto/ (no npm package ships the profiles
// schema): an encoder independent of hotspan's C code. A plain description (resources, scopes,
// profiles, samples with root-first stacks and span links) becomes the dictionary-based wire
// form; expectedPprof() says what the pprof Pyroscope's conversion makes of a profile must hold.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const protobuf = require('protobufjs');

const PROTO_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'proto');
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(PROTO_DIR, target);
root.loadSync('opentelemetry/proto/collector/profiles/v1development/profiles_service.proto');
root.resolveAll();

const svc = 'opentelemetry.proto.collector.profiles.v1development';
export const ExportProfilesServiceRequest = root.lookupType(`${svc}.ExportProfilesServiceRequest`);
export const ExportProfilesServiceResponse = root.lookupType(`${svc}.ExportProfilesServiceResponse`);

const hex = (s, n) => {
  const b = Buffer.from(s, 'hex');
  if (b.length !== n) throw new Error(`${s}: want ${n} bytes of hex`);
  return b;
};

const anyValue = (v) => {
  if (typeof v === 'number' && Number.isInteger(v)) return { intValue: v };
  if (typeof v === 'bigint') return { intValue: v.toString() };
  if (typeof v === 'boolean') return { boolValue: v };
  return { stringValue: String(v) };
};

const keyValues = (attrs = {}) => Object.entries(attrs).map(([key, v]) => ({ key, value: anyValue(v) }));

/** The dictionary under construction: every table starts with its zero entry. */
class Dictionary {
  constructor() {
    this.strings = [''];
    this.stringIds = new Map([['', 0]]);
    this.functions = [{}];
    this.functionIds = new Map();
    this.locations = [{}];
    this.stacks = [{}];
    this.stackIds = new Map();
    this.links = [{ traceId: Buffer.alloc(16), spanId: Buffer.alloc(8) }];
    this.linkIds = new Map();
    this.attributes = [{}];
    this.attributeIds = new Map();
  }

  str(s) {
    if (!this.stringIds.has(s)) {
      this.stringIds.set(s, this.strings.length);
      this.strings.push(s);
    }
    return this.stringIds.get(s);
  }

  // One function per name, and one location (one line) per function.
  location(name, files) {
    if (!this.functionIds.has(name)) {
      const fi = this.functions.length;
      this.functions.push({
        nameStrindex: this.str(name), systemNameStrindex: this.str(name),
        filenameStrindex: this.str(files[name] ?? `${name}.go`), startLine: 10 * fi,
      });
      this.functionIds.set(name, fi);
      this.locations.push({ address: 0x401000 + 16 * fi, lines: [{ functionIndex: fi, line: 10 * fi + 1 }] });
    }
    return this.functionIds.get(name); // location i holds function i
  }

  stack(rootFirst, files) {
    const ids = [...rootFirst].reverse().map((n) => this.location(n, files)); // leaf first
    const key = ids.join(',');
    if (!this.stackIds.has(key)) {
      this.stackIds.set(key, this.stacks.length);
      this.stacks.push({ locationIndices: ids });
    }
    return this.stackIds.get(key);
  }

  link({ traceId, spanId }) {
    const key = `${traceId}/${spanId}`;
    if (!this.linkIds.has(key)) {
      this.linkIds.set(key, this.links.length);
      this.links.push({ traceId: hex(traceId, 16), spanId: hex(spanId, 8) });
    }
    return this.linkIds.get(key);
  }

  attributeIndices(attrs = {}) {
    return Object.entries(attrs).map(([k, v]) => {
      const key = `${k}\u0000${typeof v}\u0000${v}`;
      if (!this.attributeIds.has(key)) {
        this.attributeIds.set(key, this.attributes.length);
        this.attributes.push({ keyStrindex: this.str(k), value: anyValue(v) });
      }
      return this.attributeIds.get(key);
    });
  }

  toObject() {
    return {
      mappingTable: [{}], locationTable: this.locations, functionTable: this.functions,
      linkTable: this.links, stringTable: this.strings, attributeTable: this.attributes,
      stackTable: this.stacks,
    };
  }
}

/**
 * Builds a request object (protobufjs's shape) from a description:
 *   { resources: [{ attributes: {'service.name': 'checkout', ...},
 *       scopes: [{ name, attributes, profiles: [{
 *         sampleType: ['samples', 'count'], periodType: ['cpu', 'nanoseconds'] (or null),
 *         period: 10000000, timeNanos (BigInt), durationNanos (BigInt), attributes,
 *         samples: [{ stack: ['main', 'handle', 'leaf'] (ROOT FIRST), value: 3
 *                     (or values: [...] with timestamps: [BigInt...]),
 *                     link: { traceId: 32 hex, spanId: 16 hex }, attributes: {k: v} }] }] }] }],
 *     files: { functionName: 'file.js' } (default `<name>.go`) }
 */
export function buildProfilesRequest({ resources, files = {} }) {
  const d = new Dictionary();
  const resourceProfiles = resources.map((r) => ({
    resource: { attributes: keyValues(r.attributes) },
    scopeProfiles: (r.scopes || []).map((sc) => ({
      scope: { name: sc.name ?? 'hotspan-tests', attributes: keyValues(sc.attributes) },
      profiles: (sc.profiles || []).map((p) => {
        const [type, unit] = p.sampleType ?? ['samples', 'count'];
        const periodType = p.periodType === undefined ? ['cpu', 'nanoseconds'] : p.periodType;
        return {
          sampleType: { typeStrindex: d.str(type), unitStrindex: d.str(unit) },
          periodType: periodType ? { typeStrindex: d.str(periodType[0]), unitStrindex: d.str(periodType[1]) } : null,
          period: p.period ?? 10000000,
          timeUnixNano: String(p.timeNanos ?? BigInt(Date.now()) * 1000000n),
          durationNano: String(p.durationNanos ?? 10000000000n),
          attributeIndices: d.attributeIndices(p.attributes),
          samples: p.samples.map((s) => ({
            stackIndex: d.stack(s.stack, files),
            linkIndex: s.link ? d.link(s.link) : 0,
            attributeIndices: d.attributeIndices(s.attributes),
            values: (s.values ?? [s.value]).map(String),
            timestampsUnixNano: (s.timestamps ?? []).map(String),
          })),
        };
      }),
    })),
  }));
  return { resourceProfiles, dictionary: d.toObject() };
}

/** Encodes a description (see buildProfilesRequest) to ExportProfilesServiceRequest bytes. */
export function encodeProfilesRequest(desc) {
  return encodeProfilesObject(buildProfilesRequest(desc));
}

/** Encodes a request object (buildProfilesRequest's shape, perhaps altered to be wrong on
 * purpose: protobufjs checks types, not references) to bytes. */
export function encodeProfilesObject(obj) {
  const msg = ExportProfilesServiceRequest.fromObject(obj);
  const problem = ExportProfilesServiceRequest.verify(msg);
  if (problem) throw new Error(`ExportProfilesServiceRequest: ${problem}`);
  return Buffer.from(ExportProfilesServiceRequest.encode(msg).finish());
}

/** The same request as OTLP/JSON text (wire.md §2.1): lowerCamelCase keys, 64-bit integers as
 * strings, and trace, span and profile ids as hex where proto3 JSON would write base64. */
export function encodeProfilesObjectJson(obj) {
  const msg = ExportProfilesServiceRequest.fromObject(obj);
  const plain = ExportProfilesServiceRequest.toObject(msg, { longs: String, bytes: String });
  const hexIds = (o) => {
    if (Array.isArray(o)) { o.forEach(hexIds); return; }
    if (!o || typeof o !== 'object') return;
    for (const [k, v] of Object.entries(o)) {
      if (['traceId', 'spanId', 'profileId'].includes(k) && typeof v === 'string') {
        o[k] = Buffer.from(v, 'base64').toString('hex');
      } else {
        hexIds(v);
      }
    }
  };
  hexIds(plain);
  return JSON.stringify(plain);
}

/** Decodes request bytes into plain objects (int64 as strings, bytes as Buffers). */
export function decodeProfilesRequest(buf) {
  return ExportProfilesServiceRequest.toObject(ExportProfilesServiceRequest.decode(buf),
    { longs: String, bytes: Buffer, defaults: true, arrays: true });
}

/**
 * What the pprof Pyroscope's OTLP conversion makes of one described profile holds, in
 * pprof.mjs's summarizePprof shape: {types: [[t, u]], totals, functions: {name: {self, total}},
 * spans: {spanIdHex: [v]}, samples}, values as BigInt. A sample counts the sum of its values (or
 * one per timestamp); samples/count sampled in cpu/nanoseconds become cpu nanoseconds.
 */
export function expectedPprof(p) {
  const [type, unit] = p.sampleType ?? ['samples', 'count'];
  const periodType = p.periodType === undefined ? ['cpu', 'nanoseconds'] : p.periodType;
  const period = BigInt(p.period ?? 10000000);
  const toCpu = type === 'samples' && unit === 'count' && period !== 0n &&
    periodType && periodType[0] === 'cpu' && periodType[1] === 'nanoseconds';
  const functions = {};
  const spans = {};
  let total = 0n;
  for (const s of p.samples) {
    let v = s.values ? s.values.reduce((a, x) => a + BigInt(x), 0n) : BigInt(s.value ?? 0);
    if (s.values && s.values.length === 0) v = BigInt((s.timestamps ?? []).length);
    if (toCpu) v *= period;
    total += v;
    for (const name of new Set(s.stack)) {
      functions[name] ??= { self: [0n], total: [0n] };
      functions[name].total[0] += v;
    }
    if (s.stack.length) functions[s.stack[s.stack.length - 1]].self[0] += v;
    if (s.link) spans[s.link.spanId] = [(spans[s.link.spanId]?.[0] ?? 0n) + v];
  }
  return {
    types: [toCpu ? ['cpu', 'nanoseconds'] : [type, unit]], totals: [total], functions, spans,
    samples: p.samples.length,
  };
}
