import { Command, Option } from "commander";
import { editDistance } from "../protocol/edit-distance.ts";
import { VERSION } from "../protocol/version.ts";
import { appsCommand } from "./commands/apps.ts";
import { authCommands } from "./commands/auth.ts";
import { crCommand } from "./commands/cr.ts";
import { gitCredentialCommand } from "./commands/git-credential.ts";
import { hostsCommand } from "./commands/hosts.ts";
import { createProjectDirectory, initCommand } from "./commands/init.ts";
import { projectsCommand } from "./commands/projects.ts";
import { secretsCommands } from "./commands/secrets.ts";
import { selfHostCommand } from "./commands/self-host/index.ts";
import { sessionsCommand } from "./commands/sessions.ts";
import { shipCommand } from "./commands/ship.ts";
import { triggersCommand } from "./commands/triggers.ts";
import { uninstallCommand } from "./commands/uninstall.ts";
import { updateCommand } from "./commands/update.ts";
import { usageError } from "./errors.ts";
import { printJson, printLine } from "./output.ts";

/** SPEC commands this build does not have yet: never mistaken for a new project's name. */
const NOT_YET = ["channels"];

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
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => (opts.json ? printJson({ version: VERSION }) : printLine(VERSION)));
  for (const cmd of authCommands()) program.addCommand(cmd);
  program.addCommand(hostsCommand());
  program.addCommand(projectsCommand());
  program.addCommand(crCommand());
  program.addCommand(sessionsCommand());
  program.addCommand(triggersCommand());
  program.addCommand(appsCommand());
  for (const cmd of secretsCommands()) program.addCommand(cmd);
  program.addCommand(shipCommand());
  program.addCommand(selfHostCommand());
  program.addCommand(initCommand());
  program.addCommand(updateCommand());
  program.addCommand(uninstallCommand());
  program.addCommand(gitCredentialCommand(), { hidden: true });

  // `svc <project-name>`: scaffold a new directory. A near-miss of a command, or a word followed by more words
  // (`svc sesions ls`), is a mistyped command, not a project.
  program
    .argument("[project-name]", "scaffold a new project in ./<project-name>")
    .allowExcessArguments()
    .action((name: string | undefined, _o, cmd: Command) => {
      if (!name) return program.help({ error: false });
      if (NOT_YET.includes(name)) throw usageError(`unknown command '${name}': not in this version of svc`);
      const near = program.commands.flatMap((c) => [c.name(), ...c.aliases()]).find((c) => editDistance(c, name) <= 2);
      if (near) throw usageError(`unknown command '${name}' (did you mean ${near}?)`);
      if (cmd.args.length > 1) throw usageError(`unknown command '${name}'; see 'svc help'`);
      createProjectDirectory(name, {});
    });
  return program;
}
