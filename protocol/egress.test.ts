import { describe, expect, it } from "vitest";
import { type EgressRule, egressMatch, parseEgressEntry } from "./egress.ts";

const rules = (...entries: string[]) => entries.map((e) => parseEgressEntry(e) as EgressRule);

describe("[sandbox] egress entries", () => {
  it("parses names, '*.' domains and IPv4 addresses, each with an optional port", () => {
    expect(parseEgressEntry(" Registry.NPMjs.org ")).toEqual({
      host: "registry.npmjs.org",
      wildcard: false,
      port: null,
    });
    expect(parseEgressEntry("*.pypi.org:443")).toEqual({ host: "pypi.org", wildcard: true, port: 443 });
    expect(parseEgressEntry("10.0.0.5:8080")).toEqual({ host: "10.0.0.5", wildcard: false, port: 8080 });
    for (const bad of ["", "*", "*.", "*.*.example.com", "http://example.com", "-x.example.com", "a..b", "x:70000"]) {
      expect(parseEgressEntry(bad), bad).toHaveProperty("error");
    }
  });

  it("lets a host through by its exact entry or a domain's, on the entry's port when it names one", () => {
    const list = rules("api.example.com", "*.npmjs.org:443", "allowed.localhost:9000", "10.0.0.5");
    expect(egressMatch(list, "api.example.com", 8443)).toBe("exact");
    expect(egressMatch(list, "API.Example.com.", 443)).toBe("exact");
    expect(egressMatch(list, "registry.npmjs.org", 443)).toBe("wildcard");
    expect(egressMatch(list, "a.b.npmjs.org", 443)).toBe("wildcard");
    expect(egressMatch(list, "registry.npmjs.org", 80)).toBeUndefined();
    // A domain's entry covers the names under it, not the domain itself, nor a name that merely ends alike.
    expect(egressMatch(list, "npmjs.org", 443)).toBeUndefined();
    expect(egressMatch(list, "evilnpmjs.org", 443)).toBeUndefined();
    expect(egressMatch(list, "allowed.localhost", 9000)).toBe("exact");
    expect(egressMatch(list, "allowed.localhost", 9001)).toBeUndefined();
    expect(egressMatch(list, "refused.localhost", 9000)).toBeUndefined();
    expect(egressMatch(list, "10.0.0.5", 22)).toBe("exact");
    expect(egressMatch([], "api.example.com", 443)).toBeUndefined();
  });
});
