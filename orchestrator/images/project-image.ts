import { OrchestratorError } from "../errors.ts";
import type { SandboxDriver } from "../sandbox/driver.ts";
import { gitArchive, gitOut } from "./git-out.ts";

/**
 * The image a session runs: the project's `.svc/Dockerfile` built on the platform image, keyed by the git tree
 * id of `.svc/` at the session's commit plus the platform image, so an unchanged `.svc/` never rebuilds.
 * A project without `.svc/Dockerfile` runs the platform image itself. `ref` names the branch the commit came from,
 * for a failure's message; `onStep` hears each build step as it starts.
 */
export async function resolveSessionImage(
  driver: SandboxDriver,
  options: { gitDir: string; commit: string; ref: string; platformImage: string; onStep?: (step: string) => void },
): Promise<string> {
  const tree = await gitOut(options.gitDir, ["rev-parse", "--verify", "-q", `${options.commit}:.svc`]);
  if (!tree) return options.platformImage;
  const dockerfile = await gitOut(options.gitDir, ["rev-parse", "--verify", "-q", `${options.commit}:.svc/Dockerfile`]);
  if (!dockerfile) return options.platformImage;
  const platformKey = options.platformImage.split(":").at(-1)!;
  const tag = `svc-project:${tree.slice(0, 16)}-${platformKey}`;
  if (await driver.imageExists(tag)) return tag;
  try {
    await driver.buildImage(
      { tag, context: gitArchive(options.gitDir, tree), buildArgs: { SVC_BASE_IMAGE: options.platformImage } },
      options.onStep,
    );
  } catch (err) {
    if (!(err instanceof OrchestratorError) || err.code !== "IMAGE_BUILD_FAILED") throw err;
    // A broken Dockerfile merged to the default branch breaks every new session there: say how to get one anyway.
    const where = `the project's .svc/Dockerfile (${options.ref} at ${options.commit.slice(0, 7)})`;
    throw new OrchestratorError(
      "IMAGE_BUILD_FAILED",
      err.message.replace(`image build of ${tag}`, where),
      err.log,
      `Fix .svc/Dockerfile on ${options.ref}, or start from an older commit where it builds: svc sessions new --base <ref>`,
    );
  }
  return tag;
}
