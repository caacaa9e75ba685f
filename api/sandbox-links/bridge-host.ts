import { lookup } from "node:dns/promises";
import { hostname } from "node:os";

export type BridgeHostDeps = {
  hostname(): string;
  resolve(name: string): Promise<{ address: string; family: number }[]>;
};

const system: BridgeHostDeps = { hostname, resolve: (name) => lookup(name, { all: true }) };

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/**
 * The address this API's sandbox bridges listen on (SVC_LINK_BRIDGE_HOST), found once at start. `auto`: the
 * container's own name as its engine resolves it, which Docker maps to the container's address on the network it
 * was created on, the stack's (compose's default network, the swarm stack's overlay): the address the edge and the
 * other replicas know this one by. An address that cannot be found stops the start, naming the setting: a bridge on
 * loopback would hand the other replicas URLs that lead nowhere.
 */
export async function resolveBridgeHost(setting: string, deps: BridgeHostDeps = system): Promise<string> {
  if (setting !== "auto") return setting;
  const name = deps.hostname();
  const found = await deps.resolve(name).catch((err: Error) => {
    throw new Error(`invalid configuration: SVC_LINK_BRIDGE_HOST=auto: cannot resolve ${name}: ${err.message}`);
  });
  const usable = found.filter((a) => !LOOPBACK.test(a.address));
  const chosen = usable.find((a) => a.family === 4) ?? usable[0];
  if (!chosen)
    throw new Error(
      `invalid configuration: SVC_LINK_BRIDGE_HOST=auto: ${name} resolves to no address but loopback; set the address`,
    );
  return chosen.address;
}
