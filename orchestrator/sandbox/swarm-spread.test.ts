import { describe, expect, it } from "vitest";
import { meets, type SwarmNode, spreadConstraints } from "./swarm-spread.ts";

const node = (ID: string, labels: Record<string, string>, extra: Partial<SwarmNode["Spec"]> = {}): SwarmNode => ({
  ID,
  Description: { Hostname: `host-${ID}` },
  Spec: { Role: "worker", Availability: "active", Labels: labels, ...extra },
  Status: { State: "ready" },
});

describe("spreading one-task sandbox services over node labels", () => {
  const nodes = [
    node("n1", { zone: "a", sandboxes: "yes" }),
    node("n2", { zone: "b", sandboxes: "yes" }),
    node("n3", { zone: "c", sandboxes: "no" }),
    node("n4", { zone: "d", sandboxes: "yes" }, { Availability: "pause" }),
  ];

  it("sends the next sandbox to the value whose eligible nodes run the fewest, counting unplaced ones by their pin", () => {
    const zone = ["node.labels.zone"];
    const constraints = ["node.labels.sandboxes==yes"];
    expect(spreadConstraints(nodes, [], zone, constraints)).toEqual(["node.labels.zone==a"]);
    // c fails the operator's constraint and d takes no tasks: only a and b are candidates.
    const placed = [{ nodeId: "n1", constraints: [] }];
    expect(spreadConstraints(nodes, placed, zone, constraints)).toEqual(["node.labels.zone==b"]);
    // Created a moment ago, not placed yet: counted where its own constraint sends it.
    const pinned = [...placed, { constraints: ["node.labels.sandboxes==yes", "node.labels.zone==b"] }];
    expect(spreadConstraints(nodes, pinned, zone, constraints)).toEqual(["node.labels.zone==a"]);
    expect(spreadConstraints(nodes, [...pinned, { nodeId: "n1", constraints: [] }], zone, constraints)).toEqual([
      "node.labels.zone==b",
    ]);
  });

  it("leaves to Swarm what it cannot read: no label on any node, or a descriptor other than a node label", () => {
    expect(spreadConstraints(nodes, [], ["node.labels.rack"], [])).toEqual([]);
    expect(spreadConstraints(nodes, [], ["engine.labels.zone"], [])).toEqual([]);
  });

  it("reads constraints on labels, id, hostname and role, and takes one it cannot read as met", () => {
    const n = nodes[0]!;
    expect(meets(n, "node.labels.zone==a")).toBe(true);
    expect(meets(n, "node.labels.zone != a")).toBe(false);
    expect(meets(n, "node.labels.missing==x")).toBe(false);
    expect(meets(n, "node.id==n1")).toBe(true);
    expect(meets(n, "node.hostname!=host-n1")).toBe(false);
    expect(meets(n, "node.role==manager")).toBe(false);
    expect(meets(n, "engine.labels.gpu==true")).toBe(true);
  });
});
