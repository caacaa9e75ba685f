import { describe, expect, it } from "vitest";
import { trustedProxy } from "./trusted-proxy.ts";

describe("trustedProxy", () => {
  it("trusts only the named proxy's addresses, and only as the socket's own peer", async () => {
    const proxy = trustedProxy("edge", async () => [{ address: "172.18.0.3", family: 4 }]);
    await proxy.ready;
    expect(proxy.trust("172.18.0.3", 0)).toBe(true);
    expect(proxy.trust("::ffff:172.18.0.3", 0)).toBe(true);
    // A hop the edge passed on (what a client wrote into X-Forwarded-For) is never trusted to name another.
    expect(proxy.trust("172.18.0.3", 1)).toBe(false);
    // A sandbox or anyone else connecting directly.
    expect(proxy.trust("172.18.0.9", 0)).toBe(false);
    proxy.stop();
  });

  it("trusts nobody while the name does not resolve", async () => {
    const proxy = trustedProxy("edge", async () => {
      throw new Error("ENOTFOUND");
    });
    await proxy.ready;
    expect(proxy.trust("172.18.0.3", 0)).toBe(false);
    proxy.stop();
  });
});
