import { type Argument, Command, Help, Option } from "commander";
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
  { words: ["members"], load: async () => [(await import("./commands/members.ts")).membersCommand()] },
  { words: ["accounts"], load: async () => [(await import("./commands/accounts.ts")).accountsCommand()] },
  { words: ["audit"], load: async () => [(await import("./commands/audit.ts")).auditCommand()] },
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

/** `<name>`, `[name]`, `<pairs...>`: an argument as usage lines write it. */
function argumentTerm(arg: Argument): string {
  const name = `${arg.name()}${arg.variadic ? "..." : ""}`;
  return arg.required ? `<${name}>` : `[${name}]`;
}

/** Up to `width` columns; a longer line ends in an ellipsis. No width (not a terminal): the whole line. */
function fit(line: string, width: number | undefined): string {
  return width && line.length > width ? `${line.slice(0, width - 1)}…` : line;
}

/**
 * SPEC `svc help`: the full command list, made from the program itself so it cannot drift from it. Every visible
 * command and each of its subcommands (to any depth), one line each with its one-line description; subcommands are
 * indented under their command and named in full (`hosts use [name]`) so a line can be grepped and pasted. On a
 * terminal (`width` given) lines are cut to fit rather than wrapped; a pipe gets them whole.
 */
export function commandList(program: Command, helper: Help, width?: number): string {
  const rows: [string, string][] = [];
  const walk = (cmd: Command, path: string[], depth: number) => {
    // A group's own `help` subcommand is `svc help <group>` again: listed once, at the top.
    const subs = helper.visibleCommands(cmd).filter((c) => depth === 0 || c.name() !== "help");
    for (const sub of subs.sort((a, b) => a.name().localeCompare(b.name()))) {
      const words = [...path, [sub.name(), ...sub.aliases()].join("|")];
      const term = [...words, ...sub.registeredArguments.map(argumentTerm)].join(" ");
      const description = helper.subcommandDescription(sub).split("\n")[0]!;
      rows.push([`${"  ".repeat(depth + 1)}${term}`, description]);
      walk(sub, [...path, sub.name()], depth + 1);
    }
  };
  walk(program, [], 0);
  // Long terms (`channels disconnect <id-or-channel-id>`) do not push every description to the right.
  const termWidth = Math.min(34, Math.max(...rows.map(([term]) => term.length)));
  const line = ([term, description]: [string, string]) => `${term.padEnd(termWidth)}  ${description}`.trimEnd();
  const options = helper
    .visibleOptions(program)
    .map((o) => `  ${helper.optionTerm(o).padEnd(termWidth - 2)}  ${helper.optionDescription(o)}`);
  const lines = [
    helper.commandDescription(program),
    "",
    "Usage:",
    "  svc [--host <name>] [--verbose] <command> [subcommand] [arguments] [flags]",
    "  svc <project-name>        scaffold a new project in ./<project-name> (as 'svc init' there)",
    "",
    "Commands:",
    ...rows.map(line),
    "",
    "Flags:",
    ...options,
    "",
    "Run 'svc help <command>' or 'svc <command> <subcommand> --help' for a command's flags and arguments.",
  ];
  return `${lines.map((l) => fit(l, width)).join("\n")}\n`;
}

/**
 * Root help is the full command list; every other command's help is commander's own. The width is the terminal's
 * when help goes to one, else none (commander would assume 80).
 */
function fullListHelp(): Partial<Help> {
  let width: number | undefined;
  return {
    sortSubcommands: true,
    prepareContext(context) {
      width = context.helpWidth;
      Help.prototype.prepareContext.call(this, context);
    },
    formatHelp(cmd, helper) {
      if (cmd.parent) return Help.prototype.formatHelp.call(helper, cmd, helper);
      return commandList(cmd, helper, width);
    },
  };
}

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
    .helpOption("-h, --help", "the full command list (after a command: that command's help)")
    .showSuggestionAfterError()
    .helpCommand("help [command]", "the full command list, or one command's help")
    .configureHelp(fullListHelp());
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
