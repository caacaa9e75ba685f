import { Command, InvalidArgumentError, Option } from "commander";
import { VERSION } from "../protocol/version.ts";
import { authCommands } from "./commands/auth.ts";
import { crCommand } from "./commands/cr.ts";
import { hostsCommand } from "./commands/hosts.ts";
import { createProjectDirectory, initCommand } from "./commands/init.ts";
import { projectsCommand } from "./commands/projects.ts";
import { secretsCommands } from "./commands/secrets.ts";
import { envList, envSet } from "./commands/self-host/env.ts";
import { selfHostLogs } from "./commands/self-host/logs.ts";
import { startSelfHost } from "./commands/self-host/start.ts";
import { stopSelfHost } from "./commands/self-host/stop.ts";
import { sessionsCommand } from "./commands/sessions.ts";
import { shipCommand } from "./commands/ship.ts";
import { usageError } from "./errors.ts";
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

/** SPEC commands this build does not have yet: never mistaken for a new project's name. */
const NOT_YET = ["triggers", "update", "uninstall", "channels"];

/** Edit distance, to tell a mistyped command from a new project's name. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length]!;
}

export function buildProgram(): Command {
  const program = new Command("svc")
    .description("svc: agent sessions in disposable sandboxes, landing work through change requests")
    .version(VERSION, "-v, --version", "print the CLI version")
    .addOption(new Option("--host <name>", "use this host for one command"))
    .option("--verbose", "say which host, token and project were used and why")
    .showSuggestionAfterError()
    .helpCommand(true)
    .configureHelp({ sortSubcommands: true });
  program
    .command("version")
    .description("print the CLI version")
    .action(() => printLine(VERSION));
  for (const cmd of authCommands()) program.addCommand(cmd);
  program.addCommand(hostsCommand());
  program.addCommand(projectsCommand());
  program.addCommand(crCommand());
  program.addCommand(sessionsCommand());
  for (const cmd of secretsCommands()) program.addCommand(cmd);
  program.addCommand(shipCommand());
  program.addCommand(selfHostCommand());
  program
    .command("init")
    .description("scaffold svc.toml, .svc/Dockerfile and the agent config in this directory")
    .option("--force", "overwrite existing files")
    .action((opts: { force?: boolean }) => initCommand(opts));

  // `svc <project-name>`: scaffold a new directory. A near-miss of a command is a typo, not a project.
  program
    .argument("[project-name]", "scaffold a new project in ./<project-name>")
    .action((name: string | undefined) => {
      if (!name) return program.help({ error: false });
      if (NOT_YET.includes(name)) throw usageError(`unknown command '${name}': not in this version of svc`);
      const commands = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
      const near = commands.find((c) => distance(c, name) <= 2);
      if (near) throw usageError(`unknown command '${name}' (did you mean ${near}?)`);
      createProjectDirectory(name, {});
    });
  return program;
}
