import { createHash, randomBytes } from "node:crypto";

/** A fresh credential: prefix plus 256 random bits. Only its hash is ever stored. */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString("base64url");
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** What listings may show of a secret: enough to tell two apart, never enough to use one. */
export function displayPrefix(secret: string): string {
  return `${secret.slice(0, 12)}…`;
}
