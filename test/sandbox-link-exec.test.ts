import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SandboxExec } from "../orchestrator/sandbox/driver.ts";
import { svc } from "./support/cli.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";

/**
 * `svc sessions exec` in SVC_SANDBOX_LINK=dial-out mode: the command runs through the sandbox's daemon, over the
 * link it dialed, as on a Swarm node the engine's exec cannot reach. The engine's exec is taken away to show it.
 */
describe("exec over the sandbox's link (real API, Docker, sandbox image, CLI)", () => {
  let sandboxed: SandboxedProject;
  let id: string;

  beforeAll(async () => {
    sandboxed = await startSandboxedProject("LinkExec", { sandboxLink: "dial-out" });
    const access = sandboxed.api.services.orchestrator!.access;
    access.exec = async () => {
      throw new Error("the engine's exec was used in dial-out mode");
    };
    const created = await svc(["sessions", "new"], { env: sandboxed.cliEnv });
    expect(created.code, created.stderr).toBe(0);
    id = created.stdout.trim();
  }, 300_000);
  afterAll(async () => {
    await sandboxed?.close();
  });

  it("svc sessions exec prints what the command printed and exits with its code", async () => {
    const run = await svc(["sessions", "exec", id, "--", "sh", "-c", "echo $HOME; pwd; exit 3"], {
      env: sandboxed.cliEnv,
    });
    expect({ code: run.code, stdout: run.stdout }, run.stderr).toEqual({ code: 3, stdout: "/root\n/workspace" });
  });

  it("gives a terminal its size in the sandbox, and a new one after a resize", async () => {
    const { api, project } = sandboxed;
    const running: SandboxExec = await api.services.sessions!.exec(
      (await api.services.projects.byId(project.id))!,
      id,
      {
        cmd: ["sh", "-c", "trap 'stty size; exit 0' WINCH; stty size; echo ready; while :; do sleep 0.05; done"],
        tty: true,
        stdin: true,
        cols: 120,
        rows: 40,
      },
    );
    let out = "";
    const ended = (async () => {
      for await (const { data } of running.output) out += data.toString();
      return running.exitCode();
    })();
    for (let i = 0; i < 200 && !out.includes("ready"); i++) await new Promise((r) => setTimeout(r, 50));
    await running.resize(70, 21);
    expect(await ended).toBe(0);
    // stty sets the columns, then the rows: a trap quick enough sees the size between the two as well.
    expect(["40 120\r\nready\r\n21 70\r\n", "40 120\r\nready\r\n40 70\r\n21 70\r\n"]).toContain(out);
  });
});
