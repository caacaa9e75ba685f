import { createHmac, timingSafeEqual } from "node:crypto";

/** Slack refuses to act on requests older than this, and so do we: a captured request cannot be replayed later. */
export const SLACK_TIMESTAMP_WINDOW_S = 5 * 60;

/**
 * Slack's request signing (https://api.slack.com/authentication/verifying-requests-from-slack):
 * `v0=` + hex HMAC-SHA256 of `v0:<timestamp>:<raw body>` keyed by the app's signing secret, compared in constant
 * time, with the timestamp within five minutes of now.
 */
export function slackSignatureValid(input: {
  signingSecret: string;
  timestamp: string | undefined;
  signature: string | undefined;
  rawBody: Buffer;
  nowMs?: number;
}): boolean {
  const { timestamp, signature } = input;
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return false;
  const nowS = Math.floor((input.nowMs ?? Date.now()) / 1000);
  if (Math.abs(nowS - Number(timestamp)) > SLACK_TIMESTAMP_WINDOW_S) return false;
  const expected = Buffer.from(
    `v0=${createHmac("sha256", input.signingSecret).update(`v0:${timestamp}:`).update(input.rawBody).digest("hex")}`,
  );
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
