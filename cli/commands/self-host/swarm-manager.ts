import { z } from "zod";
import { CliError } from "../../errors.ts";
import { type DockerAnswer, dockerGet } from "./docker-engine.ts";

/** The part of `docker info` (GET /info) that says what this engine is in a swarm. */
const EngineInfo = z.object({
  Swarm: z
    .object({
      NodeID: z.string().default(""),
      /** inactive, pending, active, error or locked. */
      LocalNodeState: z.string().default("inactive"),
      ControlAvailable: z.boolean().default(false),
      Error: z.string().default(""),
    })
    .default({ NodeID: "", LocalNodeState: "inactive", ControlAvailable: false, Error: "" }),
});
export type EngineInfo = z.infer<typeof EngineInfo>;

/** The engine is not a Swarm manager, or did not say: swarm mode cannot run on it. Exit 1. */
export class NotSwarmManager extends CliError {}

/** This node, when it is a manager: what the stack's services are pinned to. */
export type ManagerNode = { nodeId: string };

/** Why this engine cannot deploy the stack, in the words a person acts on; undefined when it is a manager. */
export function managerProblem(info: EngineInfo): string | undefined {
  const { LocalNodeState: state, ControlAvailable: manager, Error: error } = info.Swarm;
  if (state === "active" && manager) return undefined;
  const lead = "swarm mode needs the Docker engine to be a Swarm manager";
  if (state === "inactive") {
    // Initialising a swarm changes the engine for everything else on it: the person decides, svc never does.
    return `${lead}, and it is in no swarm: run 'docker swarm init' (or join it to a swarm as a manager), then start again`;
  }
  if (state === "active") {
    return `${lead}, and it is a worker: run 'svc self-host start --mode swarm' on a manager ('docker node ls' there lists them), or promote this node with 'docker node promote' on one`;
  }
  return `${lead}, and its swarm state is ${state}${error ? ` (${error})` : ""}: see 'docker info', or run 'docker swarm init' once it has left that swarm`;
}

export type ManagerDeps = { info: () => Promise<DockerAnswer> };

/** `docker info` as the engine's API answers it (the CLI runs nothing here: one HTTP call on the socket). */
export const engineInfo: ManagerDeps = { info: () => dockerGet("/info", 5000) };

/** This engine's node when it is a Swarm manager; otherwise a NotSwarmManager that says what to run. */
export async function requireSwarmManager(deps: ManagerDeps = engineInfo): Promise<ManagerNode> {
  const answer = await deps.info();
  if ("error" in answer) throw new NotSwarmManager(`the Docker engine did not answer: ${answer.error}`);
  if (answer.status !== 200)
    throw new NotSwarmManager(`the Docker engine refused 'docker info' (HTTP ${answer.status})`);
  const parsed = EngineInfo.safeParse(JSON.parse(answer.body));
  if (!parsed.success)
    throw new NotSwarmManager("the Docker engine's 'docker info' does not say what it is in a swarm");
  const problem = managerProblem(parsed.data);
  if (problem) throw new NotSwarmManager(problem);
  return { nodeId: parsed.data.Swarm.NodeID };
}
