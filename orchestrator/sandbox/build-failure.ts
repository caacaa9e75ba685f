import { OrchestratorError } from "../errors.ts";

/** A step header of the classic builder's output: its number of the total and its instruction. */
export const STEP = /^Step (\d+\/\d+) : (.*)$/;
/** The classic builder's own chatter between steps. */
const BUILDER_NOISE = /^ ---> |^Removing intermediate container |^Successfully (built|tagged) /;

/**
 * A failed build as the user needs it: the step that failed (`Step 3/5 : RUN make`) and that step's output, or,
 * when no step ran (a Dockerfile that does not parse), the engine's error.
 */
export function buildFailure(tag: string, log: string, error: string): OrchestratorError {
  const lines = log.split("\n");
  let at = lines.length - 1;
  while (at >= 0 && !STEP.test(lines[at]!)) at--;
  if (at < 0) return new OrchestratorError("IMAGE_BUILD_FAILED", `image build of ${tag} failed: ${error}`, log);
  const output = lines
    .slice(at + 1)
    .filter((l) => l.trim() && !BUILDER_NOISE.test(l))
    .join("\n");
  return new OrchestratorError("IMAGE_BUILD_FAILED", `image build of ${tag} failed at ${lines[at]}`, output);
}
