import { Command, InvalidArgumentError } from "commander";
import { VERSION } from "../api/version.ts";
import { envList, envSet } from "./commands/self-host/env.ts";
import { selfHostLogs } from "./commands/self-host/logs.ts";
import { startSelfHost } from "./commands/self-host/start.ts";
import { stopSelfHost } from "./commands/self-host/stop.ts";
import { printLine } from "./output.ts";

export function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port < 1 || port > 65535)
    throw new InvalidArgumentError("must be a port number (1-65535)");
  return port;
}

export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1) throw new InvalidArgumentError("must be a positive integer");
  return n;
}

function selfHostCommand(): Command {
  const selfHost = new Command("self-host").description("run the whole platform on this machine");
  selfHost
    .command("start")
    .description("start the local stack in the background and log in to it as host 'selfhost'")
    .option("--port <port>", "port the API listens on (default 7700, remembered)", parsePort)
    .action((opts: { port?: number }) => startSelfHost(opts));
  selfHost
    .command("stop")
    .description("stop the local stack")
    .action(() => stopSelfHost());
  selfHost
    .command("logs")
    .description("print the stack's logs")
    .argument("[service]", "service to show (api)")
    .option("-f, --follow", "keep printing new lines")
    .option("-n, --lines <n>", "lines to show", parsePositiveInt, 200)
    .action((service: string | undefined, opts: { follow?: boolean; lines: number }) => selfHostLogs(service, opts));
  const env = selfHost.command("env").description("persistent settings of the stack, applied at the next start");
  env
    .command("ls")
    .description("show the values, secrets masked")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => envList(opts));
  env
    .command("set")
    .description("set KEY=VALUE pairs (an empty value removes the key)")
    .argument("<pairs...>", "KEY=VALUE")
    .action((pairs: string[]) => envSet(pairs));
  return selfHost;
}

export function buildProgram(): Command {
  const program = new Command("svc")
    .description("svc: agent sessions in disposable sandboxes, landing work through change requests")
    .version(VERSION, "-v, --version", "print the CLI version")
    .showSuggestionAfterError()
    .configureHelp({ sortSubcommands: true });
  program
    .command("version")
    .description("print the CLI version")
    .action(() => printLine(VERSION));
  program.addCommand(selfHostCommand());
  return program;
}
