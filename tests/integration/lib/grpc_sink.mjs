// A TraceService/Export backend over gRPC (grpc-js) for the tests, and the raw-bytes codec that
// lets clients and servers pass protobuf bytes through untouched.
import grpc from '@grpc/grpc-js';
import * as otlp from './otlp.mjs';

export const EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
export const raw = { serialize: (b) => b, deserialize: (b) => b };

/**
 * A TraceService server keeping every request's spans and metadata; plaintext (h2c) unless
 * `credentials` (grpc.ServerCredentials) say otherwise. Resolves {port, requests, spans(pred),
 * stop()}, pred seeing each request's metadata.
 */
export async function startGrpcSink(credentials = grpc.ServerCredentials.createInsecure()) {
  const requests = [];
  const server = new grpc.Server();
  server.addService({
    Export: { path: EXPORT, requestStream: false, responseStream: false,
      requestSerialize: raw.serialize, requestDeserialize: raw.deserialize,
      responseSerialize: raw.serialize, responseDeserialize: raw.deserialize },
  }, {
    Export: (call, cb) => {
      requests.push({ spans: otlp.flattenSpans(otlp.decodeTraceRequest(call.request)),
        metadata: call.metadata.getMap() });
      cb(null, Buffer.alloc(0)); // an empty ExportTraceServiceResponse: full success
    },
  });
  const port = await new Promise((res, rej) => server.bindAsync('127.0.0.1:0', credentials,
    (err, p) => (err ? rej(err) : res(p))));
  return {
    port,
    requests,
    spans: (pred = () => true) => requests.filter((r) => pred(r.metadata)).flatMap((r) => r.spans),
    stop: () => new Promise((res) => server.tryShutdown(() => res())),
  };
}
