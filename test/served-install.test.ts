import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { TOKEN_PREFIX } from "../protocol/token.ts";
import { freePort, WITHOUT_SESSION } from "./support/cli.ts";

const REPO_ROOT = new URL("..", import.meta.url).pathname;
const BUNDLE = join(REPO_ROOT, "dist", "sandbox", "svc.mjs");
const VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version as string;
const NEXT = `${VERSION}-next`;
const sha256 = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

/**
 * A front for the API, as a user's reverse proxy or CDN would be: SVC_PUBLIC_URL names it. It passes everything
 * through, or, once told to, damages the CLI's bytes in transit while keeping the API's checksum header.
 */
function startFront(port: number, apiPort: number): Promise<{ server: Server; damage: (on: boolean) => void }> {
  let damaging = false;
  const server = createServer((req, res) => {
    const upstream = request(
      { host: "127.0.0.1", port: apiPort, path: req.url, method: req.method, headers: req.headers },
      (up) => {
        const headers = { ...up.headers };
        const damage = damaging && req.url === "/v1/cli/svc.mjs" && up.statusCode === 200;
        if (damage) delete headers["content-length"];
        res.writeHead(up.statusCode ?? 502, headers);
        up.pipe(res, { end: !damage });
        if (damage) up.on("end", () => res.end("\n// altered on the way\n"));
      },
    );
    upstream.on("error", () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  return new Promise((resolve) =>
    server.listen(port, "127.0.0.1", () => resolve({ server, damage: (on) => (damaging = on) })),
  );
}

describe("the API serves its install script; svc update and uninstall on a served install", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-served-"));
  const bin = join(dir, "bin");
  const shim = join(bin, "svc");
  const prefix = join(dir, "prefix");
  const binary = join(prefix, "lib", "svc.mjs");
  const elsewhere = join(dir, "elsewhere");
  const adminToken = newSecret(TOKEN_PREFIX);
  // The user's machine: a fresh HOME, SVC_HOME, config, prefix and shim directory; none of the developer's svc.
  const env = {
    ...WITHOUT_SESSION,
    HOME: join(dir, "home"),
    SVC_HOME: join(dir, "home", ".svc"),
    SVC_CONFIG_FILE: join(dir, "config", "config.json"),
    SVC_BIN_DIR: bin,
    SVC_PREFIX: prefix,
    PATH: `${bin}:${process.env.PATH}`,
  };
  let apiPort: number;
  let origin: string;
  let hostName: string;
  let api: ChildProcess | undefined;
  let front: Awaited<ReturnType<typeof startFront>>;

  const sh = (command: string) =>
    execa("bash", ["-c", command], { cwd: elsewhere, env, extendEnv: true, reject: false, timeout: 60_000 });
  const curlBash = () => sh(`curl -fsSL ${origin}/install.sh | bash`);
  const record = () => JSON.parse(readFileSync(join(env.SVC_HOME, "install.json"), "utf8"));
  const storedToken = () => JSON.parse(readFileSync(env.SVC_CONFIG_FILE, "utf8")).hosts[hostName]?.token;

  /** The real API process, from dist/ or from source, without sessions; the CLI bundle it serves as given. */
  async function startApi(options: { from: "dist" | "source"; cliBundle?: string }) {
    await stopApi();
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("SVC_") && k !== "DATABASE_URL"),
    );
    const entry = options.from === "dist" ? ["dist/api.mjs"] : ["--import", "tsx", "api/main.ts"];
    const child = spawn(process.execPath, entry, {
      cwd: REPO_ROOT,
      stdio: ["ignore", "ignore", "inherit"],
      env: {
        ...inherited,
        SVC_HOME: join(dir, "api-home"),
        SVC_PORT: String(apiPort),
        SVC_PUBLIC_URL: origin,
        SVC_ORCHESTRATOR: "off",
        SVC_LOG_LEVEL: "error",
        SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(adminToken),
        ...(options.cliBundle ? { SVC_CLI_BUNDLE: options.cliBundle } : {}),
      },
    });
    api = child;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`the API exited with ${child.exitCode}`);
      const up = await fetch(`http://127.0.0.1:${apiPort}/v1/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("the API did not become healthy");
  }
  async function stopApi() {
    const child = api;
    api = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }

  beforeAll(async () => {
    mkdirSync(elsewhere, { recursive: true });
    apiPort = await freePort();
    const frontPort = await freePort();
    origin = `http://127.0.0.1:${frontPort}`;
    hostName = `127.0.0.1-${frontPort}`;
    front = await startFront(frontPort, apiPort);
  });
  afterAll(async () => {
    await stopApi();
    front?.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves the script with its public URL (never the Host header) and the CLI with checksum, version and ETag", async () => {
    await startApi({ from: "source" });
    const res = await fetch(`${origin}/install.sh`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/x-shellscript; charset=utf-8");
    const script = await res.text();
    expect(script.startsWith("#!/usr/bin/env bash\n")).toBe(true);
    expect(script).toContain(`\norigin='${origin}'\n`);

    // Asked directly under a forged Host, the script still names the configured public URL.
    const forged = await new Promise<string>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: apiPort, path: "/install.sh", headers: { host: "evil.example" } });
      req.on("response", (r) => {
        let body = "";
        r.on("data", (d) => (body += d)).on("end", () => resolve(body));
      });
      req.on("error", reject).end();
    });
    expect(forged).toContain(`\norigin='${origin}'\n`);
    expect(forged).not.toContain("evil.example");

    const cli = await fetch(`${origin}/v1/cli/svc.mjs`);
    const bytes = Buffer.from(await cli.arrayBuffer());
    expect(cli.status).toBe(200);
    expect(bytes.equals(readFileSync(BUNDLE))).toBe(true);
    expect(cli.headers.get("x-svc-cli-sha256")).toBe(sha256(bytes));
    expect(cli.headers.get("x-svc-cli-version")).toBe(VERSION);
    expect(cli.headers.get("etag")).toBe(`"${sha256(bytes)}"`);
    const again = await fetch(`${origin}/v1/cli/svc.mjs`, { headers: { "if-none-match": `"${sha256(bytes)}"` } });
    expect(again.status).toBe(304);
  });

  it("curl | bash installs the CLI into the prefix with a shim; it runs from anywhere and names the login command", async () => {
    const res = await curlBash();
    expect(res.exitCode, res.stderr).toBe(0);
    expect(res.stderr).toContain(`✓ svc ${VERSION} installed: ${shim} runs ${binary} with`);
    expect(res.stderr).toContain(`Next, log in to ${origin}: svc login --host ${hostName}`);
    expect(readFileSync(binary).equals(readFileSync(BUNDLE))).toBe(true);
    expect(readdirSync(join(prefix, "lib"))).toEqual(["svc.mjs"]);
    expect(record()).toMatchObject({
      kind: "served",
      origin,
      prefix,
      binary,
      shim,
      version: VERSION,
      sha256: sha256(readFileSync(BUNDLE)),
    });

    const version = await sh("svc version");
    expect(version.exitCode, version.stderr).toBe(0);
    expect(version.stdout).toBe(VERSION);
    const login = await sh(`svc login --host ${hostName} --token ${adminToken}`);
    expect(login.exitCode, login.stderr).toBe(0);
    expect((await sh("svc hosts current")).stdout).toBe(hostName);
    expect((await sh("svc projects ls")).exitCode).toBe(0);
  });

  it("svc update fetches the CLI the host now serves and replaces the installed one", async () => {
    const next = join(dir, "next.mjs");
    const text = readFileSync(BUNDLE, "utf8");
    const bumped = text
      .replace(`// svc ${VERSION}\n`, `// svc ${NEXT}\n`)
      .replace(`version: "${VERSION}"`, `version: "${NEXT}"`);
    expect(bumped.split(NEXT)).toHaveLength(3);
    writeFileSync(next, bumped);
    await startApi({ from: "dist", cliBundle: next });

    const res = await sh("svc update --json");
    expect(res.exitCode, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({ kind: "served", origin, from: VERSION, to: NEXT, changed: true, binary });
    expect((await sh("svc version")).stdout).toBe(NEXT);
    expect(readdirSync(join(prefix, "lib"))).toEqual(["svc.mjs"]);
    expect(record()).toMatchObject({ version: NEXT, sha256: sha256(bumped) });
    expect(storedToken()).toBe(adminToken);

    const same = await sh("svc update");
    expect(same.exitCode, same.stderr).toBe(0);
    expect(same.stderr).toContain(`✓ svc updated from ${origin} (${NEXT}, already the newest)`);
  });

  it("a CLI that does not run, or arrives altered, is not installed: the old one keeps working and update exits 1", async () => {
    const installed = readFileSync(binary);
    const kept = `svc ${NEXT} stays installed at ${binary}`;
    const broken = join(dir, "broken.mjs");
    writeFileSync(broken, `// svc 9.9.9\nthrow new TypeError("this build is broken");\n`);
    await startApi({ from: "dist", cliBundle: broken });

    const notRunning = await sh("svc update");
    expect(notRunning.exitCode).toBe(1);
    expect(notRunning.stderr).toMatch(
      /the downloaded CLI does not run with node v[\d.]+ \(TypeError: this build is broken\)/,
    );
    expect(notRunning.stderr).toContain(`error: the install script from ${origin} failed (exit 1); ${kept}`);
    expect(readFileSync(binary).equals(installed)).toBe(true);
    expect((await sh("svc version")).stdout).toBe(NEXT);

    front.damage(true);
    try {
      const altered = await sh("svc update");
      expect(altered.exitCode).toBe(1);
      expect(altered.stderr).toMatch(
        /checksum mismatch: the download's sha256 is [0-9a-f]{64}, the host announced [0-9a-f]{64}/,
      );
      expect(altered.stderr).toContain(kept);
    } finally {
      front.damage(false);
    }
    expect(readFileSync(binary).equals(installed)).toBe(true);
    expect(readdirSync(join(prefix, "lib"))).toEqual(["svc.mjs"]);
    expect((await sh("svc version")).stdout).toBe(NEXT);
    expect(record()).toMatchObject({ version: NEXT });
  });

  it("a server without a built CLI answers 503, and serves the bundle once it exists; update exits 1 meanwhile", async () => {
    const later = join(dir, "later.mjs");
    await startApi({ from: "dist", cliBundle: later });
    const missing = await fetch(`${origin}/v1/cli/svc.mjs`);
    expect(missing.status).toBe(503);
    expect((await missing.json()).error).toBe(
      "this server has no CLI bundle to serve: run 'npm run build' where the API runs",
    );
    const res = await sh("svc update");
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toContain("returned error: 503");
    expect(res.stderr).toContain(`install: error: cannot download ${origin}/v1/cli/svc.mjs (curl exit 22, above);`);
    expect((await sh("svc version")).stdout).toBe(NEXT);

    writeFileSync(later, readFileSync(BUNDLE));
    expect((await fetch(`${origin}/v1/cli/svc.mjs`)).status).toBe(200);

    // The API down behind its front: update says so before running anything.
    await stopApi();
    const down = await sh("svc update");
    expect(down.exitCode).toBe(1);
    expect(down.stderr).toContain(
      `error: ${origin}/install.sh answered HTTP 502; svc ${NEXT} stays installed at ${binary}`,
    );
  });

  it("svc uninstall --keep-home removes the CLI file, its shim and the token, and keeps the home", async () => {
    await startApi({ from: "dist" });
    const res = await sh("svc uninstall --yes --keep-home --json");
    expect(res.exitCode, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({
      shims_removed: [shim],
      home: { path: env.SVC_HOME, removed: false },
      config: { path: env.SVC_CONFIG_FILE, removed: true },
      stack_stopped: false,
      // No self-hosted stack on this machine: nothing of one on the engine.
      docker: { installations: [], containers: [], networks: [], volumes: [], images: [], images_kept: [] },
      binary,
    });
    expect(existsSync(shim)).toBe(false);
    expect(existsSync(prefix)).toBe(false);
    expect(existsSync(env.SVC_HOME)).toBe(true);
    expect(existsSync(join(env.SVC_HOME, "install.json"))).toBe(false);
    expect(existsSync(env.SVC_CONFIG_FILE)).toBe(false);
  });

  it("--keep-auth keeps the stored token for the next install; without flags everything goes", async () => {
    const first = await curlBash();
    expect(first.exitCode, first.stderr).toBe(0);
    expect(readFileSync(binary).equals(readFileSync(BUNDLE))).toBe(true);
    expect((await sh(`svc login --host ${hostName} --token ${adminToken}`)).exitCode).toBe(0);

    const keepAuth = await sh("svc uninstall --yes --keep-auth");
    expect(keepAuth.exitCode, keepAuth.stderr).toBe(0);
    expect(keepAuth.stderr.split("\n")).toContain(
      `✓ svc uninstalled: removed ${shim}, ${binary}, ${env.SVC_HOME} (the stack's data)`,
    );
    expect(existsSync(shim) || existsSync(prefix) || existsSync(env.SVC_HOME)).toBe(false);
    expect(storedToken()).toBe(adminToken);

    const back = await curlBash();
    expect(back.exitCode, back.stderr).toBe(0);
    expect(back.stderr).toContain(`✓ host '${hostName}' (${origin}) is registered and logged in`);
    expect((await sh("svc projects ls")).exitCode).toBe(0);

    const all = await sh("svc uninstall --yes");
    expect(all.exitCode, all.stderr).toBe(0);
    expect(all.stdout).toBe("");
    expect(all.stderr).toContain(
      `✓ svc uninstalled: removed ${shim}, ${binary}, ${env.SVC_HOME} (the stack's data), ${env.SVC_CONFIG_FILE} (stored tokens)`,
    );
    expect(all.stderr).not.toContain("checkout");
    for (const path of [shim, prefix, env.SVC_HOME, env.SVC_CONFIG_FILE]) expect(existsSync(path), path).toBe(false);
    expect((await sh("command -v svc")).stdout).not.toBe(shim);
  });
});
