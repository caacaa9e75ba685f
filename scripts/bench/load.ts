import autocannon from "autocannon";

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

/**
 * 16 connections of load from this process for `duration` seconds. A failed request fails the run, except with
 * `strict` off (a reference server whose own hiccups must not sink the figures).
 */
export async function load(
  url: string,
  options: { headers?: Record<string, string>; duration?: number; strict?: boolean } = {},
) {
  const result = await autocannon({ url, connections: 16, duration: options.duration ?? 4, headers: options.headers });
  if ((options.strict ?? true) && (result.non2xx > 0 || result.errors > 0))
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result;
}
