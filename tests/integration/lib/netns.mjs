// Names and addresses a test controls without root or a DNS server: a hosts file that hotspan
// sees as /etc/hosts (startHotspan's `hosts` option bind-mounts it in a user+mount namespace),
// rewritten in place (the same inode: a rename would not show through the bind mount; glibc reads
// /etc/hosts at every lookup and Debian's host.conf has `multi on`, so one name may have several
// lines, one address each); and ports free on several loopback addresses at once (all of 127/8
// is loopback on Linux), so gateways on 127.0.0.9, .10, ... share their ports, as DNS-named
// backends must.
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';

/** A hosts file of its own: {path, set(name, addrs)}. */
export function hostsFile(name, addrs = []) {
  const dir = mkdtempSync(join(tmpdir(), 'hotspan-hosts-'));
  const path = join(dir, 'hosts');
  const set = (list) => {
    const lines = ['127.0.0.1 localhost', ...list.map((a) => `${a} ${name}`)];
    writeFileSync(path, `${lines.join('\n')}\n`); // O_TRUNC, same inode
  };
  set(addrs);
  return { path, set };
}

function canListen(host, port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/** `n` ports, each free on every address of `hosts`. */
export async function sharedPorts(hosts, n) {
  const out = [];
  while (out.length < n) {
    const probe = net.createServer();
    await new Promise((r) => probe.listen(0, hosts[0], r));
    const { port } = probe.address();
    await new Promise((r) => probe.close(r));
    let ok = !out.includes(port);
    for (const h of hosts) ok = ok && await canListen(h, port);
    if (ok) out.push(port);
  }
  return out;
}
