/**
 * Spreading sandboxes over nodes (SVC_SWARM_PREFERENCES). Swarm's own `spread` preference balances the tasks of
 * one service; every sandbox is a service of one task, so Swarm's spread alone never moves a sandbox away from where
 * the others are. The driver therefore spreads them itself: for each descriptor in turn it picks the value whose
 * eligible nodes run the fewest of the installation's sandboxes, and pins the new service there with a constraint
 * (Swarm's preference is passed along too, harmless). Pure functions over what the engine lists.
 */

/** A node as the engine lists it: the fields spreading reads. */
export type SwarmNode = {
  ID: string;
  Description?: { Hostname?: string };
  Spec?: { Role?: string; Availability?: string; Labels?: Record<string, string> };
  Status?: { State?: string };
};

/** The node attribute a constraint or descriptor names, or undefined for one this code cannot read (engine.labels). */
function attribute(node: SwarmNode, name: string): string | undefined {
  if (name.startsWith("node.labels.")) return node.Spec?.Labels?.[name.slice("node.labels.".length)] ?? "";
  if (name === "node.id") return node.ID;
  if (name === "node.hostname") return node.Description?.Hostname ?? "";
  if (name === "node.role") return node.Spec?.Role ?? "";
  return undefined;
}

/** Whether a node meets a constraint (`attr==value`, `attr!=value`); one it cannot read is taken as met. */
export function meets(node: SwarmNode, constraint: string): boolean {
  const match = /^\s*([^=!\s]+)\s*(==|!=)\s*(.+?)\s*$/.exec(constraint);
  if (!match) return true;
  const actual = attribute(node, match[1]!);
  if (actual === undefined) return true;
  return match[2] === "==" ? actual === match[3] : actual !== match[3];
}

/** One of the installation's live sandboxes: its node once placed, and the constraints it was created with. */
export type PlacedSandbox = { nodeId?: string; constraints: string[] };

/**
 * The constraints that send the next sandbox to the least used value of each descriptor, given the nodes, the
 * installation's live sandboxes, and the operator's own constraints (a value no eligible node has is never chosen).
 * A sandbox not placed yet counts where its own spread constraint sends it: sandboxes created in a row spread too.
 * Descriptors other than node labels, and nodes without the label, are left to Swarm.
 */
export function spreadConstraints(
  nodes: SwarmNode[],
  sandboxes: PlacedSandbox[],
  descriptors: string[],
  constraints: string[],
): string[] {
  const byId = new Map(nodes.map((n) => [n.ID, n]));
  let eligible = nodes.filter(
    (n) =>
      n.Status?.State === "ready" &&
      n.Spec?.Availability === "active" &&
      constraints.every((constraint) => meets(n, constraint)),
  );
  let counted = sandboxes;
  const pinned: string[] = [];
  for (const descriptor of descriptors) {
    if (!descriptor.startsWith("node.labels.")) continue;
    const placeOf = (sandbox: PlacedSandbox) => {
      const node = sandbox.nodeId ? byId.get(sandbox.nodeId) : undefined;
      if (node) return attribute(node, descriptor);
      const own = sandbox.constraints.find((c) => c.startsWith(`${descriptor}==`));
      return own?.slice(descriptor.length + 2);
    };
    const load = new Map<string, number>();
    for (const node of eligible) {
      const value = attribute(node, descriptor);
      if (value) load.set(value, 0);
    }
    if (load.size === 0) continue;
    for (const sandbox of counted) {
      const value = placeOf(sandbox);
      if (value && load.has(value)) load.set(value, load.get(value)! + 1);
    }
    const [value] = [...load.entries()].sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))[0]!;
    pinned.push(`${descriptor}==${value}`);
    eligible = eligible.filter((n) => attribute(n, descriptor) === value);
    counted = counted.filter((sandbox) => placeOf(sandbox) === value);
  }
  return pinned;
}
