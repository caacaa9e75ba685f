import { describe, expect, it } from "vitest";
import { createRemoteAddressCheck, forbiddenKind, pinnedAddresses, remoteHostOf } from "./remote-address.ts";

describe("remote addresses", () => {
  it("reads the host and port git connects to from every accepted URL form", () => {
    expect(remoteHostOf("https://bot:x@Git.Example.test/o/r.git")).toEqual({
      scheme: "https",
      host: "git.example.test",
      port: 443,
    });
    expect(remoteHostOf("http://10.0.0.1:8080")).toEqual({ scheme: "http", host: "10.0.0.1", port: 8080 });
    expect(remoteHostOf("ssh://git@[::1]:2222/r.git")).toEqual({ scheme: "ssh", host: "::1", port: 2222 });
    expect(remoteHostOf("git://h/r.git")).toEqual({ scheme: "git", host: "h", port: 9418 });
    expect(remoteHostOf("git@h.test:o/r.git")).toEqual({ scheme: "ssh", host: "h.test", port: 22 });
    expect(remoteHostOf("git@[fe80::1]:r.git")).toEqual({ scheme: "ssh", host: "fe80::1", port: 22 });
    // Authorities a URL parser and curl could read differently are no host at all.
    for (const url of ["http://a@b@127.0.0.1/x", "http://h:/x", "git@[h:22]:x", "/srv/x.git", "file:///x"])
      expect(remoteHostOf(url), url).toBeUndefined();
  });

  it("names what a non-public address is, IPv4-mapped IPv6 included", () => {
    expect(forbiddenKind("127.0.0.53")).toBe("a loopback address");
    expect(forbiddenKind("::ffff:127.0.0.1")).toBe("a loopback address");
    expect(forbiddenKind("::ffff:a00:1")).toBe("a private address");
    expect(forbiddenKind("::ffff:169.254.169.254")).toBe("a cloud metadata address");
    expect(forbiddenKind("100.100.100.200")).toBe("a cloud metadata address");
    expect(forbiddenKind("172.31.255.255")).toBe("a private address");
    expect(forbiddenKind("255.255.255.255")).toBe("a multicast or reserved address");
    for (const address of ["140.82.112.3", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"])
      expect(forbiddenKind(address), address).toBeUndefined();
  });

  it("trusts allowed hosts by name or host:port without resolving them", async () => {
    const check = createRemoteAddressCheck({ allowedHosts: ["git.internal", "[::1]:2222", "127.0.0.1:8080"] });
    expect(await check("https://git.internal/r.git")).toMatchObject({ ok: true, addresses: [] });
    expect(await check("ssh://git@[::1]:2222/r.git")).toMatchObject({ ok: true });
    expect(await check("http://127.0.0.1:8080/r.git")).toMatchObject({ ok: true });
    expect(await check("http://127.0.0.1:8081/r.git")).toMatchObject({ ok: false });
    expect(await check("git@[::1]:r.git")).toMatchObject({ ok: false });
  });

  it("pins http(s) remotes named by DNS to the addresses checked, nothing else", () => {
    const remote = { scheme: "https", host: "git.test", port: 443 } as const;
    expect(pinnedAddresses({ ok: true, remote, addresses: ["140.82.112.3", "2606:4700::1"] })).toEqual([
      ["http.curloptResolve", "git.test:443:140.82.112.3,[2606:4700::1]"],
    ]);
    expect(pinnedAddresses({ ok: true, remote: { ...remote, scheme: "ssh" }, addresses: ["140.82.112.3"] })).toEqual(
      [],
    );
    expect(pinnedAddresses({ ok: true, remote, addresses: [] })).toEqual([]);
  });
});
