import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { type CliEnv, cliHome, svc } from "./support/cli.ts";
import { freshDatabase, type TestDatabase } from "./support/databases.ts";
import { svcPty } from "./support/pty.ts";

/** The real `svc` on a pseudo-terminal in `cwd` (support/pty.ts), driven as a person would. */
const terminal = (args: string[], options: { env: CliEnv; cwd?: string }) =>
  svcPty(args, { ...options, timeoutMs: 60_000 });

/** The same command on a terminal, nothing typed: its exit code and screen. */
async function onTerminal(args: string[], options: { env: CliEnv; cwd?: string }) {
  return terminal(args, options).exit();
}

describe("the CLI at a terminal and in a pipe: pickers, confirmations, table headers, help", () => {
  let db: TestDatabase;
  let api: TestApi;
  let user: Awaited<ReturnType<typeof seedUser>>;
  let env: CliEnv;
  const config = () => JSON.parse(readFileSync(env.SVC_CONFIG_FILE!, "utf8"));
  const run = (args: string[], opts: { cwd?: string } = {}) => svc(args, { env, cwd: opts.cwd });

  beforeAll(async () => {
    db = await freshDatabase("pglite");
    api = await startApi(db.sql);
    user = await seedUser(api.services);
    env = cliHome().env;
    const login = await run(["login", "--api", api.url, "--host", "mine", "--token", user.token]);
    expect(login.code, login.stderr).toBe(0);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("svc help and svc --help print every command and subcommand, one line each; help <command> its own", async () => {
    const help = await run(["help"]);
    expect(help.code, help.stderr).toBe(0);
    const lines = help.stdout.split("\n");
    for (const line of [
      /^ {2}hosts {2,}API endpoints the CLI talks to; one is active$/,
      /^ {4}hosts use \[name\] {2,}switch the active host/,
      /^ {4}hosts rm <name> {2,}remove a host \(the last one you added: asks first/,
      /^ {4}projects link \[id\] {2,}bind this directory to a project/,
      /^ {4}cr show\|info <cr> {2,}\S/,
      /^ {6}self-host env set <pairs\.\.\.> {2,}\S/,
      /^ {4}sessions chat\|talk \[id\] {2,}\S/,
      /^ {2}version {2,}print the CLI version$/,
    ])
      expect(
        lines.some((l) => line.test(l)),
        `${line} in:\n${help.stdout}`,
      ).toBe(true);
    // A pipe gets whole lines, however long.
    expect(help.stdout).toMatch(/^ {2}uninstall {2,}remove svc .* on the Docker engine$/m);
    expect(help.stdout).not.toContain("git-credential");

    expect((await run(["--help"])).stdout).toBe(help.stdout);
    expect((await run([])).stdout).toBe(help.stdout);
    const one = await run(["help", "hosts"]);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^Usage: svc hosts /);
    expect(one.stdout).not.toContain("projects link");
  });

  it("tables: an uppercase header on a terminal, none in a pipe; the host line stays on stderr", async () => {
    const created = await run(["projects", "create", "Header Check"]);
    expect(created.code, created.stderr).toBe(0);

    const piped = await run(["hosts", "ls"]);
    expect(piped.code).toBe(0);
    expect(piped.stdout).not.toMatch(/NAME/);
    expect(piped.stdout.split("\n")).toContain(`*\tmine\t${api.url}\tlogged in`);
    const tty = await onTerminal(["hosts", "ls"], { env });
    expect(tty.code).toBe(0);
    expect(tty.screen).toMatch(/^ {3}NAME {2,}URL {2,}STATUS\n {3}cloud {2,}https:/m);
    expect(tty.screen).toMatch(/^\* {2}mine {2,}http:\S+ {2,}logged in$/m);

    const projects = await run(["projects", "ls"]);
    expect(projects.code).toBe(0);
    expect(projects.stdout).toMatch(/^[0-9a-f-]{36}\theader-check\tmanaged\tmain\t/m);
    expect(projects.stdout).not.toContain("SLUG");
    expect(projects.stderr).toContain(`host: mine (${api.url})`);
    const projectsTty = await onTerminal(["projects", "ls"], { env });
    expect(projectsTty.screen).toMatch(
      /host: mine .*\nID {2,}SLUG {2,}REPO {2,}BRANCH {2,}URL\n[0-9a-f-]{36} {2}header-check/,
    );
  });

  it("svc hosts use with no name: a numbered picker at a terminal, a usage error (exit 2) off one", async () => {
    const off = await run(["hosts", "use"]);
    expect(off.code).toBe(2);
    expect(off.stderr).toContain("error: argument <name> is required when not interactive (svc hosts use <name>");
    expect(config().active_host).toBe("mine");

    const t = terminal(["hosts", "use"], { env });
    await t.expect("Which host?");
    // The built-in hosts and ours, numbered; the active one marked as what Enter keeps.
    await t.expect("1. cloud");
    await t.expect("> 5. mine");
    await t.expect("Number (1-5) [5]: ");
    t.answer("9");
    await t.expect("✗ type a number from the list (1-5)");
    await t.expect("Number (1-5) [5]: ");
    t.answer("2");
    await t.expect("✓ active host: selfhost");
    expect((await t.exit()).code).toBe(0);
    expect(config().active_host).toBe("selfhost");

    const back = terminal(["hosts", "use"], { env });
    await back.expect("Number (1-5) [2]: ");
    back.answer("mine");
    await back.expect("✓ active host: mine");
    expect((await back.exit()).code).toBe(0);
    expect(config().active_host).toBe("mine");

    // Ctrl-C at the question: nothing changes, and the command fails saying so.
    const quit = terminal(["hosts", "use"], { env });
    await quit.expect("Number (1-5) [5]: ");
    quit.type("\u0003");
    await quit.expect("error: cancelled; nothing changed");
    expect((await quit.exit()).code).toBe(1);
    expect(config().active_host).toBe("mine");
  });

  it("svc projects link with no id: the account's projects to pick from at a terminal, exit 2 off one", async () => {
    for (const name of ["Alpha Picker", "Beta Picker"]) expect((await run(["projects", "create", name])).code).toBe(0);
    const list: { id: string; slug: string }[] = JSON.parse((await run(["projects", "ls", "--json"])).stdout);
    const dir = mkdtempSync(join(tmpdir(), "svc-pick-"));

    const off = await run(["projects", "link"], { cwd: dir });
    expect(off.code).toBe(2);
    expect(off.stderr).toContain("argument <id> is required when not interactive (svc projects link <id>");
    expect(existsSync(join(dir, ".svc", "link.json"))).toBe(false);

    const beta = list.findIndex((p) => p.slug === "beta-picker");
    const t = terminal(["projects", "link"], { env, cwd: dir });
    await t.expect("Which project?");
    await t.expect(`${beta + 1}. beta-picker`);
    await t.expect(`Number (1-${list.length}): `);
    t.answer(String(beta + 1));
    await t.expect("✓ linked");
    expect((await t.exit()).code).toBe(0);
    const link = JSON.parse(readFileSync(join(dir, ".svc", "link.json"), "utf8"));
    expect(link).toMatchObject({ project_id: list[beta]!.id, host: "mine" });

    // Linked: Enter keeps the current project.
    const again = terminal(["projects", "link"], { env, cwd: dir });
    await again.expect(`> ${beta + 1}. beta-picker`);
    await again.expect(`[${beta + 1}]: `);
    again.answer("");
    await again.expect("✓ linked");
    expect((await again.exit()).code).toBe(0);
  });

  it("svc hosts rm of the last added host: asks at a terminal (y removes, n keeps), needs --yes off one", async () => {
    const home = cliHome().env;
    const add = await svc(["hosts", "add", "solo", "--url", "http://127.0.0.1:9"], { env: home });
    expect(add.code).toBe(0);
    const hostsOf = () => Object.keys(JSON.parse(readFileSync(home.SVC_CONFIG_FILE!, "utf8")).hosts);

    const off = await svc(["hosts", "rm", "solo"], { env: home });
    expect(off.code).toBe(2);
    expect(off.stderr).toContain(
      "error: 'solo' is the last host you added or logged in to: --yes is required when not interactive (svc hosts rm solo --yes)",
    );
    expect(hostsOf()).toEqual(["solo"]);

    const no = terminal(["hosts", "rm", "solo"], { env: home });
    await no.expect("'solo' is the last host you added or logged in to. Remove it and its stored token? [y/N] ");
    no.answer("n");
    await no.expect("error: kept host 'solo'");
    expect((await no.exit()).code).toBe(1);
    expect(hostsOf()).toEqual(["solo"]);

    const yes = terminal(["hosts", "rm", "solo"], { env: home });
    await yes.expect("[y/N] ");
    yes.answer("y");
    await yes.expect("✓ removed host solo");
    expect((await yes.exit()).code).toBe(0);
    expect(hostsOf()).toEqual([]);

    // Not the last one: no question, at a terminal or not.
    for (const name of ["one", "two"]) await svc(["hosts", "add", name, "--url", "http://127.0.0.1:9"], { env: home });
    const notLast = await onTerminal(["hosts", "rm", "one"], { env: home });
    expect(notLast.code).toBe(0);
    expect(notLast.screen).not.toContain("[y/N]");
    const withYes = await svc(["hosts", "rm", "two", "--yes"], { env: home });
    expect(withYes.code, withYes.stderr).toBe(0);
    expect(hostsOf()).toEqual([]);
  });
});
