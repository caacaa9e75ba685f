import { describe, expect, it } from "vitest";
import { SecretName } from "./secret.ts";

describe("SecretName", () => {
  it("keeps the SVC_ prefix for the platform, but a project's own model settings", () => {
    for (const name of ["SVC_LLM_BASE_URL", "SVC_LLM_API_KEY", "SVC_AGENT_MODEL", "OPENAI_API_KEY", "GREETING"]) {
      expect(SecretName.safeParse(name).success, name).toBe(true);
    }
    for (const name of ["SVC_TOKEN", "SVC_CLI_TOKEN", "svc_llm_base_url", "SVC_GW_URL", "SVC_MODEL_TIMEOUT_S"]) {
      expect(SecretName.safeParse(name).success, name).toBe(false);
    }
  });
});
