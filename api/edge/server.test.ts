import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createEdge } from "./server.ts";
import { createUpstreams } from "./upstreams.ts";

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

describe("the edge with no API replica to answer", () => {
  const closing: (() => void)[] = [];
  afterEach(() => {
    for (const close of closing.splice(0)) close();
  });

  async function edgeOver(addresses: string[], port: number): Promise<string> {
    const edge = createEdge({
      upstreams: createUpstreams("api.test", port, async () => addresses.map((address) => ({ address, family: 4 }))),
    });
    await new Promise<void>((r) => edge.listen(0, "127.0.0.1", r));
    closing.push(() => edge.close());
    return `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
  }

  it("answers 503 UNAVAILABLE when the service name resolves to no replica, and when its replica refuses", async () => {
    for (const addresses of [[], ["127.0.0.1"]]) {
      const res = await fetch(`${await edgeOver(addresses, await closedPort())}/v1/health`);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        error: "no API replica answers yet; try again shortly",
        code: "UNAVAILABLE",
      });
    }
  });
});
