// Test certificates, made with Debian's `openssl` CLI in a temp dir: a CA, a server cert for
// 127.0.0.1/localhost, a client cert from that CA, and a client cert from a second CA (the
// "wrong CA"). issueServer() and issueClient() make more (new CN and serial) for reload tests.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const run = (args, cwd) => execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });

function makeCa(dir, name) {
  run(['req', '-x509', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'], dir);
}

let serial = 1000 + Math.floor(Math.random() * 1000);

/** A leaf cert signed by CA `ca` (its .pem/.key in dir): writes name.pem and name.key. */
function makeLeaf(dir, ca, name, cn, ext) {
  run(['req', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
  writeFileSync(join(dir, `${name}.ext`), ext);
  serial += 1;
  run(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`,
    '-set_serial', String(serial), '-days', '2', '-out', `${name}.pem`, '-extfile', `${name}.ext`], dir);
  return serial;
}

const SERVER_EXT = 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n';
const CLIENT_EXT = 'extendedKeyUsage=clientAuth\n';

/**
 * Makes the set; returns paths, PEM contents and helpers:
 * {dir, ca, caKey, server, serverKey, serverSerial, client, clientKey, wrongClient,
 *  wrongClientKey, read(path), issueServer(name, cn) -> {cert, key, serial}, cleanup()}.
 */
export function makeCerts() {
  const dir = mkdtempSync(join(tmpdir(), 'hotspan-tls-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'otherca');
  const serverSerial = makeLeaf(dir, 'ca', 'server', 'hotspan-test-server', SERVER_EXT);
  makeLeaf(dir, 'ca', 'client', 'hotspan-test-client', CLIENT_EXT);
  makeLeaf(dir, 'otherca', 'wrongclient', 'hotspan-wrong-client', CLIENT_EXT);
  const p = (n) => join(dir, n);
  return {
    dir,
    ca: p('ca.pem'),
    caKey: p('ca.key'),
    otherCa: p('otherca.pem'),
    server: p('server.pem'),
    serverKey: p('server.key'),
    serverSerial,
    client: p('client.pem'),
    clientKey: p('client.key'),
    wrongClient: p('wrongclient.pem'),
    wrongClientKey: p('wrongclient.key'),
    read: (f) => readFileSync(f),
    /** A new server cert from the same CA with a new CN and serial. */
    issueServer(name, cn) {
      const s = makeLeaf(dir, 'ca', name, cn, SERVER_EXT);
      return { cert: p(`${name}.pem`), key: p(`${name}.key`), serial: s };
    },
    /** A new client cert from the same CA with a new CN and serial. */
    issueClient(name, cn) {
      const s = makeLeaf(dir, 'ca', name, cn, CLIENT_EXT);
      return { cert: p(`${name}.pem`), key: p(`${name}.key`), serial: s };
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Node prints serials as upper-case hex without leading zeros' separators. */
export const serialHex = (n) => n.toString(16).toUpperCase().padStart(4, '0');
