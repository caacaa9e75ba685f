import { describe, expect, it } from "vitest";
import {
  createHostFirewall,
  firewallChain,
  hostPortsOf,
  hostUrlForSandbox,
  type IptablesRun,
} from "./host-firewall.ts";

/** iptables' filter table as far as the firewall uses it: chains of rule specs, printed the way `-S` prints them. */
function fakeIptables() {
  const chains = new Map<string, string[]>([["INPUT", ["-i lo -j ACCEPT"]]]);
  const ok = (stdout = "") => ({ exitCode: 0, stdout, stderr: "" });
  const fail = (stderr: string) => ({ exitCode: 1, stdout: "", stderr });
  // `-S` quotes comments and spells out the tcp match, as the real one does.
  const printed = (spec: string[]) =>
    spec
      .join(" ")
      .replace("-p tcp --dport", "-p tcp -m tcp --dport")
      .replace(/--comment (\S+)/, '--comment "$1"');
  const run: IptablesRun = async ([op, chain = "", ...rest]) => {
    const rules = chains.get(chain);
    if (op === "-N") {
      if (rules) return fail("iptables: Chain already exists.");
      chains.set(chain, []);
      return ok();
    }
    if (!rules) return fail("iptables: No chain/target/match by that name.");
    switch (op) {
      case "-S":
        return ok([`-N ${chain}`, ...rules.map((r) => `-A ${chain} ${r}`)].join("\n"));
      case "-C":
        return rules.includes(printed(rest)) ? ok() : fail("iptables: Bad rule");
      case "-A":
        rules.push(printed(rest));
        return ok();
      case "-I": {
        const [position, ...spec] = rest;
        if (Number(position) - 1 > rules.length) return fail("iptables: Index of insertion too big.");
        rules.splice(Number(position) - 1, 0, printed(spec));
        return ok();
      }
      case "-D": {
        // What `-S` printed, quotes and all, as the firewall passes it back without them.
        const at = rules.findIndex((r) => r.replace(/"/g, "") === rest.join(" "));
        if (at < 0) return fail("iptables: Bad rule");
        rules.splice(at, 1);
        return ok();
      }
      case "-F":
        rules.length = 0;
        return ok();
      case "-X":
        if (rules.length > 0 || [...chains.values()].some((c) => c.some((r) => r.endsWith(`-j ${chain}`))))
          return fail("iptables: Directory not empty.");
        chains.delete(chain);
        return ok();
    }
    return fail(`unknown ${op}`);
  };
  return { run, chains };
}

describe("the host firewall (iptables behind a fake)", () => {
  const chain = firewallChain("1b8196cf-93a7-41b4-a99e-c4bf24f1dd98");

  it("names the chain after the installation, short enough for iptables", () => {
    expect(chain).toBe("SVC-1b8196cf93a7");
  });

  it("accepts answers, then each holder's ports, and drops the rest, for the bridges it covers", async () => {
    const { run, chains } = fakeIptables();
    const firewall = createHostFirewall({ run });
    await firewall.open(chain, "api-a", [7700, 11434, 7700]);
    await firewall.open(chain, "api-b", [7800]);
    await firewall.cover(chain, ["-i", "br-0123456789ab"]);
    await firewall.cover(chain, ["-i", "br-0123456789ab"]);
    await firewall.cover(chain, ["-i", "br-ba9876543210"]);
    expect(chains.get(chain)).toEqual([
      "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
      '-p tcp -m tcp --dport 7800 -m comment --comment "svc-holder:api-b" -j ACCEPT',
      '-p tcp -m tcp --dport 11434 -m comment --comment "svc-holder:api-a" -j ACCEPT',
      '-p tcp -m tcp --dport 7700 -m comment --comment "svc-holder:api-a" -j ACCEPT',
      "-j DROP",
    ]);
    expect(chains.get("INPUT")).toEqual([
      `-i br-ba9876543210 -j ${chain}`,
      `-i br-0123456789ab -j ${chain}`,
      "-i lo -j ACCEPT",
    ]);

    // Opening again replaces the holder's ports rather than adding to them.
    await firewall.open(chain, "api-a", [7701]);
    expect(chains.get(chain)?.filter((r) => r.includes("api-a"))).toEqual([
      '-p tcp -m tcp --dport 7701 -m comment --comment "svc-holder:api-a" -j ACCEPT',
    ]);

    // The first holder out leaves the other's ports and the chain; the last removes the chain and its jumps.
    expect(await firewall.close(chain, "api-a")).toBe(false);
    expect(chains.get(chain)).toHaveLength(3);
    expect(await firewall.close(chain, "api-b")).toBe(true);
    expect(chains.has(chain)).toBe(false);
    expect(chains.get("INPUT")).toEqual(["-i lo -j ACCEPT"]);
    expect(await firewall.close(chain, "api-b")).toBe(true);
  });

  it("covers sandboxes by their source addresses: one holder with no port leaves answers only, and removes it all", async () => {
    const { run, chains } = fakeIptables();
    const firewall = createHostFirewall({ run });
    await firewall.open("SVC-svc", "svc", []);
    await firewall.cover("SVC-svc", ["-s", "10.213.0.0/16"]);
    await firewall.open("SVC-svc", "svc", []);
    await firewall.cover("SVC-svc", ["-s", "10.213.0.0/16"]);
    expect(chains.get("SVC-svc")).toEqual(["-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", "-j DROP"]);
    expect(chains.get("INPUT")).toEqual(["-s 10.213.0.0/16 -j SVC-svc", "-i lo -j ACCEPT"]);
    expect(await firewall.close("SVC-svc", "svc")).toBe(true);
    expect(chains.has("SVC-svc")).toBe(false);
    expect(chains.get("INPUT")).toEqual(["-i lo -j ACCEPT"]);
  });

  it("says why when iptables cannot be run or refuses", async () => {
    const missing = createHostFirewall({
      run: async () => ({ exitCode: -1, stdout: "", stderr: "spawn iptables ENOENT" }),
    });
    await expect(missing.open(chain, "api-a", [7700])).rejects.toThrow(/spawn iptables ENOENT/);
    const denied = createHostFirewall({
      run: async () => ({ exitCode: 4, stdout: "", stderr: "iptables: Permission denied (you must be root).\n" }),
    });
    await expect(denied.cover(chain, ["-i", "br-0123456789ab"])).rejects.toThrow(
      /Permission denied \(you must be root\)\.$/,
    );
  });
});

describe("the host's ports a sandbox reaches", () => {
  const alias = "host.docker.internal";

  it("rewrites loopback hosts to the host as a sandbox sees it, and leaves the rest alone", () => {
    expect(hostUrlForSandbox("http://127.0.0.1:9000/v1", alias)).toBe("http://host.docker.internal:9000/v1");
    expect(hostUrlForSandbox("http://localhost:9000/", alias)).toBe("http://host.docker.internal:9000/");
    expect(hostUrlForSandbox("http://[::1]:9000", alias)).toBe("http://host.docker.internal:9000");
    expect(hostUrlForSandbox("https://api.example.com/v1", alias)).toBe("https://api.example.com/v1");
    expect(hostUrlForSandbox("not a url", alias)).toBe("not a url");
  });

  it("opens to sandboxes the host's ports of the URLs they have on it, and only those", () => {
    expect(hostPortsOf(["http://host.docker.internal:7700", "http://127.0.0.1:11434/v1"], alias)).toEqual([
      7700, 11434,
    ]);
    expect(hostPortsOf(["http://host.docker.internal:7700", "http://localhost:7700", undefined], alias)).toEqual([
      7700,
    ]);
    expect(hostPortsOf(["http://svc-api:7700", "https://api.example.com/v1", "http://[::1]/v1"], alias)).toEqual([80]);
  });
});
