import { type AddressInfo, createServer } from "node:net";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliEnv, cliHome, freePort, svc } from "./support/cli.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";

/** `svc self-host doctor` on a running stack: one line per check, and one real call to the model gateway. */
describe("svc self-host doctor (the real CLI binary, a scripted model gateway)", () => {
  const home = cliHome();
  let port: number;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  const run = (args: string[], env: CliEnv = {}) => svc(args, { env: { ...home.env, ...env } });

  beforeAll(async () => {
    port = await freePort();
    llm = await startScriptedLlm([], "0.0.0.0", { apiKey: "sk-right-key-123456", models: ["good-model"] });
    const start = await run(["self-host", "start", "--port", String(port)]);
    expect(start.code, start.stderr).toBe(0);
  });
  afterAll(async () => {
    llm?.close();
    await svc(["self-host", "stop"], { env: home.env });
  });

  it("doctor: stack, Docker and base image pass; no model fails with the line that configures one", async () => {
    await run(["self-host", "env", "set", "SVC_LLM_API_KEY=", "SVC_AGENT_MODEL="]);
    const doctor = await run(["self-host", "doctor"]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toBe(
      [
        `✓ the stack answers at http://127.0.0.1:${port}`,
        "✓ the Docker engine answers",
        "✓ the base image svc-debian:bookworm exists",
        "✓ sandboxes reach only the API's and the model gateway's ports of this machine",
        "✗ no model is configured: svc self-host env set SVC_LLM_BASE_URL=… SVC_LLM_API_KEY=… SVC_AGENT_MODEL=…; " +
          "or per project: svc secrets set SVC_LLM_BASE_URL=… SVC_LLM_API_KEY=… SVC_AGENT_MODEL=… " +
          "(or OPENAI_API_KEY=… / ANTHROPIC_API_KEY=…)",
      ].join("\n"),
    );
    expect(doctor.stderr).toBe("error: 1 of 5 checks failed");
    const json = await run(["self-host", "doctor", "--json"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: false,
      checks: [
        { check: "stack", ok: true, detail: `the stack answers at http://127.0.0.1:${port}` },
        { check: "docker", ok: true, detail: "the Docker engine answers" },
        { check: "base-image", ok: true, detail: "the base image svc-debian:bookworm exists" },
        {
          check: "host-firewall",
          ok: true,
          detail: "sandboxes reach only the API's and the model gateway's ports of this machine",
        },
        { check: "model", ok: false, detail: expect.stringContaining("no model is configured: svc self-host env set") },
      ],
    });
  });

  it("doctor sends one chat-completions request: a good model passes; a bad key, model or URL says which", async () => {
    const good = [`SVC_LLM_BASE_URL=${llm.url}`, "SVC_LLM_API_KEY=sk-right-key-123456", "SVC_AGENT_MODEL=good-model"];
    expect((await run(["self-host", "env", "set", ...good])).code).toBe(0);
    const ok = await run(["self-host", "doctor"]);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    const gatewayPort = new URL(llm.url).port;
    expect(ok.stdout.split("\n").slice(4)).toEqual([
      `✓ model 'good-model' at ${llm.url}`,
      `✓ the model gateway at ${llm.url} answers with model 'good-model'`,
      `✓ sandboxes reach the model gateway as http://host.docker.internal:${gatewayPort}`,
    ]);
    expect(JSON.parse((await run(["self-host", "doctor", "--json"])).stdout).ok).toBe(true);
    const status = JSON.parse((await run(["self-host", "status", "--json"])).stdout);
    expect(status).toMatchObject({ model_configured: true, model: `good-model at ${llm.url}` });

    const closed = await freePort();
    const cases: [string, string][] = [
      [
        "SVC_LLM_API_KEY=sk-wrong-key-654321",
        "✗ the model gateway refused the API key (HTTP 401: Incorrect API key provided)",
      ],
      [
        "SVC_AGENT_MODEL=no-such-model",
        "✗ the model gateway does not know the model 'no-such-model' (HTTP 404: The model `no-such-model` does not exist)",
      ],
      [
        `SVC_LLM_BASE_URL=http://127.0.0.1:${closed}/v1`,
        `✗ the model gateway at http://127.0.0.1:${closed}/v1 cannot be reached (ECONNREFUSED)`,
      ],
    ];
    for (const [pair, line] of cases) {
      await run(["self-host", "env", "set", ...good, pair]);
      const res = await run(["self-host", "doctor"]);
      expect(res.code, pair).toBe(1);
      expect(res.stdout.split("\n").at(-1), pair).toBe(line);
      expect(res.stderr).toBe("error: 1 of 6 checks failed");
      expect(res.stdout).not.toContain("sk-wrong-key-654321");
    }

    // A gateway that takes the connection and never answers: the doctor gives up after 10 s.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1`;
    try {
      await run(["self-host", "env", "set", ...good, `SVC_LLM_BASE_URL=${silentUrl}`]);
      const started = Date.now();
      const res = await run(["self-host", "doctor"]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(10_000);
      expect(res.code).toBe(1);
      expect(res.stdout.split("\n").at(-1)).toBe(`✗ the model gateway at ${silentUrl} did not answer within 10 s`);
    } finally {
      silent.close();
    }

    // Answering here is not enough: sandboxes call a loopback gateway on this machine's Docker bridge address.
    const loopbackOnly = await startScriptedLlm([], "127.0.0.1");
    try {
      await run(["self-host", "env", "set", ...good, `SVC_LLM_BASE_URL=${loopbackOnly.url}`]);
      const res = await run(["self-host", "doctor"]);
      expect(res.code).toBe(1);
      // The bridge interface's own address (the engine does not always report it as the network's gateway).
      const bridge = /inet (\S+)\//.exec((await execa("ip", ["-4", "-o", "addr", "show", "docker0"])).stdout)?.[1];
      const lpPort = new URL(loopbackOnly.url).port;
      expect(res.stdout.split("\n").at(-1)).toBe(
        `✗ the model gateway listens on loopback only: sandboxes call it as host.docker.internal:${lpPort}, this machine's Docker bridge address (${bridge}); make it listen on 0.0.0.0`,
      );
      expect(res.stderr).toBe("error: 1 of 7 checks failed");
    } finally {
      loopbackOnly.close();
    }
    await run(["self-host", "env", "set", ...good]);
  });
});
