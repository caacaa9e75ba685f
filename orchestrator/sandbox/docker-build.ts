import type Docker from "dockerode";
import { plainText } from "../../protocol/terminal-text.ts";
import { buildFailure, STEP } from "./build-failure.ts";
import type { ImageBuild, SandboxLimits } from "./driver.ts";
import type { SandboxPlacement } from "./networking.ts";

/** A CPU period of 100 ms: the engine's own default, against which a build's quota is counted. */
const CPU_PERIOD_US = 100_000;

/** The build API's fences for a sandbox's image: its limits (no swap beyond them) and its network and host alias. */
export function buildFences(placement: SandboxPlacement, limits: SandboxLimits) {
  return {
    memory: limits.memoryBytes,
    memswap: limits.memoryBytes,
    cpuperiod: CPU_PERIOD_US,
    cpuquota: Math.round((limits.nanoCpus * CPU_PERIOD_US) / 1e9),
    networkmode: placement.networkId,
    extrahosts: `host.docker.internal:${placement.hostAddress}`,
  };
}

/** Runs one build on the engine and follows it; resolves with its log, rejects with the failing step. */
export async function runBuild(
  docker: Docker,
  build: ImageBuild,
  context: NodeJS.ReadableStream | { context: string; src: string[] },
  fences: Partial<ReturnType<typeof buildFences>>,
  onStep?: (step: string) => void,
): Promise<string> {
  const stream = await docker.buildImage(context as NodeJS.ReadableStream, {
    t: build.tag,
    buildargs: build.buildArgs ?? {},
    ...(build.dockerfile ? { dockerfile: build.dockerfile } : {}),
    ...fences,
    rm: true,
    forcerm: true,
  });
  const lines: string[] = [];
  const failure = await new Promise<string | undefined>((resolve) => {
    docker.modem.followProgress(
      stream,
      (err: Error | null) => resolve(err ? err.message : undefined),
      (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
        if (event.stream) {
          lines.push(event.stream);
          for (const line of plainText(event.stream).split("\n")) {
            const step = STEP.exec(line.trim());
            if (step) onStep?.(`${step[1]} ${step[2]}`);
          }
        }
        if (event.error) lines.push(`ERROR: ${event.errorDetail?.message ?? event.error}\n`);
      },
    );
  });
  // Colours and cursor moves of the build's commands would reach browsers and pipes through a session's error.
  const log = plainText(lines.join(""));
  const error = failure ?? (log.includes("ERROR: ") ? log.slice(log.lastIndexOf("ERROR: ")) : undefined);
  if (error) throw buildFailure(build.tag, log, plainText(error).trim());
  return log;
}
