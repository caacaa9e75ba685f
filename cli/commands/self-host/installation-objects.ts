import { z } from "zod";
import { createApiClient } from "../../api-client.ts";
import { CliError } from "../../errors.ts";
import { warn } from "../../output.ts";
import { dockerCall } from "./docker-engine.ts";
import { localOrigin, type SelfHostPaths, type SelfHostState, type StackMode, writeState } from "./state.ts";

/** The label every container, network and volume of an installation carries (orchestrator/sandbox/owner-labels.ts). */
export const INSTALLATION_LABEL = "dev.svc.installation";
/** A Swarm installation's relay container (orchestrator/sandbox/swarm-relay.ts). */
export const RELAY_LABEL = "dev.svc.relay";
const COMPOSE_PROJECT_LABEL = "com.docker.compose.project";

/** GET /v1/admin/installation (api/admin/routes.ts). */
const InstallationInfo = z.object({ id: z.string().min(1), images: z.array(z.string()) });

/** Adds what an API said of its installation to the state (and the file), once per id, images merged. */
export function recordInstallation(
  paths: SelfHostPaths,
  state: SelfHostState,
  seen: { id: string; mode: StackMode; images: string[] },
): void {
  const known = state.installations.find((i) => i.id === seen.id);
  const images = [...new Set([...(known?.images ?? []), ...seen.images])].sort();
  if (known && known.mode === seen.mode && images.length === known.images.length) return;
  state.installations = [
    ...state.installations.filter((i) => i.id !== seen.id),
    { id: seen.id, mode: seen.mode, images },
  ];
  writeState(paths, state);
}

/** Asks the running stack's API which installation it is and records it; undefined when it does not say. */
export async function learnInstallation(
  paths: SelfHostPaths,
  state: SelfHostState,
  mode: StackMode,
): Promise<string | undefined> {
  try {
    const api = createApiClient({ baseUrl: localOrigin(state), token: state.admin_token });
    const seen = await api.request("GET", "/v1/admin/installation", InstallationInfo);
    recordInstallation(paths, state, { id: seen.id, mode, images: seen.images });
    return seen.id;
  } catch {
    // An API from before the route, or one that stopped answering: what was recorded earlier still counts.
    return undefined;
  }
}

export const installationIds = (state: SelfHostState, mode?: StackMode) =>
  state.installations.filter((i) => !mode || i.mode === mode).map((i) => i.id);

type Container = {
  Id: string;
  Names: string[];
  Image: string;
  State: string;
  Labels: Record<string, string> | null;
  NetworkSettings?: { Networks?: Record<string, unknown> | null };
};
type Network = { Id: string; Name: string; Labels: Record<string, string> | null };
type Volume = { Name: string };
type Image = { Id: string; RepoTags: string[] | null };

/** No Docker engine answers here: it holds no sandbox either. */
export class EngineUnavailable extends CliError {}

async function engine(method: string, path: string, body?: unknown, timeoutMs = 30_000) {
  const res = await dockerCall(method, path, body, timeoutMs);
  if ("error" in res) throw new EngineUnavailable(`the Docker engine did not answer: ${res.error}`);
  return res;
}

async function list<T>(path: string, label?: string[], items = (body: unknown) => body as T[]): Promise<T[]> {
  const query = label
    ? `${path.includes("?") ? "&" : "?"}filters=${encodeURIComponent(JSON.stringify({ label }))}`
    : "";
  const res = await engine("GET", path + query);
  if (res.status !== 200) throw new CliError(`the Docker engine refused GET ${path} (HTTP ${res.status}): ${res.body}`);
  return items(JSON.parse(res.body));
}

const containers = (label?: string[]) => list<Container>("/containers/json?all=1", label);
/** The engine answers a volume listing with an object, not a list. */
const volumes = async (label: string[]) =>
  (await list<Volume>("/volumes", label, (body) => (body as { Volumes: Volume[] | null }).Volumes ?? [])).map(
    (v) => v.Name,
  );
