import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { signToken, verifyToken } from "./signed-token.ts";

const KEY = "svc_sk_signing-key-0123456789abcdef";
const Payload = z.object({ sub: z.string(), exp: z.number() });
const NOW = 1_700_000_000;
const payload = { sub: "user-1", exp: NOW + 60 };

/** The token with its payload part replaced by `value`, the signature kept. */
function withPayload(token: string, value: unknown): string {
  return `${Buffer.from(JSON.stringify(value)).toString("base64url")}.${token.split(".")[1]}`;
}

describe("signed tokens", () => {
  it("verify what was signed with the same key, payload intact", () => {
    const token = signToken(KEY, payload);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(JSON.parse(Buffer.from(token.split(".")[0]!, "base64url").toString())).toEqual(payload);
    expect(verifyToken(KEY, Payload, token, NOW)).toEqual({ ok: true, value: payload });
  });

  it("refuse a payload changed after signing", () => {
    const token = signToken(KEY, payload);
    const tampered = withPayload(token, { ...payload, sub: "admin" });
    expect(verifyToken(KEY, Payload, tampered, NOW)).toEqual({ ok: false, reason: "bad_signature" });
    const extended = withPayload(token, { ...payload, exp: NOW + 3600 });
    expect(verifyToken(KEY, Payload, extended, NOW)).toEqual({ ok: false, reason: "bad_signature" });
  });

  it("refuse a signature changed or made with another key", () => {
    const token = signToken(KEY, payload);
    expect(verifyToken("svc_sk_another-key-00000000000000000", Payload, token, NOW)).toEqual({
      ok: false,
      reason: "bad_signature",
    });
    const [body, sig] = token.split(".") as [string, string];
    const flipped = `${body}.${sig[0] === "A" ? "B" : "A"}${sig.slice(1)}`;
    expect(verifyToken(KEY, Payload, flipped, NOW)).toEqual({ ok: false, reason: "bad_signature" });
    expect(verifyToken(KEY, Payload, `${body}.${sig.slice(0, 20)}`, NOW)).toEqual({
      ok: false,
      reason: "bad_signature",
    });
  });

  it("expire at exp: valid just before, refused at and after", () => {
    const token = signToken(KEY, payload);
    expect(verifyToken(KEY, Payload, token, payload.exp - 0.001).ok).toBe(true);
    expect(verifyToken(KEY, Payload, token, payload.exp)).toEqual({ ok: false, reason: "expired" });
    expect(verifyToken(KEY, Payload, token, payload.exp + 1)).toEqual({ ok: false, reason: "expired" });
  });

  it("call anything that is not two dot-separated parts malformed", () => {
    const token = signToken(KEY, payload);
    for (const bad of [undefined, "", "no-dot", `.${token.split(".")[1]}`, `${token}.extra`, "a.b.c"]) {
      expect(verifyToken(KEY, Payload, bad, NOW), String(bad)).toEqual({ ok: false, reason: "malformed" });
    }
  });

  it("call a correctly signed body that is not JSON, or not the schema's, malformed", () => {
    const signBody = (text: string) => {
      const body = Buffer.from(text).toString("base64url");
      return `${body}.${createHmac("sha256", KEY).update(body).digest("base64url")}`;
    };
    // The helper signs exactly as signToken does, so the cases below fail on content, not on the signature.
    expect(signBody(JSON.stringify(payload))).toBe(signToken(KEY, payload));
    for (const text of ["not json", JSON.stringify({ sub: "user-1" }), JSON.stringify({ sub: 1, exp: NOW + 60 })]) {
      expect(verifyToken(KEY, Payload, signBody(text), NOW), text).toEqual({ ok: false, reason: "malformed" });
    }
  });
});
