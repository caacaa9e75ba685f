import { watch } from "node:fs";
import { open, stat } from "node:fs/promises";
import { CliError } from "../../errors.ts";
import { useColor } from "../../table.ts";
import { COMPOSE_SERVICES, composeProject, serviceContainers } from "./compose.ts";
import { containerLogLines } from "./container-logs.ts";
import { jsonLogLine, readableLogLine } from "./log-format.ts";
import { tailFile } from "./process.ts";
import { ensureState, selfHostPaths } from "./state.ts";
import { dockerCli, stackName, stackServices } from "./swarm.ts";

/** The embedded stack runs one service, the API process. */
const EMBEDDED_SERVICES = ["api"] as const;

export type LogsOptions = { follow?: boolean; lines: number; json?: boolean };

/** Prints whole lines as they are appended (a rotated or truncated log starts over from its beginning). */
async function follow(path: string, from: number, print: (line: string) => void): Promise<never> {
  let offset = from;
  let partial = "";
  const handle = await open(path, "r");
  const pump = async () => {
    const { size } = await stat(path);
    if (size < offset) offset = 0;
    if (size === offset) return;
    const buf = Buffer.alloc(size - offset);
    await handle.read(buf, 0, buf.length, offset);
    offset = size;
    const lines = (partial + buf.toString("utf8")).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) print(line);
  };
  watch(path, () => void pump());
  return new Promise<never>(() => {});
}

/**
 * The compose stack's service's log, from the engine: each replica's in turn, or all of them as they write with
 * `follow`; with several replicas, the replica's container name leads.
 */
async function composeLogs(
  service: string,
  options: LogsOptions,
  print: (line: string, replica?: string) => void,
): Promise<void> {
  const paths = selfHostPaths();
  const containers = (await serviceContainers(composeProject(paths))).filter((c) => c.service === service);
  if (containers.length === 0) {
    throw new CliError(`the compose stack has no ${service} container yet; run 'svc self-host start'`);
  }
  const replica = (name: string) => (containers.length > 1 ? name : undefined);
  const printAll = async (name: string) => {
    for await (const { line } of containerLogLines(name, { tail: options.lines, follow: options.follow }))
      print(line, replica(name));
  };
  if (options.follow) await Promise.all(containers.map((c) => printAll(c.name)));
  else for (const c of containers) await printAll(c.name);
}

/**
 * `docker service logs` of the stack's service, each line without its `<stack>_<service>.<slot>.<task>@<node> | `
 * prefix; with several replicas, `<service>.<slot>` leads (a replica's tasks, restarted, share it).
 */
async function swarmLogs(
  service: string,
  options: LogsOptions,
  print: (line: string, replica?: string) => void,
): Promise<void> {
  const paths = selfHostPaths();
  const stack = stackName(paths);
  const found = (await stackServices(stack)).find((s) => s.service === service);
  if (!found) throw new CliError(`the swarm stack ${stack} has no ${service} service; run 'svc self-host start'`);
  const args = ["service", "logs", "--no-trunc", "--tail", String(options.lines), ...(options.follow ? ["-f"] : [])];
  const result = await dockerCli([...args, found.name], process.env, (line) => {
    const prefix = /^(\S+?)\.(\d+)\.\S*\s*\| ?/.exec(line);
    if (!prefix) return;
    print(line.slice(prefix[0].length), found.desired > 1 ? `${service}.${prefix[2]}` : undefined);
  });
  if (result.code !== 0) throw new CliError(`docker service logs failed (exit ${result.code})`);
}

export async function selfHostLogs(service: string | undefined, options: LogsOptions): Promise<void> {
  const name = service ?? "api";
  const paths = selfHostPaths();
  const color = !options.json && useColor(undefined);
  const print = (line: string, replica?: string) => {
    if (options.json) {
      const json = jsonLogLine(line);
      process.stdout.write(`${replica ? `{"replica":${JSON.stringify(replica)},${json.slice(1)}` : json}\n`);
    } else process.stdout.write(`${replica ? `${replica} ` : ""}${readableLogLine(line, color)}\n`);
  };
  const mode = ensureState(paths).mode;
  if (mode === "compose" || mode === "swarm") {
    if (!(COMPOSE_SERVICES as readonly string[]).includes(name)) {
      throw new CliError(`unknown service '${name}'; services: ${COMPOSE_SERVICES.join(", ")}`);
    }
    return mode === "swarm" ? swarmLogs(name, options, print) : composeLogs(name, options, print);
  }
  if (!(EMBEDDED_SERVICES as readonly string[]).includes(name)) {
    throw new CliError(`unknown service '${name}'; services: ${EMBEDDED_SERVICES.join(", ")}`);
  }
  const size = await stat(paths.apiLog).then(
    (s) => s.size,
    () => undefined,
  );
  if (size === undefined) throw new CliError(`no logs yet at ${paths.apiLog}; run 'svc self-host start' first`);
  const text = tailFile(paths.apiLog, options.lines);
  if (text) for (const line of text.split("\n")) print(line);
  if (options.follow) await follow(paths.apiLog, size, print);
}
