import { describe, expect, it } from "vitest";
import { loadDaemonConfig } from "./config.ts";
import { opencodeConfig } from "./opencode.ts";

const config = (env: Record<string, string> = {}) => loadDaemonConfig({ SVC_TOKEN: "k".repeat(32), ...env });

describe("opencodeConfig", () => {
  it("enables only the svc gateway, and with no gateway no provider at all (never opencode's built-in ones)", () => {
    expect(opencodeConfig(config())).toMatchObject({ enabled_providers: ["svc"] });
    expect(opencodeConfig(config())).not.toHaveProperty("provider");
    expect(opencodeConfig(config())).not.toHaveProperty("model");
    const withGateway = opencodeConfig(
      config({ SVC_LLM_BASE_URL: "http://gw:9000/v1", SVC_LLM_API_KEY: "sk", SVC_AGENT_MODEL: "gw/m" }),
    );
    expect(withGateway).toMatchObject({
      enabled_providers: ["svc"],
      model: "svc/m",
      provider: { svc: { options: { baseURL: "http://gw:9000/v1", apiKey: "sk" } } },
    });
  });

  it("names the loopback warm-up model only while a pooled sandbox warms up, and never as the agent's model", () => {
    const gateway = { SVC_LLM_BASE_URL: "http://gw:9000/v1", SVC_AGENT_MODEL: "m" };
    const warming = opencodeConfig(config(gateway), "http://127.0.0.1:4100/v1");
    expect(warming).toMatchObject({
      enabled_providers: ["svc", "svc-warmup"],
      model: "svc/m",
      small_model: "svc/m",
      provider: { "svc-warmup": { options: { baseURL: "http://127.0.0.1:4100/v1" } } },
    });
    expect(opencodeConfig(config(gateway))).toMatchObject({ enabled_providers: ["svc"] });
    expect(opencodeConfig(config(gateway)).provider).not.toHaveProperty("svc-warmup");
  });

  it("turns on opencode's own providers whose key the project set, running a model they name there", () => {
    const anthropic = opencodeConfig(config({ ANTHROPIC_API_KEY: "sk-ant", SVC_AGENT_MODEL: "anthropic/claude-x" }));
    expect(anthropic).toMatchObject({ enabled_providers: ["anthropic"], model: "anthropic/claude-x" });
    expect(anthropic.provider).toEqual({});
    // No model named: the provider's own default.
    expect(opencodeConfig(config({ OPENAI_API_KEY: "sk-oa" }))).not.toHaveProperty("model");
    // Beside a gateway: a model of the provider runs there, any other on the gateway.
    const both = { SVC_LLM_BASE_URL: "http://gw:9000/v1", OPENAI_API_KEY: "sk-oa" };
    expect(opencodeConfig(config({ ...both, SVC_AGENT_MODEL: "openai/gpt-x" }))).toMatchObject({
      enabled_providers: ["svc", "openai"],
      model: "openai/gpt-x",
    });
    expect(opencodeConfig(config({ ...both, SVC_AGENT_MODEL: "other/m" }))).toMatchObject({ model: "svc/m" });
  });
});
