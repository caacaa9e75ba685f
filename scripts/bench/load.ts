import { fileURLToPath } from "node:url";
import type autocannon from "autocannon";
import { execa } from "execa";

/** Polls until `url` answers at all (any status), for servers just spawned. */
export async function waitUntilUp(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(url).then(
        () => true,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

const AUTOCANNON = fileURLToPath(import.meta.resolve("autocannon/autocannon.js"));

/**
 * 16 connections of load for `duration` seconds, from a process of its own: a server measured in this process
 * (an API started by the bench) must not share its event loop with the load. A failed request fails the run,
 * except with `strict` off (a reference server whose own hiccups must not sink the figures).
 */
export async function load(
  url: string,
  options: { headers?: Record<string, string>; duration?: number; strict?: boolean } = {},
): Promise<autocannon.Result> {
  const headers = Object.entries(options.headers ?? {}).flatMap(([k, v]) => ["-H", `${k}=${v}`]);
  const run = await execa(
    process.execPath,
    [AUTOCANNON, "-c", "16", "-d", String(options.duration ?? 4), "-j", ...headers, url],
    { reject: false },
  );
  if (run.exitCode !== 0) throw new Error(`autocannon ${url} exited ${run.exitCode}: ${run.stderr.slice(-500)}`);
  const result = JSON.parse(run.stdout) as autocannon.Result;
  if ((options.strict ?? true) && (result.non2xx > 0 || result.errors > 0))
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result;
}
