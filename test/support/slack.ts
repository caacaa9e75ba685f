import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";

export type SlackPosted = { channel: string; thread_ts?: string; text: string };

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * A loopback Slack Web API: `POST /api/chat.postMessage` as Slack answers it (HTTP 200 with `{ok:true, ts}`, or
 * `{ok:false, error}` for a wrong token or a body that is not JSON). Posts that were refused are kept apart.
 */
export async function startSlackWebApi(botToken: string) {
  const posted: SlackPosted[] = [];
  const refused: string[] = [];
  let ts = 1_700_000_000;
  const server = createServer(async (req, res) => {
    const answer = (body: unknown) =>
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    const text = await bodyOf(req);
    if (req.method !== "POST" || req.url !== "/api/chat.postMessage") {
      return res.writeHead(404, { "content-type": "application/json" }).end('{"ok":false,"error":"unknown_method"}');
    }
    if (req.headers.authorization !== `Bearer ${botToken}`) {
      refused.push("invalid_auth");
      return answer({ ok: false, error: "invalid_auth" });
    }
    if (!String(req.headers["content-type"]).startsWith("application/json")) {
      refused.push("invalid_form_data");
      return answer({ ok: false, error: "invalid_form_data" });
    }
    const body = JSON.parse(text) as SlackPosted;
    if (typeof body.channel !== "string" || typeof body.text !== "string") {
      refused.push("invalid_arguments");
      return answer({ ok: false, error: "invalid_arguments" });
    }
    posted.push(body);
    ts += 1;
    answer({ ok: true, channel: body.channel, ts: `${ts}.000100`, message: { text: body.text } });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    apiUrl: `http://127.0.0.1:${port}/api`,
    posted,
    refused,
    close: () => {
      server.close();
      server.closeAllConnections();
    },
  };
}

/** Posts an Events API payload to `url` signed as Slack signs it; `timestamp` and `secret` can be wrong on purpose. */
export async function sendSlackEvent(
  url: string,
  payload: unknown,
  options: { secret: string; timestamp?: number; signature?: string },
) {
  const body = JSON.stringify(payload);
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const signature =
    options.signature ?? `v0=${createHmac("sha256", options.secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-slack-request-timestamp": timestamp,
      "x-slack-signature": signature,
    },
    body,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
