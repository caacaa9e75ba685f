import { describe, expect, it } from "vitest";
import { REDACTED, redact } from "./redact.ts";

describe("redact", () => {
  it("masks every occurrence of every secret, longest first", () => {
    const text = "env GIT_ACCESS_TOKEN=ghp_abcdef123 and again ghp_abcdef123; key sk-live-9 and sk-live-99";
    expect(redact(text, ["ghp_abcdef123", "sk-live-9", "sk-live-99"])).toBe(
      `env GIT_ACCESS_TOKEN=${REDACTED} and again ${REDACTED}; key ${REDACTED} and ${REDACTED}`,
    );
  });

  it("finds a secret as JSON and Go quote it, and each line of a multi-line one", () => {
    const secret = 'pa\u0000ss"word';
    const json = `{"Env":["X=${JSON.stringify(secret).slice(1, -1)}"]}`;
    const go = 'invalid env "X=pa\\x00ss\\"word"';
    expect(redact(json, [secret])).toBe(`{"Env":["X=${REDACTED}"]}`);
    expect(redact(go, [secret])).toBe(`invalid env "X=${REDACTED}"`);
    const pem = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----";
    expect(redact("line 2 was MIIEvQIBADANBgkqhkiG9w0BAQEFAASC, rejected", [pem])).toBe(
      `line 2 was ${REDACTED}, rejected`,
    );
  });

  it("masks credentials in URLs, ignores empty and very short values, leaves other text alone", () => {
    expect(redact("fatal: 'https://bot:tok3n@git.example.test/r.git' 403", [])).toBe(
      `fatal: 'https://${REDACTED}@git.example.test/r.git' 403`,
    );
    expect(redact("main branch at abc", ["", undefined, null, "abc", "ma"])).toBe("main branch at abc");
    expect(redact("nothing secret here", ["s3cr3t-value"])).toBe("nothing secret here");
  });

  it("masks a short value only where it stands alone, a long one wherever it is", () => {
    expect(redact("base branch 'nonexistent' not found", ["none"])).toBe("base branch 'nonexistent' not found");
    expect(redact("key=none, none. (none)", ["none"])).toBe(`key=${REDACTED}, ${REDACTED}. (${REDACTED})`);
    expect(redact("a.b+c in xa.b+cx and [a.b+c]", ["a.b+c"])).toBe(`${REDACTED} in xa.b+cx and [${REDACTED}]`);
    expect(redact("tokenghp_0123456789abcdefend", ["ghp_0123456789abcdef"])).toBe(`token${REDACTED}end`);
  });
});
