import { describe, expect, it } from "vitest";
import type { Project } from "../../protocol/project.ts";
import type { SessionToProvision } from "../ports.ts";
import { egressProxyUrl, type SandboxEnvInput, sandboxEnv } from "./sandbox-env.ts";

const project: Project = {
  id: "6f1c7f55-0a4e-4f57-8a43-2b7f0d3f7a10",
  account_id: "0b7e6a52-9b5d-4a0b-8d2c-3f6c0f1d2e3a",
  slug: "demo",
  name: "Demo",
  repo_kind: "managed",
  repo_url: null,
  default_branch: "main",
  created_at: "2026-11-23T00:00:00.000Z",
  updated_at: "2026-11-23T00:00:00.000Z",
};

const session: SessionToProvision = {
  session_id: "9d0f4a1e-2b3c-4d5e-8f60-718293a4b5c6",
  project_id: project.id,
  status: "provisioning",
  branch: "9d0f4a1e-2b3c-4d5e-8f60-718293a4b5c6",
  base_ref: "develop",
  agent_name: "build",
  agent_model: null,
  sandbox_url: null,
  error: null,
  created_by: "1a2b3c4d-5e6f-4a8b-9c0d-1e2f3a4b5c6d",
  trigger: null,
  created_at: "2026-11-23T00:00:00.000Z",
  updated_at: "2026-11-23T00:00:00.000Z",
  initial_prompt: null,
};

const input = (over: Partial<SandboxEnvInput> = {}): SandboxEnvInput => ({
  project,
  session,
  repoUrl: "http://host.docker.internal:7700/git/x.git",
  apiOrigin: "http://host.docker.internal:7700",
  serviceKey: "svc_sk_key",
  cliToken: "svc_pat_token",
  secrets: {},
  secretsRevision: 0,
  llm: {},
  ...over,
});

describe("sandboxEnv", () => {
  it("sets SPEC's platform variables from the project and session", () => {
    expect(sandboxEnv(input())).toEqual({
      SVC_PROJECT_ID: project.id,
      SVC_SESSION_ID: session.session_id,
      SVC_BRANCH_NAME: session.session_id,
      SVC_REPO_URL: "http://host.docker.internal:7700/git/x.git",
      SVC_DEFAULT_BRANCH: "main",
      SVC_BASE_REF: "develop",
      SVC_SERVICE_PORT: "8000",
      SVC_API_URL: "http://host.docker.internal:7700/v1",
      SVC_AGENT_NAME: "build",
      SVC_PROJECT_AUTO_CLONE: "1",
      SVC_PROJECT_SECRET_NAMES: "",
      SVC_PROJECT_SECRETS_REVISION: "0",
      SVC_TOKEN: "svc_sk_key",
      SVC_CLI_TOKEN: "svc_pat_token",
      SVC_EXECUTOR_TOKEN: "svc_pat_token",
    });
  });

  it("injects secrets as plain variables, names sorted, and never lets one shadow a platform variable", () => {
    const env = sandboxEnv(input({ secrets: { ZED: "z", API_KEY: "k", SVC_TOKEN: "stolen" }, secretsRevision: 4 }));
    expect(env.API_KEY).toBe("k");
    expect(env.ZED).toBe("z");
    expect(env.SVC_TOKEN).toBe("svc_sk_key");
    expect(env.SVC_PROJECT_SECRET_NAMES).toBe("API_KEY,SVC_TOKEN,ZED");
    expect(env.SVC_PROJECT_SECRETS_REVISION).toBe("4");
  });

  it("bootstraps the agent only when there is an initial prompt", () => {
    const env = sandboxEnv(input({ session: { ...session, initial_prompt: "fix the build" } }));
    expect(env.SVC_INITIAL_PROMPT).toBe("fix the build");
    expect(env.SVC_BOOTSTRAP_AGENT_SESSION).toBe("1");
    expect(sandboxEnv(input())).not.toHaveProperty("SVC_BOOTSTRAP_AGENT_SESSION");
  });

  it("sets the model gateway and its aliases, the session's model winning over the server's", () => {
    const llm = { baseUrl: "http://host.docker.internal:9000/v1", apiKey: "sk-1", model: "gw/default" };
    const env = sandboxEnv(input({ llm, session: { ...session, agent_model: "gw/chosen" } }));
    expect(env).toMatchObject({
      SVC_LLM_BASE_URL: llm.baseUrl,
      SVC_GW_URL: llm.baseUrl,
      SVC_LLM_API_KEY: "sk-1",
      SVC_GW_API_KEY: "sk-1",
      SVC_AGENT_MODEL: "gw/chosen",
    });
    expect(sandboxEnv(input({ llm: { model: "gw/default" } }))).toMatchObject({ SVC_AGENT_MODEL: "gw/default" });
    expect(sandboxEnv(input({ llm: { apiKey: "sk-1" } }))).not.toHaveProperty("SVC_LLM_API_KEY");
  });
});

describe("egressProxyUrl", () => {
  it("points a proxied sandbox's clients at the egress proxy, the API itself and loopback excepted", () => {
    const proxy = egressProxyUrl("http://host.docker.internal:7700", "svc_sk_key");
    expect(proxy).toBe("http://sandbox:svc_sk_key@host.docker.internal:7700");
    const env = sandboxEnv(input({ proxy, secrets: { HTTPS_PROXY: "http://elsewhere:1" } }));
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) expect(env[name]).toBe(proxy);
    expect(env.NO_PROXY).toBe("host.docker.internal,localhost,127.0.0.1");
    expect(env.no_proxy).toBe(env.NO_PROXY);
    expect(sandboxEnv(input())).not.toHaveProperty("HTTP_PROXY");
  });

  it("a project's own gateway (its secrets) replaces the stack's whole: URL, key and model, never the stack's key", () => {
    const stack = {
      baseUrl: "http://host.docker.internal:9000/v1",
      apiKey: "sk-stack",
      model: "stack-m",
      timeoutS: 60,
    };
    const own = {
      SVC_LLM_BASE_URL: "https://models.example.test/v1",
      SVC_LLM_API_KEY: "sk-project",
      SVC_AGENT_MODEL: "project-m",
    };
    const env = sandboxEnv(input({ llm: stack, secrets: own }));
    expect(env).toMatchObject({
      SVC_LLM_BASE_URL: own.SVC_LLM_BASE_URL,
      SVC_GW_URL: own.SVC_LLM_BASE_URL,
      SVC_LLM_API_KEY: "sk-project",
      SVC_GW_API_KEY: "sk-project",
      SVC_AGENT_MODEL: "project-m",
      SVC_MODEL_TIMEOUT_S: "60",
    });
    expect(
      Object.values(sandboxEnv(input({ llm: stack, secrets: { SVC_LLM_BASE_URL: own.SVC_LLM_BASE_URL } }))),
    ).not.toContain("sk-stack");
    // A model alone runs on the stack's gateway; a session's own model wins over both.
    expect(sandboxEnv(input({ llm: stack, secrets: { SVC_AGENT_MODEL: "project-m" } }))).toMatchObject({
      SVC_LLM_BASE_URL: stack.baseUrl,
      SVC_AGENT_MODEL: "project-m",
    });
    const chosen = { ...session, agent_model: "session-m" };
    expect(sandboxEnv(input({ llm: stack, secrets: own, session: chosen })).SVC_AGENT_MODEL).toBe("session-m");
    // Without one of its own, the stack's as before.
    expect(sandboxEnv(input({ llm: stack }))).toMatchObject({
      SVC_LLM_BASE_URL: stack.baseUrl,
      SVC_LLM_API_KEY: "sk-stack",
    });
  });
});
