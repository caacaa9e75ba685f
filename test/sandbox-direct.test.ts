import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { svc } from "./support/cli.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { waitFor } from "./support/wait.ts";

/**
 * SVC_SANDBOX_LINK=direct, the setting that is not the default: the daemon dials nothing and listens on the
 * sandbox's address on its bridge, where the API reaches it; still no port published on the host, and commands run
 * through the engine's exec.
 */
describe("sandboxes reached directly (SVC_SANDBOX_LINK=direct)", () => {
  let sp: SandboxedProject;

  beforeAll(async () => {
    sp = await startSandboxedProject("Direct", { sandboxLink: "direct" });
  }, 300_000);
  afterAll(async () => {
    await sp?.close();
  });

  it("runs a session at the container's own address: no link, no published port, exec through the engine", async () => {
    const created = (await sp.sessions("", "POST", {})).body;
    const session = await waitFor(
      "the session running",
      async () => {
        const s = (await sp.sessions(`/${created.session_id}`)).body;
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        return s.status === "running" ? s : undefined;
      },
      { timeoutMs: 120_000 },
    );
    const [container] = await sp.docker.listContainers({
      filters: { label: [`dev.svc.session=${session.session_id}`] },
    });
    const inspect = await sp.docker.getContainer(container!.Id).inspect();
    const address = Object.values(inspect.NetworkSettings.Networks)[0]!.IPAddress;
    expect(session.sandbox_url).toBe(`http://${address}:8000`);
    expect(inspect.HostConfig.PortBindings ?? {}).toEqual({});
    expect(inspect.Config.Env.some((e) => e.startsWith("SVC_LINK_URL="))).toBe(false);
    expect(sp.api.services.sandboxLinks.known()).toEqual([]);
    expect(await (await fetch(`${session.sandbox_url}/svc/health`)).json()).toMatchObject({ status: "ok" });

    const said = await svc(
      ["sessions", "exec", session.session_id, "--", "sh", "-c", "echo out; echo err >&2; exit 3"],
      {
        env: sp.cliEnv,
      },
    );
    expect([said.code, said.stdout, said.stderr.split("\n").at(-1)]).toEqual([3, "out", "err"]);
    // The engine's own answer for a command it cannot start, as `docker exec` gives it.
    const missing = await svc(["sessions", "exec", session.session_id, "--", "no-such-command"], { env: sp.cliEnv });
    expect(missing.code).toBe(126);
    // The log is the engine's too: a record written to the kept log alone does not show.
    const record = JSON.stringify({ stream: "stdout", line: "only in the kept log" });
    await svc(
      ["sessions", "exec", session.session_id, "--", "sh", "-c", `echo '${record}' >> /var/log/svc/log.jsonl`],
      {
        env: sp.cliEnv,
      },
    );
    const logs = await svc(["sessions", "logs", session.session_id], { env: sp.cliEnv });
    expect(logs.stdout).toMatch(/^svc-agent: listening on /m);
    expect(logs.stdout).not.toContain("only in the kept log");
  });
});
