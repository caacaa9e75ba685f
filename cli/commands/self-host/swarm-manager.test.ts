import { describe, expect, it } from "vitest";
import { NotSwarmManager, requireSwarmManager } from "./swarm-manager.ts";

/** `docker info` as an engine in this swarm state would answer it. */
const answering = (swarm: Record<string, unknown>) => ({
  info: async () => ({ status: 200, body: JSON.stringify({ ID: "engine", Swarm: swarm }) }),
});

describe("swarm mode's engine check (a fake 'docker info')", () => {
  it("a manager passes, with its node id", async () => {
    const node = await requireSwarmManager(
      answering({ NodeID: "n1", LocalNodeState: "active", ControlAvailable: true }),
    );
    expect(node).toEqual({ nodeId: "n1" });
  });

  it("an engine in no swarm: exit 1, saying to run 'docker swarm init' (svc never runs it)", async () => {
    const err = await requireSwarmManager(answering({ NodeID: "", LocalNodeState: "inactive" })).catch((e) => e);
    expect(err).toBeInstanceOf(NotSwarmManager);
    expect(err.exitCode).toBe(1);
    expect(err.message).toBe(
      "swarm mode needs the Docker engine to be a Swarm manager, and it is in no swarm: run 'docker swarm init' (or join it to a swarm as a manager), then start again",
    );
  });

  it("an engine without a Swarm section at all reads as in no swarm", async () => {
    const err = await requireSwarmManager({ info: async () => ({ status: 200, body: "{}" }) }).catch((e) => e);
    expect(err.message).toContain("it is in no swarm: run 'docker swarm init'");
  });

  it("a worker: run it on a manager, or promote this node", async () => {
    const err = await requireSwarmManager(
      answering({ NodeID: "w1", LocalNodeState: "active", ControlAvailable: false }),
    ).catch((e) => e);
    expect(err).toBeInstanceOf(NotSwarmManager);
    expect(err.message).toContain("and it is a worker: run 'svc self-host start --mode swarm' on a manager");
    expect(err.message).toContain("docker node promote");
  });

  it("a swarm in error, and an engine that does not answer, say so", async () => {
    const error = await requireSwarmManager(
      answering({ LocalNodeState: "error", Error: "manager stopped: certificate expired" }),
    ).catch((e) => e);
    expect(error.message).toContain("its swarm state is error (manager stopped: certificate expired)");
    const down = await requireSwarmManager({ info: async () => ({ error: "ECONNREFUSED" }) }).catch((e) => e);
    expect(down).toBeInstanceOf(NotSwarmManager);
    expect(down.message).toBe("the Docker engine did not answer: ECONNREFUSED");
  });
});
