// What Linux says about a process it runs: memory from /proc/<pid>/status.
import { readFileSync } from 'node:fs';

/** The process's `VmHWM` (peak resident set) or another /proc/<pid>/status field, in bytes. */
export function procStatusBytes(pid, field = 'VmHWM') {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(text);
  if (!m) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(m[1]) * 1024;
}

export const MiB = 1024 * 1024;
