import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { USER_CONTEXT_HEADER, verifyUserContext } from "../protocol/user-context.ts";

/** `/svc/*` control calls: the sandbox service key as a bearer, compared in constant time. */
export function hasServiceKey(req: IncomingMessage, serviceKey: string): boolean {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "");
  if (!match) return false;
  const given = Buffer.from(match[1]!);
  const expected = Buffer.from(serviceKey);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export type ContextCheck = { ok: true } | { ok: false; reason: string };

/** Everything outside /svc/*: a valid, unexpired X-Svc-User-Context signed with SVC_TOKEN for this session. */
export function checkUserContext(req: IncomingMessage, serviceKey: string, sessionId: string): ContextCheck {
  const raw = req.headers[USER_CONTEXT_HEADER];
  const check = verifyUserContext(serviceKey, Array.isArray(raw) ? raw[0] : raw);
  if (!check.ok) return { ok: false, reason: check.reason };
  if (sessionId && check.context.session_id !== sessionId) return { ok: false, reason: "wrong_session" };
  return { ok: true };
}
