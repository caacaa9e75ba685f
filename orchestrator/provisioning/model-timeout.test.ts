import { describe, expect, it } from "vitest";
import { loadConfig } from "../../api/config.ts";
import { loadDaemonConfig } from "../../daemon/config.ts";
import type { Project } from "../../protocol/project.ts";
import { StackEnv, stackSetting } from "../../protocol/stack-settings.ts";
import type { SessionToProvision } from "../ports.ts";
import { sandboxEnv } from "./sandbox-env.ts";

const project = { id: "p1", default_branch: "main" } as Project;
const session = {
  session_id: "s1",
  branch: "s1",
  base_ref: "main",
  agent_name: "build",
  agent_model: null,
  initial_prompt: null,
} as unknown as SessionToProvision;

const envOf = (llm: { baseUrl?: string; timeoutS?: number }) =>
  sandboxEnv({
    project,
    session,
    repoUrl: "http://api/git/p1.git",
    apiOrigin: "http://api:7700",
    serviceKey: "svc_sk_key",
    cliToken: "svc_pat_token",
    secrets: {},
    secretsRevision: 0,
    llm,
  });

describe("SVC_MODEL_TIMEOUT_S, from the stack's settings to the sandbox's daemon", () => {
  it("is an integer setting of at least 5 seconds, 120 by default", () => {
    expect(stackSetting("SVC_MODEL_TIMEOUT_S")).toMatchObject({ kind: "integer", secret: false });
    expect(StackEnv.parse({}).SVC_MODEL_TIMEOUT_S).toBe(120);
    expect(StackEnv.parse({ SVC_MODEL_TIMEOUT_S: "30" }).SVC_MODEL_TIMEOUT_S).toBe(30);
    for (const bad of ["4", "0", "1.5", "soon"])
      expect(StackEnv.safeParse({ SVC_MODEL_TIMEOUT_S: bad }).success, bad).toBe(false);
  });

  it("is read by the API and passed to every sandbox with a gateway, where the daemon reads it", () => {
    const config = loadConfig({ SVC_MODEL_TIMEOUT_S: "45", SVC_LLM_BASE_URL: "http://gw:9000/v1" });
    expect(config.orchestrator.llm.timeoutS).toBe(45);
    const env = envOf(config.orchestrator.llm);
    expect(env.SVC_MODEL_TIMEOUT_S).toBe("45");
    expect(loadDaemonConfig({ ...env, SVC_TOKEN: "k".repeat(32) }).llm.timeoutS).toBe(45);
    expect(envOf({ timeoutS: 45 })).not.toHaveProperty("SVC_MODEL_TIMEOUT_S");
  });
});
