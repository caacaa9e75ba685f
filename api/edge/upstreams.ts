import { lookup } from "node:dns/promises";

/** How long one DNS answer for the API service is used: a replica scaled in or out is seen within this. */
const REFRESH_MS = 2000;

export type Upstreams = ReturnType<typeof createUpstreams>;

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
    addresses = answer.map((a) => a.address.toLowerCase()).sort();
    fetchedAt = Date.now();
    failed.clear();
  }

  const origin = (address: string) => `http://${address.includes(":") ? `[${address}]` : address}:${port}`;

  return {
    /** The next replica's origin, or undefined when none resolves. */
    async pick(): Promise<string | undefined> {
      await refresh().catch(() => {});
      const usable = addresses.filter((a) => !failed.has(a));
      const pool = usable.length > 0 ? usable : addresses;
      if (pool.length === 0) return undefined;
      return origin(pool[next++ % pool.length]!);
    },
    /**
     * The origin of the replica at `address` while it is one of those the name resolves to and has not just
     * refused; undefined otherwise. Never an origin of any other address: a hint picks among the replicas, it does
     * not make the edge a relay to wherever a request points.
     */
    async replica(address: string): Promise<string | undefined> {
      await refresh().catch(() => {});
      const wanted = address.toLowerCase();
      return addresses.includes(wanted) && !failed.has(wanted) ? origin(wanted) : undefined;
    },
    /** The replica at this origin refused: leave it out until the next refresh. */
    refused(origin: string): void {
      failed.add(new URL(origin).hostname.replace(/^\[|\]$/g, ""));
    },
  };
}
