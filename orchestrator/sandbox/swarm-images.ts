import type Docker from "dockerode";
import { OrchestratorError } from "../errors.ts";
import type { ImageBuild, ImageVerbs } from "./driver.ts";
import { statusOf } from "./networking.ts";

/**
 * Images on Swarm: built on the manager as the Docker driver builds them (the same fences), then, when a registry
 * is set (SVC_REGISTRY), tagged `<registry>/<tag>` and pushed, so a task scheduled on another node pulls it.
 * Without a registry every node must already hold the image: fine on one node, the operator's business otherwise.
 */
export type SwarmImages = ImageVerbs & {
  /** The name a service runs `tag` under: the registry's copy, pushed first when the registry lacks it. */
  runnable(tag: string): Promise<string>;
};

/** `<registry>/<tag>`; the engine's tag call wants the repository and the tag apart. */
export function registryName(registry: string, tag: string): { name: string; repo: string; tag: string } {
  const name = `${registry}/${tag}`;
  const colon = name.lastIndexOf(":");
  const hasTag = colon > name.lastIndexOf("/");
  return { name, repo: hasTag ? name.slice(0, colon) : name, tag: hasTag ? name.slice(colon + 1) : "latest" };
}

/** Whether an image name starts with a registry's host, as the engine reads names (a dot, a port or localhost). */
function namesRegistry(tag: string): boolean {
  const slash = tag.indexOf("/");
  if (slash < 0) return false;
  const first = tag.slice(0, slash);
  return first.includes(".") || first.includes(":") || first === "localhost";
}

/** Follows a push to its end; the engine reports a failed push as an event of the stream, not as a status. */
async function followPush(docker: Docker, stream: NodeJS.ReadableStream): Promise<void> {
  const failure = await new Promise<string | undefined>((resolve) => {
    let error: string | undefined;
    docker.modem.followProgress(
      stream,
      (err: Error | null) => resolve(err?.message ?? error),
      (event: { error?: string; errorDetail?: { message?: string } }) => {
        if (event.error) error = event.errorDetail?.message ?? event.error;
      },
    );
  });
  if (failure) throw new Error(failure);
}

export function createSwarmImages(deps: {
  docker: Docker;
  /** Builds on this engine (the Docker driver's build: its fences, its failure messages). */
  build: ImageVerbs["buildImage"];
  registry: string | undefined;
}): SwarmImages {
  const { docker, registry } = deps;
  const localExists = (name: string) =>
    docker
      .getImage(name)
      .inspect()
      .then(
        () => true,
        () => false,
      );
  /** Whether the registry holds the image: the engine asks it (with the engine's own TLS and insecure settings). */
  const pushed = (name: string) =>
    docker
      .getImage(name)
      .distribution()
      .then(
        () => true,
        (err) => {
          if (statusOf(err) === 401 || statusOf(err) === 403 || statusOf(err) === 404) return false;
          // Anything else (the registry does not answer) is worth telling rather than pushing into.
          throw new OrchestratorError("SANDBOX_BACKEND_FAILED", `the registry ${registry} failed: ${err.message}`);
        },
      );

  async function push(tag: string): Promise<string> {
    if (!registry) return tag;
    const target = registryName(registry, tag);
    await docker.getImage(tag).tag({ repo: target.repo, tag: target.tag });
    try {
      // The engine wants an X-Registry-Auth header even for a registry without accounts: an empty one.
      await followPush(docker, await docker.getImage(target.name).push({}, undefined, {} as Docker.AuthConfig));
    } catch (err) {
      throw new OrchestratorError(
        "SANDBOX_BACKEND_FAILED",
        `pushing ${tag} to the registry ${registry} failed: ${(err as Error).message}`,
      );
    }
    return target.name;
  }

  return {
    async imageExists(tag) {
      if (!(await localExists(tag))) return false;
      return !registry || (await pushed(registryName(registry, tag).name));
    },

    async buildImage(build: ImageBuild, onStep?: (step: string) => void) {
      const log = await deps.build(build, onStep);
      await push(build.tag);
      return log;
    },

    async runnable(tag) {
      // A tag that already names a registry (the operator's own image, `host[:port]/name`) is run as it is.
      if (!registry || namesRegistry(tag)) return tag;
      const name = registryName(registry, tag).name;
      if (await pushed(name)) return name;
      if (!(await localExists(tag)))
        throw new OrchestratorError(
          "SANDBOX_BACKEND_FAILED",
          `the image ${tag} is neither on this engine nor in the registry ${registry}: build it first`,
        );
      return push(tag);
    },
  };
}
