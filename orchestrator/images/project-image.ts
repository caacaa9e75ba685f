import { OrchestratorError } from "../errors.ts";
import type { ImageBuild, ImageVerbs } from "../sandbox/driver.ts";
import { gitArchive, gitOut } from "./git-out.ts";

/**
 * The image a session runs: the project's `.svc/Dockerfile` built on the platform image, keyed by the git tree
 * id of `.svc/` plus the platform image, so an unchanged `.svc/` never rebuilds. `commit` is the tip of the
 * project's default branch (`branch`), whatever the session's own branch holds: only what a person merged through
 * a CR is built, never what an agent pushed, since build steps run with more than a sandbox may (the engine's
 * default capabilities, no process limit). `sandbox` fences them as far as the build API can: the limits, network
 * and host alias of the sandbox that runs the image. No default branch yet, or no `.svc/Dockerfile` on it: the
 * platform image itself. `onStep` hears each build step as it starts.
 */
export async function resolveSessionImage(
  driver: ImageVerbs,
  options: {
    gitDir: string;
    branch: string;
    commit: string | undefined;
    platformImage: string;
    sandbox: NonNullable<ImageBuild["sandbox"]>;
    onStep?: (step: string) => void;
  },
): Promise<string> {
  if (!options.commit) return options.platformImage;
  const tree = await gitOut(options.gitDir, ["rev-parse", "--verify", "-q", `${options.commit}:.svc`]);
  if (!tree) return options.platformImage;
  const dockerfile = await gitOut(options.gitDir, ["rev-parse", "--verify", "-q", `${options.commit}:.svc/Dockerfile`]);
  if (!dockerfile) return options.platformImage;
  const platformKey = options.platformImage.split(":").at(-1)!;
  const tag = `svc-project:${tree.slice(0, 16)}-${platformKey}`;
  if (await driver.imageExists(tag)) return tag;
  try {
    await driver.buildImage(
      {
        tag,
        context: gitArchive(options.gitDir, tree),
        buildArgs: { SVC_BASE_IMAGE: options.platformImage },
        sandbox: options.sandbox,
      },
      options.onStep,
    );
  } catch (err) {
    if (!(err instanceof OrchestratorError) || err.code !== "IMAGE_BUILD_FAILED") throw err;
    // A broken Dockerfile on the default branch breaks every session of the project: only a merged fix mends it.
    const where = `the project's .svc/Dockerfile (${options.branch} at ${options.commit.slice(0, 7)})`;
    throw new OrchestratorError(
      "IMAGE_BUILD_FAILED",
      err.message.replace(`image build of ${tag}`, where),
      err.log,
      `Fix .svc/Dockerfile on ${options.branch} through a change request (svc cr open), then start a new session`,
    );
  }
  return tag;
}
