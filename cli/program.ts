import { Command, Option } from "commander";
import { VERSION } from "../protocol/version.ts";
import { printVersion } from "./commands/version.ts";
import { editDistance } from "./edit-distance.ts";
import { usageError } from "./errors.ts";

/**
 * The top-level commands by the words that select them (names and aliases), each loaded only when run: a command
 * pulls in its own modules and schemas, and `svc <noun> …` should pay for that noun alone. Help and an unknown word
 * load them all. `test/cli-output.test.ts` checks these words against the loaded commands.
 */
export const COMMANDS: { words: string[]; hidden?: boolean; load: () => Promise<Command[]> }[] = [
  { words: ["login", "logout", "whoami"], load: async () => (await import("./commands/auth.ts")).authCommands() },
  { words: ["hosts"], load: async () => [(await import("./commands/hosts.ts")).hostsCommand()] },
  { words: ["projects"], load: async () => [(await import("./commands/projects.ts")).projectsCommand()] },
  { words: ["cr"], load: async () => [(await import("./commands/cr.ts")).crCommand()] },
  { words: ["sessions"], load: async () => [(await import("./commands/sessions.ts")).sessionsCommand()] },
  { words: ["triggers"], load: async () => [(await import("./commands/triggers.ts")).triggersCommand()] },
  { words: ["apps"], load: async () => [(await import("./commands/apps.ts")).appsCommand()] },
  { words: ["channels"], load: async () => [(await import("./commands/channels.ts")).channelsCommand()] },
  { words: ["tokens"], load: async () => [(await import("./commands/tokens.ts")).tokensCommand()] },
  { words: ["secrets", "env"], load: async () => (await import("./commands/secrets.ts")).secretsCommands() },
  { words: ["ship", "deploy"], load: async () => [(await import("./commands/ship.ts")).shipCommand()] },
  { words: ["self-host"], load: async () => [(await import("./commands/self-host/index.ts")).selfHostCommand()] },
  { words: ["init"], load: async () => [(await import("./commands/init.ts")).initCommand()] },
  { words: ["update"], load: async () => [(await import("./commands/update.ts")).updateCommand()] },
  { words: ["uninstall"], load: async () => [(await import("./commands/uninstall.ts")).uninstallCommand()] },
  {
    words: ["git-credential"],
    hidden: true,
    load: async () => [(await import("./commands/git-credential.ts")).gitCredentialCommand()],
  },
];

/** The first word of `args` that is not a root option or its value: the command being run. */
export function commandWord(args: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--host") i++;
    else if (!arg.startsWith("-")) return arg;
  }
  return undefined;
}

/** `args`: the command line after `node svc`; only the command it names is loaded (every one for help). */
export async function buildProgram(args: string[]): Promise<Command> {
  const program = new Command("svc")
    .description("svc: agent sessions in disposable sandboxes, landing work through change requests")
    .version(VERSION, "-v, --version", "print the CLI version")
    .addOption(new Option("--host <name>", "use this host for one command"))
    .option("--verbose", "say which host, token and project were used and why")
    .showSuggestionAfterError()
    .helpCommand(true)
    .configureHelp({ sortSubcommands: true });
  program.command("version").description("print the CLI version").option("--json", "output JSON").action(printVersion);

  const word = commandWord(args);
  const chosen = COMMANDS.find((c) => word !== undefined && c.words.includes(word));
  const loading = word === "version" ? [] : chosen ? [chosen] : COMMANDS;
  for (const entry of loading)
    for (const cmd of await entry.load()) program.addCommand(cmd, entry.hidden ? { hidden: true } : {});
  if (chosen || word === "version") return program;

  // `svc <project-name>`: scaffold a new directory. A near-miss of a command, or a word followed by more words
  // (`svc sesions ls`), is a mistyped command, not a project.
  const { createProjectDirectory } = await import("./commands/init.ts");
  program
    .argument("[project-name]", "scaffold a new project in ./<project-name>")
    .allowExcessArguments()
    .action((name: string | undefined, _o, cmd: Command) => {
      if (!name) return program.help({ error: false });
      const near = program.commands.flatMap((c) => [c.name(), ...c.aliases()]).find((c) => editDistance(c, name) <= 2);
      if (near) throw usageError(`unknown command '${name}' (did you mean ${near}?)`);
      if (cmd.args.length > 1) throw usageError(`unknown command '${name}'; see 'svc help'`);
      createProjectDirectory(name, {});
    });
  return program;
}
