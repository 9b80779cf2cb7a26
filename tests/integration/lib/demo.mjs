// lib/demo.mjs: what tests of `hotspan demo` share: the embedded default config
// (config/default.yaml, what the README's first command runs) moved to free loopback ports. The
// demo sends to its receivers' configured ports, so port 0 will not do.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { writeConfig } from './hotspan.mjs';

const DEFAULT_CONFIG = new URL('../../../config/default.yaml', import.meta.url);

/** A port nobody listens on right now (bound on 0, then released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** config/default.yaml with its three ports replaced by free ones: {file, ports}. */
export async function demoConfig() {
  const ports = { otlp: await freePort(), pyro: await freePort(), admin: await freePort() };
  let yaml = readFileSync(DEFAULT_CONFIG, 'utf8');
  for (const [from, to] of [['0.0.0.0:4318', ports.otlp], ['0.0.0.0:4040', ports.pyro],
    ['127.0.0.1:13133', ports.admin]]) {
    if (!yaml.includes(`endpoint: ${from}`) && !yaml.includes(`admin: ${from}`)) {
      throw new Error(`config/default.yaml no longer has ${from}: update lib/demo.mjs`);
    }
    yaml = yaml.replace(`endpoint: ${from}`, `endpoint: 127.0.0.1:${to}`).replace(`admin: ${from}`, `admin: 127.0.0.1:${to}`);
  }
  return { file: writeConfig(yaml).file, ports };
}