export const containerName = (c: Container) => (c.Names[0] ?? c.Id.slice(0, 12)).replace(/^\//, "");
const labelOf = (c: { Labels: Record<string, string> | null }, label: string) => c.Labels?.[label];

/** What a call that removes one object said: gone (or already gone), or why not. */
async function removal(method: string, path: string, body?: unknown): Promise<string | undefined> {
  const res = await engine(method, path, body);
  if (res.status < 300 || res.status === 404) return undefined;
  let message = res.body.trim();
  try {
    message = (JSON.parse(res.body) as { message?: string }).message ?? message;
  } catch {}
  return `${message} (HTTP ${res.status})`;
}

/**
 * Removes the installations' networks that no container of theirs is on, running or stopped: a kept sandbox (adopted
 * at the next start) keeps its network. Other containers still on one (a compose stack's stopped API containers join
 * every sandbox network) are disconnected first, or a later start of theirs would fail on the missing network. The
 * engine lists a stopped container's networks by name only, so they are matched by name. Returns the names removed.
 */
export async function removeIdleNetworks(ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const everyContainer = await containers();
  const removed: string[] = [];
  for (const id of new Set(ids)) {
    for (const network of await list<Network>("/networks", [`${INSTALLATION_LABEL}=${id}`])) {
      const on = everyContainer.filter((c) => Object.keys(c.NetworkSettings?.Networks ?? {}).includes(network.Name));
      // Ours (a sandbox, an app) or, oddly, another installation's: the network stays.
      if (on.some((c) => labelOf(c, INSTALLATION_LABEL))) continue;
      for (const c of on) {
        const failed = await removal("POST", `/networks/${network.Id}/disconnect`, { Container: c.Id, Force: true });
        if (failed) warn(`cannot disconnect ${containerName(c)} from the network ${network.Name}: ${failed}`);
      }
      const failed = await removal("DELETE", `/networks/${network.Id}`);
      if (failed) warn(`cannot remove the network ${network.Name}: ${failed}`);
      else removed.push(network.Name);
    }
  }
  return removed;
}

/** The images svc builds for a stack; anything else (the shared base images svc-debian and svc-node included) is
 * never removed. */
const OWN_IMAGE = /^svc-(sandbox|project|app|api|postgres):/;
/** Children before parents: a project's and an app's image are built on the platform image. */
const REMOVAL_ORDER = ["svc-app:", "svc-project:", "svc-api:", "svc-postgres:", "svc-sandbox:"];

/** The platform image's key in a sandbox image's tag: `svc-sandbox:<key>`, `svc-project:<tree>-<key>`. */
export function platformKey(ref: string): string | undefined {
  if (ref.startsWith("svc-sandbox:")) return ref.slice("svc-sandbox:".length);
  if (ref.startsWith("svc-project:")) return ref.slice(ref.lastIndexOf("-") + 1) || undefined;
  return undefined;
}

export type ImagePlan = { remove: string[]; kept: { image: string; reason: string }[] };

/**
 * Which images go with an installation. `ran`: the images its containers ran and its API recorded (its sessions',
 * apps', its compose stack's); `present`: every tag on the engine; `othersRun`: the images of the containers left on
 * the engine, another installation's among them. Removed: svc's own images among `ran`, the platform images they
 * were built on, and every project image built on those. Kept: an image a container left runs, and every image of a
 * platform image that a container left runs (the image or a project image on it): another installation still uses
 * it, and its API would not find the image it resolved once.
 */
export function planImageRemoval(input: { ran: string[]; present: string[]; othersRun: string[] }): ImagePlan {
  const present = new Set(input.present);
  const keys = new Set(input.ran.filter((r) => OWN_IMAGE.test(r)).flatMap((r) => platformKey(r) ?? []));
  const candidates = new Set([
    ...input.ran.filter((r) => OWN_IMAGE.test(r) && present.has(r)),
    ...input.present.filter((r) => keys.has(platformKey(r) ?? "")),
  ]);
  const running = new Set(input.othersRun);
  const sharedKeys = new Set(input.othersRun.flatMap((r) => platformKey(r) ?? []));
  const plan: ImagePlan = { remove: [], kept: [] };
  const order = (r: string) => REMOVAL_ORDER.findIndex((p) => r.startsWith(p));
  for (const image of [...candidates].sort((a, b) => order(a) - order(b) || a.localeCompare(b))) {
    const key = platformKey(image);
    if (running.has(image)) plan.kept.push({ image, reason: "another container runs it" });
    else if (key && sharedKeys.has(key)) {
      plan.kept.push({ image, reason: `another installation runs an image of the platform image svc-sandbox:${key}` });
    } else plan.remove.push(image);
  }
  return plan;
}

export type RemovedObjects = {
  containers: string[];
  networks: string[];
  volumes: string[];
  images: string[];
  images_kept: { image: string; reason: string }[];
};

export const noObjects = (): RemovedObjects => ({
  containers: [],
  networks: [],
  volumes: [],
  images: [],
  images_kept: [],
});

/** The images of these containers, as they were created with (a tag, or an id when the tag has moved since). */
export const imagesOf = (list: { Image: string }[]) => list.map((c) => c.Image).filter((r) => OWN_IMAGE.test(r));

/** The installations' containers (sandboxes, warm-pool members, apps), any state. */
export async function installationContainers(ids: string[]): Promise<Container[]> {
  const found = await Promise.all([...new Set(ids)].map((id) => containers([`${INSTALLATION_LABEL}=${id}`])));
  return found.flat();
}

/**
 * Removes every container, network and volume of these installations, and (with `images`) the images they ran and
 * built that no other installation runs. `ran`: images known to be theirs besides those of their containers (what
 * their APIs recorded, a compose stack's). Another installation's objects are never touched.
 */
export async function removeInstallations(
  ids: string[],
  options: { images: boolean; ran?: string[] },
): Promise<RemovedObjects> {
  const removed = noObjects();
  const own = await installationContainers(ids);
  for (const c of own) {
    const failed = await removal("DELETE", `/containers/${c.Id}?force=1&v=1`);
    if (failed) throw new CliError(`cannot remove the container ${containerName(c)}: ${failed}`);
    removed.containers.push(containerName(c));
  }
  removed.networks = await removeIdleNetworks(ids);
  for (const id of new Set(ids)) {
    for (const volume of await volumes([`${INSTALLATION_LABEL}=${id}`])) {
      const failed = await removal("DELETE", `/volumes/${encodeURIComponent(volume)}`);
      if (failed) warn(`cannot remove the volume ${volume}: ${failed}`);
      else removed.volumes.push(volume);
    }
  }
  if (options.images) {
    const images = await removeImages([...imagesOf(own), ...(options.ran ?? [])]);
    removed.images = images.remove;
    removed.images_kept = images.kept;
  }
  return removed;
}

/** Removes the images `planImageRemoval` picks; one the engine refuses (a container uses it) is kept and said why. */
export async function removeImages(ran: string[]): Promise<ImagePlan> {
  const present = (await list<Image>("/images/json")).flatMap((i) => i.RepoTags ?? []);
  const plan = planImageRemoval({ ran, present, othersRun: (await containers()).map((c) => c.Image) });
  const result: ImagePlan = { remove: [], kept: [...plan.kept] };
  for (const image of plan.remove) {
    // Never forced: the engine refuses an image a container (of anyone) still uses.
    const failed = await removal("DELETE", `/images/${encodeURIComponent(image)}`);
    if (failed) result.kept.push({ image, reason: failed });
    else result.remove.push(image);
  }
  return result;
}

/** A compose project's containers, networks and volumes as the engine lists them by compose's label. */
export async function composeObjects(project: string) {
  const label = [`${COMPOSE_PROJECT_LABEL}=${project}`];
  const [own, networks, named] = await Promise.all([
    containers(label),
    list<Network>("/networks", label),
    volumes(label),
  ]);
  return {
    containers: own.map(containerName),
    images: imagesOf(own),
    networks: networks.map((n) => n.Name),
    volumes: named,
  };
}
