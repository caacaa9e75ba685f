import { copyFileSync, existsSync, fstatSync, readlinkSync, renameSync, statSync, truncateSync } from "node:fs";

/** As the containers' logs (orchestrator/sandbox/docker-driver.ts, compose.yaml): at most 3 files of 10 MB. */
export const LOG_MAX_BYTES = 10 * 1024 * 1024;
export const LOG_FILES = 3;
const CHECK_EVERY_MS = 10_000;

/**
 * Rotates the log at `path` once it holds `maxBytes` or more: `path.1` becomes `path.2` and so on (the oldest past
 * `files` is dropped), the log is copied to `path.1`, then emptied in place. Copy and truncate, not rename: the
 * writer keeps its descriptor (the API's stdout, opened in append mode by `svc self-host start`), and its next write
 * lands at the start of the emptied file. Lines written between the copy and the truncation are lost, as with
 * logrotate's copytruncate. Returns whether it rotated.
 */
export function rotateIfLarge(path: string, maxBytes = LOG_MAX_BYTES, files = LOG_FILES): boolean {
  const size = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
  if (size < maxBytes) return false;
  for (let i = files - 1; i > 1; i--) {
    if (existsSync(`${path}.${i - 1}`)) renameSync(`${path}.${i - 1}`, `${path}.${i}`);
  }
  copyFileSync(path, `${path}.1`);
  truncateSync(path, 0);
  return true;
}

/**
 * The file this process's stdout appends to, when it is one (the embedded stack's `logs/api.log`); undefined for a
 * terminal, a pipe or a container's log driver, which rotate on their own or not at all. Linux only: /proc.
 */
export function stdoutFile(): string | undefined {
  try {
    if (!fstatSync(1).isFile()) return undefined;
    return readlinkSync("/proc/self/fd/1");
  } catch {
    return undefined;
  }
}

/** Rotates the API's own log file as it grows, checked every 10 s; returns the function that stops. */
export function rotateOwnLog(onError: (err: Error) => void): () => void {
  const path = stdoutFile();
  if (!path) return () => {};
  const timer = setInterval(() => {
    try {
      rotateIfLarge(path);
    } catch (err) {
      onError(err as Error);
    }
  }, CHECK_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
