import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, WITHOUT_SESSION } from "./support/cli.ts";

const REPO_ROOT = new URL("..", import.meta.url).pathname;
const SLOW = 600_000;
const IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@example.com"];

/** README's first command exactly as written there: the first line of the first block under "Set up and start". */
function readmeFirstCommand(readme: string): string {
  const section = readme.split("## Set up and start")[1] ?? "";
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  return (block.split("\n")[0] ?? "").replace(/\s+#.*$/, "").trim();
}

describe("README's first command in a fresh clone, then svc update and svc uninstall", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-install-"));
  const clone = join(dir, "clone");
  const bin = join(dir, "bin");
  const shim = join(bin, "svc");
  const elsewhere = join(dir, "elsewhere");
  // A fresh HOME, SVC_HOME, config file and shim directory, nothing of the developer's svc session; the
  // machine's npm cache, so npm ci need not download.
  const env = {
    ...WITHOUT_SESSION,
    HOME: join(dir, "home"),
    SVC_HOME: join(dir, "svc-home"),
    SVC_CONFIG_FILE: join(dir, "config", "config.json"),
    SVC_BIN_DIR: bin,
    PATH: `${bin}:${process.env.PATH}`,
    npm_config_cache: process.env.npm_config_cache ?? join(homedir(), ".npm"),
  };
  let port: number;
  let firstCommand: string;
  let origin: string;

  const sh = (command: string, options: { cwd?: string; input?: string; extra?: Record<string, string> } = {}) =>
    execa("bash", ["-c", command], {
      cwd: options.cwd ?? elsewhere,
      env: { ...env, ...options.extra },
      extendEnv: true,
      input: options.input,
      reject: false,
      timeout: SLOW,
    });
  const install = async (extra: Record<string, string> = {}) => {
    const started = performance.now();
    const res = await sh(firstCommand, { cwd: clone, extra });
    return { ...res, seconds: (performance.now() - started) / 1000 };
  };
  const healthy = () =>
    fetch(`${origin}/v1/health`).then(
      (r) => r.ok,
      () => false,
    );
  const apiPid = () => readFileSync(join(env.SVC_HOME, "run", "api.pid"), "utf8").trim();
  const storedToken = () => JSON.parse(readFileSync(env.SVC_CONFIG_FILE, "utf8")).hosts.selfhost.token as string;
  const git = (...args: string[]) => execFileSync("git", ["-C", clone, ...args], { encoding: "utf8" }).trim();

  beforeAll(async () => {
    mkdirSync(elsewhere, { recursive: true });
    execFileSync("git", ["clone", "--quiet", REPO_ROOT, clone]);
    firstCommand = readmeFirstCommand(readFileSync(join(clone, "README.md"), "utf8"));
    port = await freePort();
    origin = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    if (existsSync(join(clone, "bin", "svc.js"))) {
      await execa(process.execPath, [join(clone, "bin", "svc.js"), "self-host", "stop"], { env, reject: false });
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    "installs, puts svc on the PATH and leaves the stack running",
    async () => {
      expect(firstCommand).toMatch(/scripts\/install\.sh$/);
      const res = await install({ SVC_INSTALL_PORT: String(port) });
      console.info(`install: README's first command to a running stack, fresh clone: ${res.seconds.toFixed(1)} s`);
      expect(res.exitCode, res.stderr).toBe(0);
      expect(res.stderr).toContain(`✓ the stack runs at ${origin}`);
      expect(await healthy()).toBe(true);

      expect(readFileSync(shim, "utf8")).toContain(`${clone}/bin/svc.js`);
      const version = await sh("svc version");
      expect(version.exitCode, version.stderr).toBe(0);
      expect(version.stdout).toBe(JSON.parse(readFileSync(join(clone, "package.json"), "utf8")).version);
      const hosts = await sh("svc hosts current");
      expect(hosts.stdout).toBe("selfhost");
      expect(JSON.parse(readFileSync(join(env.SVC_HOME, "install.json"), "utf8"))).toMatchObject({
        checkout: clone,
        script: join(clone, "scripts", "install.sh"),
        shim,
      });
    },
    SLOW,
  );

  it(
    "svc update fast-forwards the checkout, re-runs the install script and restarts the stack",
    async () => {
      // The upstream moves on by one commit: a local branch the installed branch tracks.
      const from = git("rev-parse", "HEAD");
      const ahead = git(...IDENTITY, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "upstream moved");
      git("branch", "ahead", ahead);
      git("branch", "--set-upstream-to=ahead");
      const pidBefore = apiPid();

      const res = await sh("svc update --json");
      expect(res.exitCode, res.stderr).toBe(0);
      expect(JSON.parse(res.stdout)).toMatchObject({
        checkout: clone,
        upstream: "ahead",
        from,
        to: ahead,
        restarted: true,
      });
      expect(res.stderr).toContain("dependencies up to date");
      expect(git("rev-parse", "HEAD")).toBe(ahead);
      expect(apiPid()).not.toBe(pidBefore);
      expect(await healthy()).toBe(true);

      // Diverged from its upstream: nothing is re-installed and the stack keeps running.
      git(...IDENTITY, "commit", "--quiet", "--allow-empty", "-m", "local work");
      git("branch", "diverged", git(...IDENTITY, "commit-tree", "HEAD^{tree}", "-p", ahead, "-m", "other work"));
      git("branch", "--set-upstream-to=diverged");
      const pidNow = apiPid();
      const refused = await sh("svc update");
      expect(refused.exitCode).toBe(1);
      expect(refused.stderr).toContain(`error: git pull --ff-only failed in ${clone}; nothing was re-installed`);
      expect(apiPid()).toBe(pidNow);

      git("branch", "--unset-upstream");
      const bare = await sh("svc update");
      expect(bare.exitCode, bare.stderr).toBe(0);
      expect(bare.stderr).toContain(`${clone} has no upstream branch to pull from; re-installing it as it is`);
      expect(bare.stderr).toMatch(/✓ svc [\d.]+ updated from .* \(already at the newest commit\); the stack restarted/);
      expect(await healthy()).toBe(true);
    },
    SLOW,
  );

  it("svc uninstall asks first: a pipe without --yes is a usage error, 'n' on a terminal keeps everything", async () => {
    const piped = await sh("svc uninstall");
    expect(piped.exitCode).toBe(2);
    expect(piped.stderr).toBe("error: --yes is required when not interactive");

    const tty = await sh(`script -qfec "svc uninstall" /dev/null`, { input: "n\n" });
    expect(tty.exitCode).toBe(1);
    expect(tty.stdout).toContain(`${shim}\r\n`);
    expect(tty.stdout).toContain("Continue? [y/N]");
    expect(tty.stdout).toContain("error: cancelled; nothing was removed");
    expect(existsSync(shim)).toBe(true);
    expect(await healthy()).toBe(true);
  });

  it(
    "--keep-home and --keep-auth keep the data and the token; the first command brings svc back fast",
    async () => {
      const token = storedToken();
      const res = await sh("svc uninstall --yes --keep-home --keep-auth --json");
      expect(res.exitCode, res.stderr).toBe(0);
      expect(JSON.parse(res.stdout)).toEqual({
        shims_removed: [shim],
        home: { path: env.SVC_HOME, removed: false },
        config: { path: env.SVC_CONFIG_FILE, removed: false },
        stack_stopped: true,
        // The stack's installation, which made no sandbox, network or image.
        docker: {
          installations: [expect.any(String)],
          containers: [],
          networks: [],
          volumes: [],
          images: [],
          images_kept: [],
        },
        checkout: clone,
      });
      expect(existsSync(shim)).toBe(false);
      expect(await healthy()).toBe(false);
      expect(existsSync(join(env.SVC_HOME, "selfhost.json"))).toBe(true);
      expect(existsSync(join(env.SVC_HOME, "install.json"))).toBe(false);
      expect(storedToken()).toBe(token);

      const again = await install();
      console.info(
        `install: README's first command to a running stack, everything there: ${again.seconds.toFixed(1)} s`,
      );
      expect(again.exitCode, again.stderr).toBe(0);
      expect(again.stderr).toContain("dependencies up to date");
      expect(await healthy()).toBe(true);
      expect(storedToken()).toBe(token);
      expect((await sh("svc version")).exitCode).toBe(0);
    },
    SLOW,
  );

  it("svc uninstall --yes removes the shim, the home and the stored token, and stops the stack", async () => {
    const res = await sh("svc uninstall --yes");
    expect(res.exitCode, res.stderr).toBe(0);
    expect(res.stdout).toBe("");
    expect(res.stderr).toContain(
      `✓ svc uninstalled: removed ${shim}, ${env.SVC_HOME} (the stack's data), ${env.SVC_CONFIG_FILE} (stored tokens)`,
    );
    expect(res.stderr).toContain(`the checkout ${clone} stays`);
    expect(existsSync(shim)).toBe(false);
    expect(existsSync(env.SVC_HOME)).toBe(false);
    expect(existsSync(env.SVC_CONFIG_FILE)).toBe(false);
    expect(await healthy()).toBe(false);
  });
});
