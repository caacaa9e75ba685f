import { isIP } from "node:net";
import { Command, InvalidArgumentError } from "commander";
import { parsePort, parsePositiveInt } from "../../flag-parsers.ts";
import { printJson, printLine } from "../../output.ts";
import { backupSelfHost } from "./backup.ts";
import { doctor } from "./doctor.ts";
import { envList, envSet } from "./env.ts";
import { selfHostLogs } from "./logs.ts";
import { restoreSelfHost } from "./restore.ts";
import { type StartOptions, type StartResult, startSelfHost } from "./start.ts";
import { readState, StackMode, selfHostPaths } from "./state.ts";
import { printStatus } from "./status.ts";
import { stopSelfHost } from "./stop.ts";
import { configure } from "./wizard.ts";

function parseListen(value: string): string {
  if (isIP(value) === 0) throw new InvalidArgumentError("must be an IP address, e.g. 127.0.0.1 or 0.0.0.0");
  return value;
}

function parseMode(value: string): StackMode {
  const parsed = StackMode.safeParse(value);
  if (!parsed.success) throw new InvalidArgumentError("must be embedded, compose or swarm");
  return parsed.data;
}

function parseReplicas(value: string): number {
  const n = parsePositiveInt(value);
  if (n > 8) throw new InvalidArgumentError("must be between 1 and 8");
  return n;
}

const printStart = (result: StartResult, json?: boolean) => (json ? printJson(result) : printLine(result.url));

function startOptions(cmd: Command): Command {
  return cmd
    .option("--port <port>", "port the API listens on (default 7700, remembered)", parsePort)
    .option(
      "--listen <address>",
      "address the API listens on (default 127.0.0.1; 0.0.0.0 lets other machines in; remembered)",
      parseListen,
    )
    .option(
      "--mode <mode>",
      "embedded (one API process on PGlite), compose (containers with PostgreSQL) or swarm (the same as a Docker Swarm stack, on a manager); remembered",
      parseMode,
    )
    .option(
      "--api-replicas <n>",
      "API containers behind the port in compose and swarm mode (default 1; remembered)",
      parseReplicas,
    )
    .option("--json", "output JSON");
}

/** `svc self-host`: one verb a file beside this one, with the stack's state, process and health helpers. */
export function selfHostCommand(): Command {
  const selfHost = new Command("self-host").description("run the whole platform on this machine");
  startOptions(
    selfHost
      .command("start")
      .description("start the local stack in the background and log in to it as host 'selfhost'")
      .option(
        "--no-wizard",
        "do not ask the first start's questions (nor does a start off a terminal, or with CI=true)",
      ),
  ).action(async (opts: StartOptions & { wizard?: boolean; json?: boolean }) =>
    printStart(await startSelfHost(opts), opts.json),
  );
  selfHost
    .command("stop")
    .description("stop the local stack; running sessions keep their sandboxes (adopted at the next start)")
    .option("--sandboxes", "stop every running session's sandbox too (branches and records stay)")
    .option("--json", "output JSON")
    .action(async (opts: { sandboxes?: boolean; json?: boolean }) => {
      const result = await stopSelfHost({ sandboxes: opts.sandboxes });
      if (opts.json) printJson(result);
    });
  startOptions(selfHost.command("restart").description("stop and start the stack, applying 'env set' values")).action(
    async (opts: StartOptions & { json?: boolean }) => {
      // Into another mode: this one's sessions stop too (their sandboxes would wait for a stack that is not coming).
      const from = readState(selfHostPaths())?.mode;
      const stopped = await stopSelfHost({ sandboxes: Boolean(from && opts.mode && opts.mode !== from) });
      // A restart applies the settings as they are (`svc update` runs one): questions are for start and configure.
      const started = await startSelfHost({ ...opts, wizard: false });
      if (opts.json) printJson({ ...started, stopped_pid: stopped.pid });
      else printLine(started.url);
    },
  );
  selfHost
    .command("configure")
    .description("ask again for the integrations and the model gateway (at a terminal; else use 'env set')")
    .action(() => configure());
  selfHost
    .command("status")
    .description("show the stack: state, URL, version, data dir, model, running sessions")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => printStatus(opts));
  selfHost
    .command("doctor")
    .description("check the stack, Docker, the base image and the model gateway end to end")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => doctor(opts));
  selfHost
    .command("logs")
    .description("print the stack's logs (readable lines; JSON lines with --json)")
    .argument("[service]", "service to show: api (default); compose and swarm mode also postgres and edge")
    .option("-f, --follow", "keep printing new lines")
    .option("-n, --lines <n>", "lines to show", parsePositiveInt, 200)
    .option("--json", "print the log's JSON lines as they are")
    .action((service: string | undefined, opts: { follow?: boolean; lines: number; json?: boolean }) =>
      selfHostLogs(service, opts),
    );
  selfHost
    .command("backup")
    .description(
      "write the running stack's database, managed repositories, secrets key and settings to one file (tar.gz, 0600)",
    )
    .argument("<file>", "the backup file to write")
    .option("--force", "overwrite the file when it exists")
    .option("--json", "output JSON")
    .action(async (file: string, opts: { force?: boolean; json?: boolean }) => {
      const result = await backupSelfHost(file, opts);
      if (opts.json) printJson(result);
    });
  selfHost
    .command("restore")
    .description(
      "put a backup into this SVC_HOME as a stack of its own (new installation id and admin token); then 'start'",
    )
    .argument("<file>", "a file 'svc self-host backup' wrote")
    .option("--force", "delete the data this home already holds (database, repositories, volumes) and restore")
    .option("--json", "output JSON")
    .action(async (file: string, opts: { force?: boolean; json?: boolean }) => {
      const result = await restoreSelfHost(file, opts);
      if (opts.json) printJson(result);
    });
  const env = selfHost.command("env").description("persistent settings of the stack, applied at the next start");
  env
    .command("ls")
    .description("show the known settings with their meaning, and any other value stored; secrets masked")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => envList(opts));
  env
    .command("set")
    .description("set KEY=VALUE pairs (an empty value removes the key); 'restart' applies them")
    .argument("<pairs...>", "KEY=VALUE")
    .option("--json", "output JSON")
    .action((pairs: string[], opts: { json?: boolean }) => envSet(pairs, opts));
  return selfHost;
}
