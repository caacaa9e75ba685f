import { describe, expect, it } from "vitest";
import { sandboxLinkUrl } from "./sandbox-link.ts";
import { StackEnv, stackSetting } from "./stack-settings.ts";

describe("sandbox links", () => {
  it("dial the API where sandboxes reach it, over ws or wss", () => {
    expect(sandboxLinkUrl("http://host.docker.internal:7700")).toBe(
      "ws://host.docker.internal:7700/svc/v1/sandbox-link",
    );
    expect(sandboxLinkUrl("https://svc.example.com/base/")).toBe("wss://svc.example.com/base/svc/v1/sandbox-link");
  });

  it("are a stack setting, dial-out unless set to direct", () => {
    expect(stackSetting("SVC_SANDBOX_LINK")).toMatchObject({ kind: "choice", secret: false });
    expect(StackEnv.parse({}).SVC_SANDBOX_LINK).toBe("dial-out");
    expect(StackEnv.parse({ SVC_SANDBOX_LINK: "direct" }).SVC_SANDBOX_LINK).toBe("direct");
    expect(StackEnv.safeParse({ SVC_SANDBOX_LINK: "dialout" }).success).toBe(false);
  });
});
