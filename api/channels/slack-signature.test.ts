import { describe, expect, it } from "vitest";
import { slackSignatureValid } from "./slack-signature.ts";

// Slack's own worked example (https://api.slack.com/authentication/verifying-requests-from-slack).
const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const TIMESTAMP = "1531420618";
const BODY = Buffer.from(
  "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
);
const SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
const AT = Number(TIMESTAMP) * 1000;

describe("Slack request signatures", () => {
  const check = (over: Partial<Parameters<typeof slackSignatureValid>[0]>) =>
    slackSignatureValid({
      signingSecret: SECRET,
      timestamp: TIMESTAMP,
      signature: SIGNATURE,
      rawBody: BODY,
      nowMs: AT,
      ...over,
    });

  it("accepts Slack's example and nothing that differs from it", () => {
    expect(check({})).toBe(true);
    expect(check({ signingSecret: "another secret" })).toBe(false);
    expect(check({ rawBody: Buffer.concat([BODY, Buffer.from(" ")]) })).toBe(false);
    expect(check({ signature: SIGNATURE.replace("v0=", "v1=") })).toBe(false);
    expect(check({ signature: "v0=short" })).toBe(false);
    expect(check({ signature: undefined })).toBe(false);
    expect(check({ timestamp: "not-a-time" })).toBe(false);
  });

  it("refuses a timestamp more than five minutes away from now", () => {
    expect(check({ nowMs: AT + 299_000 })).toBe(true);
    expect(check({ nowMs: AT + 301_000 })).toBe(false);
    expect(check({ nowMs: AT - 301_000 })).toBe(false);
  });
});
