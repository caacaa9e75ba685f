import { describe, expect, it } from "vitest";
import { StackEnv, stackSetting } from "./stack-settings.ts";

describe("the stack's settings catalogue", () => {
  it("finds a setting by its key", () => {
    expect(stackSetting("SVC_LLM_API_KEY")).toMatchObject({ kind: "secret", secret: true });
    expect(stackSetting("HTTP_PROXY")).toBeUndefined();
  });

  it("is what the API parses its environment with: defaults and refusals", () => {
    const env = StackEnv.parse({});
    expect(env).toMatchObject({ SVC_PORT: 7700, SVC_LISTEN_HOST: "127.0.0.1", SVC_SESSION_CAP: 5 });
    expect(StackEnv.safeParse({ SVC_LLM_BASE_URL: "localhost:4000" }).success).toBe(false);
    expect(StackEnv.safeParse({ DATABASE_URL: "mysql://db/x" }).success).toBe(false);
    expect(StackEnv.parse({ SVC_SESSION_CAP: "7" }).SVC_SESSION_CAP).toBe(7);
  });

  it("reads repository hosts and accounts as comma-separated lists", () => {
    const env = StackEnv.parse({
      SVC_REPO_ALLOWED_HOSTS: "Git.Internal, 10.0.0.5:3000,[::1]:2222,",
      SVC_REPO_ACCESS_ACCOUNTS: "admin, 6f1c2a9e-3b1d-4c5e-9f00-1a2b3c4d5e6f",
    });
    expect(env.SVC_REPO_ALLOWED_HOSTS).toEqual(["git.internal", "10.0.0.5:3000", "[::1]:2222"]);
    expect(env.SVC_REPO_ACCESS_ACCOUNTS).toEqual(["admin", "6f1c2a9e-3b1d-4c5e-9f00-1a2b3c4d5e6f"]);
    expect(StackEnv.parse({ SVC_REPO_ACCESS_ACCOUNTS: "" }).SVC_REPO_ACCESS_ACCOUNTS).toEqual([]);
    for (const bad of ["https://git.internal", "git.internal/x", "::1", "host:port"])
      expect(StackEnv.safeParse({ SVC_REPO_ALLOWED_HOSTS: bad }).success, bad).toBe(false);
  });
});
