import { scryptSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { hashPassword, verifyPassword } from "./passwords.ts";

describe("passwords: scrypt with a salt of their own, parameters stored with the hash", () => {
  it("verifies the password a hash was made from, and no other", async () => {
    const stored = await hashPassword("correct horse battery");
    expect(stored).toMatch(/^scrypt\$32768\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(stored).not.toContain("correct horse battery");
    expect(await verifyPassword("correct horse battery", stored)).toBe(true);
    expect(await verifyPassword("correct horse batterY", stored)).toBe(false);
    expect(await verifyPassword("", stored)).toBe(false);
  });

  it("salts each hash: the same password twice makes two hashes", async () => {
    const [a, b] = await Promise.all([hashPassword("same password"), hashPassword("same password")]);
    expect(a).not.toBe(b);
    expect(await verifyPassword("same password", a)).toBe(true);
    expect(await verifyPassword("same password", b)).toBe(true);
  });

  it("verifies a hash made with other parameters: they travel with it", async () => {
    const salt = Buffer.from("0123456789abcdef");
    const key = scryptSync("old password", salt, 64, { N: 1024, r: 4, p: 2 });
    const stored = `scrypt$1024$4$2$${salt.toString("base64url")}$${key.toString("base64url")}`;
    expect(await verifyPassword("old password", stored)).toBe(true);
    expect(await verifyPassword("new password", stored)).toBe(false);
  });

  it("the same password in two Unicode forms is one password", async () => {
    const stored = await hashPassword("caf\u00e9 au lait");
    expect(await verifyPassword("cafe\u0301 au lait", stored)).toBe(true);
  });

  it("no stored hash, or a damaged one, matches nothing, not even the empty password", async () => {
    for (const stored of [null, undefined, "", "plain-text", "scrypt$1$2$3$x"]) {
      expect(await verifyPassword("", stored)).toBe(false);
      expect(await verifyPassword("anything", stored)).toBe(false);
    }
  });
});
