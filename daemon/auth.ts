import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { verifyUserContext } from "../protocol/user-context.ts";

/** `/svc/*` control calls: the sandbox service key as a bearer, compared in constant time. */
export function hasServiceKey(req: IncomingMessage, serviceKey: string): boolean {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "");
  if (!match) return false;
  const given = Buffer.from(match[1]!);
  const expected = Buffer.from(serviceKey);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export type ContextCheck = { ok: true } | { ok: false; reason: string };

/**
 * Everything outside /svc/*: a valid, unexpired X-Svc-User-Context signed with SVC_TOKEN for this session.
 * A browser or client repeats the same header on every request, so a verified header is remembered until it
 * expires: the HMAC and parse run once per header, not once per request.
 */
export function createUserContextCheck(serviceKey: string, sessionId: string, maxEntries = 1024) {
  const verified = new Map<string, number>();
  return function check(header: string | undefined): ContextCheck {
    const now = Date.now() / 1000;
    const known = header ? verified.get(header) : undefined;
    if (known !== undefined && known > now) return { ok: true };
    const result = verifyUserContext(serviceKey, header, now);
    if (!result.ok) return { ok: false, reason: result.reason };
    if (sessionId && result.value.session_id !== sessionId) return { ok: false, reason: "wrong_session" };
    if (verified.size >= maxEntries) verified.clear();
    verified.set(header!, result.value.exp);
    return { ok: true };
  };
}
