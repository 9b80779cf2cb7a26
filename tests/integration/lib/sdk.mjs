// The real OpenTelemetry JS SDK: makes a varied set of finished spans (every attribute value
// type, events, links, error status, every kind, nested parents) and exports a list of spans
// through the real OTLP exporters (protobuf or JSON over HTTP).
import { trace, context, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';

export { SpanKind, SpanStatusCode };

/** A provider whose finished spans land in memory (read them with .memory.getFinishedSpans()). */
export function makeProvider({ service = 'checkout', extra = {} } = {}) {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: service,
      [ATTR_SERVICE_VERSION]: '2.4.1',
      'deployment.environment.name': 'it',
      'host.cpu.count': 2,
      'process.runtime.is_lts': true,
      'cloud.load_factor': 0.75,
      'team.owners': ['ana', 'bo'],
      ...extra,
    }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
    spanLimits: { attributeCountLimit: 128, eventCountLimit: 128, linkCountLimit: 128 },
  });
  return { provider, memory };
}

const KINDS = [SpanKind.INTERNAL, SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER];

/**
 * Makes `traces` traces, each a server root with nested children (client, producer, consumer,
 * internal), carrying attributes of every value type, events with attributes, links to spans
 * of earlier traces, and an error status with a message on some. Returns the ReadableSpans.
 */
export function makeSpans({ traces = 5, childrenPerTrace = 4, service = 'checkout', tag = 'run' } = {}) {
  const { provider, memory } = makeProvider({ service });
  const tracerA = provider.getTracer('it.checkout.http', '1.2.3');
  const tracerB = provider.getTracer('it.checkout.db');
  const base = Date.now() - 60000;
  let linkTargets = [];
  for (let t = 0; t < traces; t += 1) {
    const t0 = base + t * 1000;
    const root = tracerA.startSpan(`GET /cart/${t}`, {
      kind: SpanKind.SERVER,
      startTime: t0,
      attributes: {
        'http.request.method': 'GET',
        'http.response.status_code': 200 + t,
        'url.path': `/cart/${t}`,
        'it.tag': tag,
        'it.bool': t % 2 === 0,
        'it.double': 3.25 + t,
        'it.negative': -42 - t,
        'it.big': 2 ** 40 + t,
        'it.strings': ['a', 'b', `c${t}`],
        'it.ints': [1, 2, 3, t],
        'it.doubles': [1.5, -2.25, 1e-9],
        'it.bools': [true, false, true],
        'it.empty': '',
        'it.unicode': 'größe ✓ 数据',
      },
      links: linkTargets.map((sc, i) => ({ context: sc, attributes: { 'link.index': i, 'link.why': 'follows' } })),
    });
    root.addEvent('cache.miss', { 'cache.key': `cart:${t}`, 'cache.size': 12, 'cache.hit_ratio': 0.5, 'cache.warm': false }, t0 + 1);
    root.addEvent('no-attrs', t0 + 2);
    const rootCtx = trace.setSpan(context.active(), root);
    let parentCtx = rootCtx;
    for (let c = 0; c < childrenPerTrace; c += 1) {
      const kind = KINDS[(c + 2) % KINDS.length];
      const tracer = c % 2 ? tracerB : tracerA;
      const child = tracer.startSpan(c % 2 ? 'SELECT preferences' : `step ${c}`, {
        kind,
        startTime: t0 + 5 + c,
        attributes: { 'db.system.name': 'postgresql', 'it.child': c, 'it.trace': t, 'it.ratio': c / 7 },
      }, parentCtx);
      if (c === 1) {
        child.recordException(new Error(`boom ${t}`), t0 + 6 + c);
        child.setStatus({ code: SpanStatusCode.ERROR, message: `query failed: boom ${t}` });
      } else if (c === 2) {
        child.setStatus({ code: SpanStatusCode.OK });
      }
      child.end(t0 + 20 + c);
      // alternate: nest the next child under this one, or keep the same parent
      if (c % 2 === 0) parentCtx = trace.setSpan(context.active(), child);
    }
    root.end(t0 + 100);
    linkTargets = [root.spanContext()];
  }
  const spans = memory.getFinishedSpans().slice();
  return { spans, provider };
}

function exportWith(exporter, spans) {
  return new Promise((resolve, reject) => {
    exporter.export(spans, (result) => {
      if (result.code === 0) resolve(result);
      else reject(result.error || new Error(`export failed with code ${result.code}`));
    });
  });
}

/** Exports `spans` in one request through the protobuf (`proto`) or JSON (`json`) exporter. */
export async function exportSpans(spans, { url, encoding = 'proto', headers = {}, compression = 'none' }) {
  const Exporter = encoding === 'json' ? JsonExporter : ProtoExporter;
  const exporter = new Exporter({ url, headers, compression, timeoutMillis: 10000 });
  try {
    return await exportWith(exporter, spans);
  } finally {
    await exporter.shutdown();
  }
}
