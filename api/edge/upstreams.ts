import { lookup } from "node:dns/promises";

/** How long one DNS answer for the API service is used: a replica scaled in or out is seen within this. */
const REFRESH_MS = 2000;

/**
 * The API replicas behind one compose service name: the engine's DNS answers with every replica's address. Picks
 * them in turn, skipping one that just refused a connection until the next refresh.
 */
export function createUpstreams(host: string, port: number, resolve = (h: string) => lookup(h, { all: true })) {
  let addresses: string[] = [];
  let fetchedAt = 0;
  let next = 0;
  const failed = new Set<string>();

  async function refresh(): Promise<void> {
    if (Date.now() - fetchedAt < REFRESH_MS && addresses.length > 0) return;
    const answer = await resolve(host);
    addresses = answer.map((a) => a.address).sort();
    fetchedAt = Date.now();
    failed.clear();
  }

  return {
    /** The next replica's origin, or undefined when none resolves. */
    async pick(): Promise<string | undefined> {
      await refresh().catch(() => {});
      const usable = addresses.filter((a) => !failed.has(a));
      const pool = usable.length > 0 ? usable : addresses;
      if (pool.length === 0) return undefined;
      const address = pool[next++ % pool.length]!;
      return `http://${address.includes(":") ? `[${address}]` : address}:${port}`;
    },
    /** The replica at this origin refused: leave it out until the next refresh. */
    refused(origin: string): void {
      failed.add(new URL(origin).hostname.replace(/^\[|\]$/g, ""));
    },
  };
}
