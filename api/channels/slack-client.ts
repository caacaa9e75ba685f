import { z } from "zod";

/** Slack rejects longer message texts (msg_too_long). */
export const SLACK_TEXT_LIMIT = 40_000;
const TRUNCATED_NOTE = "\n… (truncated: the full answer is in the session on the dashboard)";
const MAX_RETRY_AFTER_S = 30;
const POST_TIMEOUT_MS = 15_000;

export type SlackSettings = { signingSecret?: string; botToken?: string; apiUrl: string };

export type SlackPost = { channel: string; thread_ts: string; text: string };

const SlackAnswer = z.looseObject({ ok: z.boolean(), error: z.string().optional() });

/** A text Slack accepts: within its length limit, saying so when cut. */
export function fitSlackText(text: string): string {
  if (text.length <= SLACK_TEXT_LIMIT) return text;
  return text.slice(0, SLACK_TEXT_LIMIT - TRUNCATED_NOTE.length) + TRUNCATED_NOTE;
}

/**
 * Slack's Web API `chat.postMessage`. A post never throws: failures are logged (never with the token), a 429 is
 * retried once after its Retry-After.
 */
export function createSlackClient(
  settings: SlackSettings,
  log: (msg: string, extra?: Record<string, unknown>) => void,
) {
  const url = `${settings.apiUrl.replace(/\/+$/, "")}/chat.postMessage`;

  async function attempt(post: SlackPost): Promise<Response> {
    return fetch(url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${settings.botToken}`,
        "content-type": "application/json; charset=utf-8",
      },
      body: JSON.stringify({ ...post, text: fitSlackText(post.text) }),
      signal: AbortSignal.timeout(POST_TIMEOUT_MS),
    });
  }

  return {
    async postMessage(post: SlackPost): Promise<void> {
      if (!settings.botToken) return log("slack: no bot token configured (SVC_SLACK_BOT_TOKEN); reply not posted");
      try {
        let res = await attempt(post);
        if (res.status === 429) {
          const wait = Math.min(Number(res.headers.get("retry-after")) || 1, MAX_RETRY_AFTER_S);
          await res.body?.cancel();
          await new Promise((r) => setTimeout(r, wait * 1000));
          res = await attempt(post);
        }
        const answer = SlackAnswer.safeParse(await res.json().catch(() => undefined));
        if (!res.ok || !answer.success || !answer.data.ok) {
          log("slack: chat.postMessage failed", {
            status: res.status,
            error: answer.success ? answer.data.error : "unreadable answer",
            channel: post.channel,
          });
        }
      } catch (err) {
        log("slack: chat.postMessage failed", { error: (err as Error).message, channel: post.channel });
      }
    },
  };
}

export type SlackClient = ReturnType<typeof createSlackClient>;
