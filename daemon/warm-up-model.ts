import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** The opencode provider and model a pooled sandbox's warm-up prompt is sent to; nothing else uses them. */
export const WARM_UP_PROVIDER = "svc-warmup";
export const WARM_UP_MODEL = "warm-up";

type Message = { role: string };
type ChatRequest = { tools?: unknown[]; messages?: Message[] };

async function readBody(req: IncomingMessage): Promise<ChatRequest> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
  } catch {
    return {};
  }
}

/** One OpenAI-style streamed answer: a bash call of `true` on the first turn, then a short text. */
function answer(res: ServerResponse, request: ChatRequest): void {
  const messages = request.messages ?? [];
  const lastUser = messages.map((m) => m.role).lastIndexOf("user");
  const calledTool = messages.slice(lastUser + 1).some((m) => m.role === "tool");
  const chunk = (delta: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: "warm-up", object: "chat.completion.chunk", created: 0, model: WARM_UP_MODEL, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  if (request.tools?.length && !calledTool) {
    const args = JSON.stringify({ command: "true", description: "warm up the shell tool" });
    res.write(
      chunk({
        role: "assistant",
        content: null,
        tool_calls: [{ index: 0, id: "warm-up", type: "function", function: { name: "bash", arguments: args } }],
      }),
    );
    res.write(chunk({}, "tool_calls"));
  } else {
    res.write(chunk({ role: "assistant", content: "ready" }));
    res.write(chunk({}, "stop"));
  }
  res.end("data: [DONE]\n\n");
}

/**
 * A model on loopback that only a pooled sandbox's warm-up talks to: one prompt through it runs opencode's whole
 * first agent loop (instance bootstrap, provider SDK, the bash tool and its command parser) before any session
 * waits on it, and spends no tokens of the real gateway. It closes once the warm-up is over.
 */
export async function startWarmUpModel(): Promise<{ baseUrl: string; close: () => void }> {
  const server = createServer((req, res) => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    readBody(req).then(
      (body) => answer(res, body),
      () => res.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    close: () => {
      server.close();
      server.closeAllConnections();
    },
  };
}
