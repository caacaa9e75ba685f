import { ApiHealth } from "../../../protocol/health.ts";
import { httpRequest } from "../../http-client.ts";

/** One health probe with a short timeout: the API's health when it answers healthy. */
export async function readHealth(origin: string, timeoutMs = 1000): Promise<ApiHealth | undefined> {
  try {
    const res = await httpRequest(`${origin}/v1/health`, { timeoutMs });
    const parsed = ApiHealth.safeParse(JSON.parse(await res.text()));
    return res.ok && parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** One health probe with a short timeout: true when the API answers healthy. */
export const probeHealth = async (origin: string, timeoutMs = 1000) =>
  (await readHealth(origin, timeoutMs)) !== undefined;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
