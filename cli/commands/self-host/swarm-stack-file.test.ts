import { describe, expect, it } from "vitest";
import type { SelfHostState } from "./state.ts";
import { overrideInput, stackOverride } from "./swarm-stack-file.ts";

const state = (env: Record<string, string>, replicas = 1): SelfHostState => ({
  port: 7700,
  listen: "127.0.0.1",
  admin_token: "svc_x",
  secrets_key: "k".repeat(44),
  mode: "swarm",
  api_replicas: replicas,
  env,
  wizard_done: true,
  installations: [],
});

type Deploy = { replicas?: number; placement?: { constraints: string[] } };
type Override = {
  version: string;
  services: Record<"postgres" | "api" | "edge", { deploy: Deploy; environment?: Record<string, string> }>;
  volumes?: Record<string, unknown>;
};

/** The generated file: comment lines, then one JSON document (YAML, as the stack loader reads it). */
function parse(text: string): { header: string; document: Override } {
  const lines = text.split("\n");
  const body = lines.findIndex((l) => !l.startsWith("#"));
  return { header: lines.slice(0, body).join("\n"), document: JSON.parse(lines.slice(body).join("\n")) };
}

describe("swarm mode's generated stack file", () => {
  it("one local data volume: PostgreSQL, every API replica and the edge stay on this node, and the header says why", () => {
    const { header, document } = parse(stackOverride(overrideInput(state({}, 3), "svc-ab12", "node-1")));
    const pinned = { placement: { constraints: ["node.id == node-1"] } };
    expect(document.version).toBe("3.8");
    expect(document.services.postgres.deploy).toEqual(pinned);
    expect(document.services.edge.deploy).toEqual(pinned);
    expect(document.services.api.deploy).toEqual({ replicas: 3, ...pinned });
    expect(document.volumes).toBeUndefined();
    expect(header).toContain("one data volume, the local svc-ab12_swarm_data, so the API (every replica) runs on node");
    expect(header).toContain("the `local` driver with NFS or CIFS options");
    expect(header).toContain("SVC_SWARM_DATA_VOLUME=<name>");
  });

  it("a shared data volume: the API may run on any manager, on that volume", () => {
    const text = stackOverride(overrideInput(state({ SVC_SWARM_DATA_VOLUME: "svc-nfs" }, 2), "svc", "node-1"));
    const { header, document } = parse(text);
    expect(document.services.api.deploy).toEqual({ replicas: 2 });
    expect(document.services.postgres.deploy.placement?.constraints).toEqual(["node.id == node-1"]);
    expect(document.volumes).toEqual({ data: { external: true, name: "svc-nfs" } });
    expect(header).toContain(
      "the repositories are on the volume svc-nfs (SVC_SWARM_DATA_VOLUME), so the API may run on",
    );
  });

  it("passes the env set settings to the API, `$` escaped, but none the stack file sets itself", () => {
    const input = overrideInput(
      state({
        SVC_LLM_API_KEY: "a$b",
        SVC_SANDBOX_DRIVER: "docker",
        SVC_SANDBOX_LINK: "direct",
        SVC_SWARM_DATA_VOLUME: "v",
        SVC_POSTGRES_IMAGE: "postgres:15",
        DATABASE_URL: "postgres://elsewhere/db",
      }),
      "svc",
      "n",
    );
    expect(parse(stackOverride(input)).document.services.api.environment).toEqual({ SVC_LLM_API_KEY: "a$$b" });
  });
});
