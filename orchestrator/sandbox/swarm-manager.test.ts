import { describe, expect, it } from "vitest";
import { loadConfig } from "../../api/config.ts";
import { OrchestratorError } from "../errors.ts";
import { requireSwarmManager } from "./swarm-manager.ts";

/** An engine that answers `info` with this Swarm section: all requireSwarmManager asks of it. */
const engine = (Swarm: Record<string, unknown>) => ({ info: async () => ({ Swarm }) }) as never;

describe("the swarm driver's choice and its engine", () => {
  it("runs on a Swarm manager only, and says to run docker swarm init otherwise", async () => {
    await expect(requireSwarmManager(engine({ LocalNodeState: "active", ControlAvailable: true }))).resolves.toBe(
      undefined,
    );
    const none = await requireSwarmManager(engine({ LocalNodeState: "inactive" })).catch((e) => e);
    expect(none).toBeInstanceOf(OrchestratorError);
    expect(none.message).toMatch(
      /needs the Docker engine to be a Swarm manager, and it is not in a swarm \(inactive\)/,
    );
    expect(none.message).toMatch(/run 'docker swarm init'/);
    await expect(requireSwarmManager(engine({ LocalNodeState: "active", ControlAvailable: false }))).rejects.toThrow(
      /a worker node, not a manager: run 'docker swarm init'/,
    );
  });

  it("reads SVC_SANDBOX_DRIVER, SVC_REGISTRY and the placement settings, refusing malformed ones by name", () => {
    expect(loadConfig({}).orchestrator.driver).toEqual({ kind: "docker" });
    expect(
      loadConfig({
        SVC_SANDBOX_DRIVER: "swarm",
        SVC_REGISTRY: "10.0.0.5:5000",
        SVC_SWARM_CONSTRAINTS: "node.labels.svc-sandboxes==true, node.role != manager",
        SVC_SWARM_PREFERENCES: "spread=node.labels.zone",
      }).orchestrator.driver,
    ).toEqual({
      kind: "swarm",
      registry: "10.0.0.5:5000",
      constraints: ["node.labels.svc-sandboxes==true", "node.role != manager"],
      spread: ["node.labels.zone"],
    });
    expect(loadConfig({ SVC_SANDBOX_DRIVER: "swarm" }).orchestrator.driver).toEqual({
      kind: "swarm",
      registry: undefined,
      constraints: [],
      spread: [],
    });
    expect(() => loadConfig({ SVC_SANDBOX_DRIVER: "kubernetes" })).toThrow(/SVC_SANDBOX_DRIVER/);
    expect(() => loadConfig({ SVC_REGISTRY: "http://10.0.0.5:5000" })).toThrow(/SVC_REGISTRY: must be a registry's/);
    expect(() => loadConfig({ SVC_SWARM_CONSTRAINTS: "svc-sandboxes" })).toThrow(/SVC_SWARM_CONSTRAINTS/);
    expect(() => loadConfig({ SVC_SWARM_PREFERENCES: "binpack=node.labels.zone" })).toThrow(/SVC_SWARM_PREFERENCES/);
  });
});
