import { describe, expect, it } from "vitest";
import { resolveBridgeHost } from "./bridge-host.ts";

const answers = (...list: [string, number][]) => ({
  hostname: () => "0f3c2a9e1b7d",
  resolve: async () => list.map(([address, family]) => ({ address, family })),
});

describe("SVC_LINK_BRIDGE_HOST", () => {
  it("keeps an address as given, and resolves auto to the container's own address on its network", async () => {
    expect(await resolveBridgeHost("127.0.0.1", answers())).toBe("127.0.0.1");
    expect(await resolveBridgeHost("10.0.1.5", answers())).toBe("10.0.1.5");
    expect(await resolveBridgeHost("auto", answers(["127.0.1.1", 4], ["fd00::9", 6], ["10.0.1.9", 4]))).toBe(
      "10.0.1.9",
    );
    expect(await resolveBridgeHost("auto", answers(["fd00::9", 6]))).toBe("fd00::9");
  });

  it("stops the start, naming the setting, when auto finds nothing but loopback or nothing at all", async () => {
    await expect(resolveBridgeHost("auto", answers(["127.0.0.1", 4], ["::1", 6]))).rejects.toThrow(
      "invalid configuration: SVC_LINK_BRIDGE_HOST=auto: 0f3c2a9e1b7d resolves to no address but loopback",
    );
    const failing = {
      hostname: () => "0f3c2a9e1b7d",
      resolve: () => Promise.reject(new Error("getaddrinfo ENOTFOUND")),
    };
    await expect(resolveBridgeHost("auto", failing)).rejects.toThrow(
      "SVC_LINK_BRIDGE_HOST=auto: cannot resolve 0f3c2a9e1b7d: getaddrinfo ENOTFOUND",
    );
  });
});
