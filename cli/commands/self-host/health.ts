import { ApiHealth } from "../../../protocol/health.ts";

/** One health probe with a short timeout: true when the API answers healthy. */
export async function probeHealth(origin: string, timeoutMs = 1000): Promise<boolean> {
  try {
    const res = await fetch(`${origin}/v1/health`, { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok && ApiHealth.safeParse(await res.json()).success;
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
