// A TraceService/Export backend over gRPC (grpc-js) for the tests, a ProfilesService/Export one
// keeping each request's bytes, and the raw-bytes codec that lets clients and servers pass
// protobuf bytes through untouched.
import grpc from '@grpc/grpc-js';
import * as otlp from './otlp.mjs';

export const EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
export const PROFILES_EXPORT =
  '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export';
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

/**
 * A ProfilesService server (h2c) keeping every request's message bytes as received and its
 * metadata. Resolves {port, requests: [{body: Buffer, metadata}], stop()}.
 */
export async function startGrpcProfilesSink() {
  const requests = [];
  const server = new grpc.Server();
  server.addService({
    Export: { path: PROFILES_EXPORT, requestStream: false, responseStream: false,
      requestSerialize: raw.serialize, requestDeserialize: raw.deserialize,
      responseSerialize: raw.serialize, responseDeserialize: raw.deserialize },
  }, {
    Export: (call, cb) => {
      requests.push({ body: Buffer.from(call.request), metadata: call.metadata.getMap() });
      cb(null, Buffer.alloc(0)); // an empty ExportProfilesServiceResponse: full success
    },
  });
  const port = await new Promise((res, rej) => server.bindAsync('127.0.0.1:0',
    grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))));
  return { port, requests, stop: () => new Promise((res) => server.tryShutdown(() => res())) };
}
