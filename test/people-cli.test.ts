import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret, newSecret } from "../protocol/credential.ts";
import { TOKEN_PREFIX } from "../protocol/token.ts";
import { type ApiProcess, startApiProcess } from "./support/api-process.ts";
import { cliHome, freePort, recordingBrowser, svc } from "./support/cli.ts";
import { svcPty } from "./support/pty.ts";

const MEMBER = "member@example.test";
const PASSWORD = "member's long password";
const WRONG = "a wrong password guess";

/**
 * Issue 32 from the command line: `svc members ls|invite|rm|role` and `svc login` for an invited member (browser
 * flow, `--email` at a terminal and with --password-stdin), against the real API process, whose whole log (at
 * trace level) is read at the end for any password or token.
 */
describe("svc members and svc login for a member (real binary, the API as a process)", () => {
  const home = cliHome();
  const dir = mkdtempSync(join(tmpdir(), "svc-people-"));
  const adminToken = newSecret(TOKEN_PREFIX);
  let port: number;
  let url: string;
  let api: ApiProcess | undefined;
  const invites: string[] = [];
  const run = (args: string[], options: { env?: Record<string, string | undefined>; input?: string } = {}) =>
    svc(args, { env: { ...home.env, ...options.env }, input: options.input });

  /** A dashboard form posted as a browser on this origin posts it. */
  async function form(path: string, fields: Record<string, string>, cookie?: string) {
    const res = await fetch(url + path, {
      method: "POST",
      redirect: "manual",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: url,
        ...(cookie ? { cookie: `svc_dashboard=${cookie}` } : {}),
      },
      body: new URLSearchParams(fields).toString(),
    });
    await res.text();
    const set = /svc_dashboard=([^;]*)/.exec(res.headers.get("set-cookie") ?? "")?.[1];
    return { status: res.status, location: res.headers.get("location"), cookie: set };
  }

  beforeAll(async () => {
    port = await freePort();
    url = `http://127.0.0.1:${port}`;
    api = await startApiProcess(
      {
        SVC_HOME: join(dir, "api-home"),
        SVC_PUBLIC_URL: url,
        // Everything the API would ever log, request lines included.
        SVC_LOG_LEVEL: "trace",
        SVC_BOOTSTRAP_TOKEN_HASH: hashSecret(adminToken),
      },
      { port },
    );
    const login = await run(["login", "--token", adminToken, "--api", url, "--host", "admin"]);
    expect(login.code, login.stderr).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await api?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a wrong flag or argument is a usage error (exit 2) before any request", async () => {
    // Nothing listens here: a request would fail with exit 1 ("cannot reach").
    const env = { SVC_API_URL: "http://127.0.0.1:1/v1", SVC_CLI_TOKEN: "svc_pat_unused" };
    for (const args of [
      ["members", "invite", "not-an-email"],
      ["members", "invite", "a@example.test", "--role", "boss"],
      ["members", "role", "a@example.test", "boss"],
      ["members", "role", "not-an-email", "admin"],
      ["members", "rm", "not-an-email", "--yes"],
      ["members", "rm", "a@example.test"],
      ["login", "--email", "not-an-email", "--api", url],
      ["login", "--email", MEMBER, "--token", adminToken, "--api", url],
      ["login", "--password-stdin", "--api", url],
    ]) {
      const result = await run(args, { env });
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(2);
      expect(result.stderr).not.toContain("cannot reach");
    }
    expect((await run(["members", "rm", "a@example.test"], { env })).stderr).toContain(
      "--yes is required when not interactive",
    );
    const reached = await run(["members", "ls"], { env });
    expect(reached.code).toBe(1);
    expect(reached.stderr).toContain("cannot reach");
  });

  it("svc members invite prints a one-time link; the invitee sets a password there and is listed", async () => {
    const listed = await run(["members", "ls", "--json"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      { email: "admin@selfhost.local", name: "admin", role: "owner", joined: expect.any(String) },
    ]);

    const invited = await run(["members", "invite", "Member@Example.test"]);
    expect(invited.code, invited.stderr).toBe(0);
    expect(invited.stdout).toMatch(new RegExp(`^${url}/dashboard/invites/svc_inv_[\\w-]+$`));
    expect(invited.stderr).toContain(`invited ${MEMBER} to admin as member`);
    expect(invited.stderr).toContain("7 days");
    const link = invited.stdout.trim();
    invites.push(link);
    const joined = await form(new URL(link).pathname, {
      name: "Mem Ber",
      password: PASSWORD,
      password_again: PASSWORD,
    });
    expect(joined.status).toBe(303);

    const table = await run(["members", "ls"]);
    expect(table.code).toBe(0);
    const rows = table.stdout.trim().split("\n");
    expect(rows).toHaveLength(2);
    expect(rows[1]!.split("\t").slice(0, 3)).toEqual([MEMBER, "Mem Ber", "member"]);

    const viewer = await run(["members", "invite", "viewer@example.test", "--role", "viewer", "--json"]);
    expect(viewer.code, viewer.stderr).toBe(0);
    const body = JSON.parse(viewer.stdout);
    expect(body).toMatchObject({ email: "viewer@example.test", role: "viewer", account: "admin" });
    invites.push(body.url);
    const again = await run(["members", "invite", MEMBER]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("ALREADY_MEMBER");
  });

  it("svc members role changes a role; the account's last owner stays one", async () => {
    const raised = await run(["members", "role", MEMBER, "admin", "--json"]);
    expect(raised.code, raised.stderr).toBe(0);
    expect(JSON.parse(raised.stdout)).toMatchObject({ email: MEMBER, role: "admin" });
    const back = await run(["members", "role", MEMBER, "member"]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stderr).toContain(`${MEMBER} is now member`);
    const last = await run(["members", "role", "admin@selfhost.local", "admin"]);
    expect(last.code).toBe(1);
    expect(last.stderr).toContain("LAST_OWNER");
  });

  it("svc login --email: the password typed at a terminal without echo, or piped with --password-stdin", async () => {
    const piped = await run(["login", "--email", MEMBER, "--password-stdin", "--api", url, "--host", "piped"], {
      input: `${PASSWORD}\n`,
    });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).toContain(`logged in to piped as ${MEMBER} (account admin)`);
    expect((await run(["whoami", "--host", "piped"])).stdout).toContain(MEMBER);

    const wrong = await run(["login", "--email", MEMBER, "--password-stdin", "--api", url, "--host", "wrong"], {
      input: WRONG,
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("wrong email or password");
    expect(wrong.stderr).not.toContain(WRONG);
    const noTerminal = await run(["login", "--email", MEMBER, "--api", url, "--host", "wrong"]);
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.stderr).toContain("--password-stdin is required when not interactive");

    const tty = svcPty(["login", "--email", MEMBER, "--api", url, "--host", "typed"], { env: home.env });
    await tty.expect(`Password for ${MEMBER}: `);
    tty.answer(PASSWORD);
    const done = await tty.exit();
    expect(done.code, done.screen).toBe(0);
    expect(done.screen).toContain(`logged in to typed as ${MEMBER}`);
    expect(done.screen).not.toContain(PASSWORD);
  });

  it("svc login's browser flow works for a member who signs the browser in with a password; their token is theirs", async () => {
    const opener = recordingBrowser(home.dir);
    const login = run(["login", "--api", url, "--host", "browser"], { env: { BROWSER: opener.path } });
    const authorize = new URL(await opener.opened());
    expect(authorize.pathname).toBe("/dashboard/cli/login");

    // The browser: signs in with the member's password, opens the page, clicks Authorize.
    const signedIn = await form("/dashboard/sign-in/password", {
      email: MEMBER,
      password: PASSWORD,
      next: authorize.pathname + authorize.search,
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe(authorize.pathname + authorize.search);
    const pageRes = await fetch(authorize, { headers: { cookie: `svc_dashboard=${signedIn.cookie}` } });
    const html = await pageRes.text();
    expect(html).toContain(MEMBER);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
    const authorized = await form(
      "/dashboard/cli/login",
      {
        _csrf: csrf,
        callback: authorize.searchParams.get("callback")!,
        state: authorize.searchParams.get("state")!,
      },
      signedIn.cookie,
    );
    expect(authorized.status).toBe(303);
    await (await fetch(authorized.location!)).text();
    const done = await login;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stderr).toContain(`logged in to browser as ${MEMBER}`);

    // A member's own token: reads the members, manages none of them.
    expect((await run(["whoami", "--host", "browser"])).stdout).toContain(MEMBER);
    const ls = await run(["members", "ls", "--host", "browser", "--json"]);
    expect(ls.code, ls.stderr).toBe(0);
    expect(JSON.parse(ls.stdout).map((m: { email: string }) => m.email)).toContain(MEMBER);
    const refused = await run(["members", "invite", "z@example.test", "--host", "browser"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("FORBIDDEN_ROLE");
  });

  it("svc members rm removes a member; an unknown one is an error (exit 1)", async () => {
    // The logins above made their hosts the active one: the admin's is named.
    const removed = await run(["members", "rm", MEMBER, "--yes", "--host", "admin"]);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stderr).toContain(`removed ${MEMBER}`);
    expect((await run(["members", "ls", "--json", "--host", "admin"])).stdout).not.toContain(MEMBER);
    const unknown = await run(["members", "rm", MEMBER, "--yes", "--host", "admin"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("MEMBER_NOT_FOUND");
  });

  it("the API's log has the requests, never a password, an invite's token or a login token", () => {
    const log = api!.log();
    expect(log).toContain('"url":"/v1/auth/password"');
    expect(log).toContain("/dashboard/invites/[redacted]");
    const config = JSON.parse(readFileSync(home.env.SVC_CONFIG_FILE!, "utf8"));
    const tokens = Object.values(config.hosts as Record<string, { token?: string }>).map((h) => h.token!);
    expect(tokens.filter(Boolean).length).toBeGreaterThanOrEqual(4);
    for (const secret of [
      PASSWORD,
      WRONG,
      adminToken,
      ...tokens.filter(Boolean),
      ...invites.map((u) => u.split("/").pop()!),
    ])
      expect(log, secret.slice(0, 12)).not.toContain(secret);
  });
});
