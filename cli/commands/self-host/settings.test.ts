import { describe, expect, it } from "vitest";
import { stackSetting } from "../../../protocol/stack-settings.ts";
import { maskSetting, nearestSetting } from "./settings.ts";

describe("the stack's settings as the CLI shows them", () => {
  it("suggests the known key a misspelt one was meant to be, and nothing for a foreign one", () => {
    expect(nearestSetting("SVC_AGENT_MODLE")).toBe("SVC_AGENT_MODEL");
    expect(nearestSetting("SVC_LLM_BASEURL")).toBe("SVC_LLM_BASE_URL");
    expect(nearestSetting("svc_session_cap")).toBe("SVC_SESSION_CAP");
    expect(nearestSetting("HTTP_PROXY")).toBeUndefined();
  });

  it("masks secrets, long ones keeping a hint of their start", () => {
    expect(maskSetting(stackSetting("SVC_LLM_API_KEY"), "SVC_LLM_API_KEY", "sk-0123456789abcdef")).toBe("sk-…*****");
    expect(maskSetting(stackSetting("SVC_LLM_API_KEY"), "SVC_LLM_API_KEY", "short")).toBe("********");
    expect(maskSetting(stackSetting("SVC_AGENT_MODEL"), "SVC_AGENT_MODEL", "gpt-x")).toBe("gpt-x");
    expect(maskSetting(undefined, "MY_TOKEN", "abcdefghijklmnop")).toBe("abc…*****");
  });
});
