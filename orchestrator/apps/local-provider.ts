import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { redact } from "../../protocol/redact.ts";
import { OrchestratorError } from "../errors.ts";
import { gitArchive, gitOut } from "../images/git-out.ts";
import type { ContainerVerbs, ImageVerbs, SandboxLimits } from "../sandbox/driver.ts";
import { treeAt } from "./build-key.ts";
import type { AppBuild, AppProvider } from "./provider.ts";

/** The code layer's Dockerfile, added to the repository's tree under a name no repository uses. */
const CODE_DOCKERFILE = ".svc-app-code.Dockerfile";

/** The local provider: each deploy is a container on this engine, placed and hardened like a sandbox. */
export function createLocalAppProvider(deps: {
  driver: ContainerVerbs & ImageVerbs;
  limits: SandboxLimits;
}): AppProvider {
  const { driver } = deps;

  /** The image the app runs in: its own Dockerfile's at the revision, else the platform image. */
  async function runtimeImage({ gitDir, revision, spec, key, platformImage, owner }: AppBuild): Promise<string> {
    const dockerfile = await gitOut(gitDir, ["rev-parse", "--verify", "-q", `${revision}:${spec.build}`]);
    if (!dockerfile) return platformImage;
    const tag = `svc-app:${key.slice(0, 16)}`;
    if (await driver.imageExists(tag)) return tag;
    const context = await gitOut(gitDir, ["rev-parse", "--verify", "-q", treeAt(revision, spec.context)]);
    if (!context) throw new Error(`the build context '${spec.context}' does not exist at ${revision.slice(0, 7)}`);
    const inContext = posix.relative(posix.normalize(spec.context), posix.normalize(spec.build));
    if (inContext.startsWith("..")) {
      throw new Error(`the Dockerfile '${spec.build}' is outside the build context '${spec.context}'`);
    }
    try {
      await driver.buildImage({
        tag,
        context: gitArchive(gitDir, context),
        dockerfile: inContext,
        buildArgs: { SVC_BASE_IMAGE: platformImage },
        // Under the limits and on the network of the container it becomes (keyed by the deploy, as its create is).
        sandbox: { owner: { installationId: owner.installationId, sandboxId: owner.deployId }, limits: deps.limits },
      });
    } catch (err) {
      if (!(err instanceof OrchestratorError) || err.code !== "IMAGE_BUILD_FAILED") throw err;
      const message = err.message.replace(`image build of ${tag}`, `the build of ${spec.build}`);
      throw new OrchestratorError("IMAGE_BUILD_FAILED", message, err.log);
    }
    return tag;
  }

  /**
   * The runtime image with the repository's files at the revision in its working directory (/workspace): an app's
   * command runs from its code, as the scaffold's `npm start` expects, whatever its Dockerfile copied or did not (a
   * sandbox's Dockerfile copies nothing: sandboxes clone). Built once per image and tree, fenced as the app runs.
   */
  async function withCode({ gitDir, revision, owner }: AppBuild, image: string): Promise<string> {
    const tree = await gitOut(gitDir, ["rev-parse", "--verify", "-q", `${revision}^{tree}`]);
    if (!tree) throw new Error(`the revision ${revision.slice(0, 7)} does not exist`);
    const tag = `svc-app-code:${createHash("sha256").update(`${image}\n${tree}`).digest("hex").slice(0, 16)}`;
    if (await driver.imageExists(tag)) return tag;
    const dir = mkdtempSync(join(tmpdir(), "svc-app-code-"));
    try {
      const dockerfile = join(dir, CODE_DOCKERFILE);
      writeFileSync(dockerfile, `ARG SVC_APP_IMAGE\nFROM \${SVC_APP_IMAGE}\nCOPY . /workspace\nWORKDIR /workspace\n`);
      await driver.buildImage({
        tag,
        context: gitArchive(gitDir, tree, [dockerfile]),
        dockerfile: CODE_DOCKERFILE,
        buildArgs: { SVC_APP_IMAGE: image },
        sandbox: { owner: { installationId: owner.installationId, sandboxId: owner.deployId }, limits: deps.limits },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return tag;
  }

  return {
    async image(build) {
      return withCode(build, await runtimeImage(build));
    },

    async run({ name, image, spec, env, owner }) {
      const id = await driver.create({
        name,
        image,
        env,
        command: spec.command,
        port: spec.port,
        owner,
        limits: deps.limits,
      });
      const info = await driver.start(id);
      if (!info.endpoint) {
        await driver.remove(id).catch(() => {});
        throw new Error("the app's container has no address the API can reach");
      }
      return { id, endpoint: info.endpoint };
    },

    inspect: async (id) => {
      const info = await driver.inspect(id);
      return info?.kind === "app" ? info : undefined;
    },
    // The installation's sandboxes are never the deploys': the app reconciler removes every container it lists
    // that no active deploy owns.
    list: async (installationId) => (await driver.list(installationId)).filter((c) => c.kind === "app"),
    remove: (id) => driver.remove(id),

    async logs(id, options) {
      const env = await driver.environment(id);
      const values = options.secretNames.map((name) => env[name]);
      const lines = await driver.logs(id, options);
      return (async function* () {
        for await (const { stream, line } of lines) yield { stream, line: redact(line, values) };
      })();
    },
  };
}
