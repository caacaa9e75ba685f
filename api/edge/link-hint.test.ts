import { describe, expect, it } from "vitest";
import { sandboxLinkUrl } from "../../protocol/sandbox-link.ts";
import { linkHint } from "./link-hint.ts";
import { createUpstreams } from "./upstreams.ts";

const replicas = async () => [
  { address: "10.0.1.7", family: 4 },
  { address: "10.0.1.5", family: 4 },
];

/** The path and query a daemon's link upgrade carries, from the URL the provisioning replica gave it. */
const pathOf = (url: string) => {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
};

describe("the edge's link hint: a sandbox's link goes to the replica waiting for it, and only ever to a replica", () => {
  it("reads the replica a link URL names, and nothing from other requests or from hints that are no address", () => {
    expect(linkHint(pathOf(sandboxLinkUrl("http://host.docker.internal:7700", "10.0.1.5")))).toBe("10.0.1.5");
    expect(linkHint(pathOf(sandboxLinkUrl("http://host.docker.internal:7700", "fd00::5")))).toBe("fd00::5");
    expect(linkHint(pathOf(sandboxLinkUrl("http://host.docker.internal:7700")))).toBeUndefined();
    expect(linkHint("/v1/projects?replica=10.0.1.5")).toBeUndefined();
    expect(linkHint("/svc/v1/sandbox-link?replica=127.0.0.1:1")).toBeUndefined();
    expect(linkHint("/svc/v1/sandbox-link?replica=evil.example.com")).toBeUndefined();
    expect(linkHint(undefined)).toBeUndefined();
  });

  it("follows a hint only to an address the replicas' name resolves to, and not to one that just refused", async () => {
    const upstreams = createUpstreams("tasks.api", 7700, replicas);
    expect(await upstreams.replica("10.0.1.5")).toBe("http://10.0.1.5:7700");
    expect(await upstreams.replica("10.0.1.7")).toBe("http://10.0.1.7:7700");
    expect(await upstreams.replica("10.0.1.6")).toBeUndefined();
    expect(await upstreams.replica("127.0.0.1")).toBeUndefined();
    upstreams.refused("http://10.0.1.5:7700");
    expect(await upstreams.replica("10.0.1.5")).toBeUndefined();
    expect(await upstreams.pick()).toBe("http://10.0.1.7:7700");
  });
});
