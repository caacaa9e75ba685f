import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { buildProgram, COMMANDS, commandList, commandWord } from "./program.ts";

describe("the lazily loaded command table", () => {
  it("selects each command by exactly the names and aliases the loaded command answers to", async () => {
    for (const entry of COMMANDS) {
      const loaded = (await entry.load()).flatMap((c) => [c.name(), ...c.aliases()]);
      expect(loaded.sort()).toEqual([...entry.words].sort());
    }
  });

  it("finds the command word after root options and their values", () => {
    expect(commandWord(["--host", "selfhost", "--verbose", "sessions", "ls"])).toBe("sessions");
    expect(commandWord(["-v"])).toBeUndefined();
    expect(commandWord(["cr", "--host", "x"])).toBe("cr");
  });
});

describe("svc help: the full command list", async () => {
  // `svc help` builds the program with nothing after `help`: every command loaded.
  const program = await buildProgram(["help"]);
  const list = (width?: number) => commandList(program, program.createHelp(), width);
  const lines = list().split("\n");
  /** The command lines, indentation removed: `hosts use [name]  switch the active host …`. */
  const commandLines = lines.slice(lines.indexOf("Commands:") + 1, lines.indexOf("Flags:") - 1).map((l) => l.trim());

  it("has a line for every command SPEC promises, with its arguments", () => {
    const promised = [
      "login",
      "logout",
      "whoami",
      "hosts ls",
      "hosts use [name]",
      "hosts add <name>",
      "hosts rm <name>",
      "hosts info [name]",
      "hosts current",
      "self-host start",
      "self-host configure",
      "self-host env ls",
      "self-host env set <pairs...>",
      "self-host logs [service]",
      "self-host stop",
      "projects ls",
      "projects info [id-or-slug]",
      "projects link [id]",
      "projects unlink",
      "projects open [id-or-slug]",
      "secrets ls",
      "secrets set <pairs...>",
      "secrets unset <names...>",
      "env pull",
      "env push",
      "sessions ls",
      "sessions new",
      "sessions restart <id>",
      "sessions rm <id>",
      "sessions open <id>",
      "sessions chat|talk [id]",
      "sessions preview <id> [port]",
      "triggers ls",
      "triggers info <slug>",
      "triggers fire <slug>",
      "triggers enable <slug>",
      "triggers disable <slug>",
      "cr ls",
      "cr show|info <cr>",
      "cr diff <cr>",
      "cr merge <cr>",
      "cr checks <cr>",
      "cr close <cr>",
      "cr reopen <cr>",
      "cr comment <cr> <text>",
      "cr comments <cr>",
      "cr resolve <cr>",
      "update",
      "uninstall",
      "version",
      "init",
      "ship|deploy",
      "channels",
      "help [command]",
    ];
    for (const term of promised)
      expect(
        commandLines.some((l) => l.startsWith(`${term}  `)),
        `no line for '${term}'`,
      ).toBe(true);
    expect(commandLines.find((l) => l.startsWith("cr open|"))).toMatch(/^cr open\|new\|create {2}/);
  });

  it("lists every visible command of the program once, with its description, and no hidden one", () => {
    const expected: string[] = [];
    const walk = (cmd: Command, path: string[]) => {
      for (const sub of cmd.commands) {
        if ((sub as unknown as { _hidden: boolean })._hidden) continue;
        expected.push(`${[...path, sub.name()].join(" ")} ${sub.description().split("\n")[0]}`);
        walk(sub, [...path, sub.name()]);
      }
    };
    walk(program, []);
    expect(expected.length).toBeGreaterThan(70);
    const shown = commandLines
      .filter((l) => !l.startsWith("help "))
      .map((l) => {
        const [term, description] = l.split(/ {2,}/, 2);
        return `${term!
          .split(" ")
          .filter((w) => !/^[<[]/.test(w))
          .map((w) => w.split("|")[0])
          .join(" ")} ${description}`;
      });
    expect(shown.sort()).toEqual(expected.sort());
    expect(list()).not.toContain("git-credential");
  });

  it("subcommands sit under their command, indented, with no group's own help command", () => {
    const at = (term: string) => lines.findIndex((l) => l.trimStart().startsWith(`${term}  `));
    expect(lines[at("hosts")]).toMatch(/^ {2}hosts {2,}API endpoints/);
    expect(lines[at("hosts use [name]")]).toMatch(/^ {4}hosts use \[name\]/);
    expect(lines[at("self-host env set <pairs...>")]).toMatch(/^ {6}self-host env set/);
    expect(at("hosts ls")).toBeGreaterThan(at("hosts"));
    expect(at("hosts ls")).toBeLessThan(at("init"));
    expect(lines.filter((l) => l.trim().startsWith("help ")).length).toBe(1);
    expect(lines).toContain("Flags:");
    expect(lines.some((l) => l.startsWith("  --host <name>"))).toBe(true);
  });

  it("one line each: cut with an ellipsis to a terminal's width, whole in a pipe", () => {
    const long = commandLines.find((l) => l.startsWith("uninstall  "))!;
    expect(long.length).toBeGreaterThan(80);
    const narrow = list(60).split("\n");
    expect(narrow.length).toBe(lines.length);
    expect(Math.max(...narrow.map((l) => l.length))).toBe(60);
    expect(narrow.find((l) => l.startsWith("  uninstall "))).toMatch(/^ {2}uninstall {2,}remove svc.*…$/);
    expect(narrow.find((l) => l.startsWith("    hosts info "))).toBe("    hosts info [name]               one host");
  });
});
