import { createServer, type IncomingMessage } from "node:http";

/** One scripted turn: a tool call the "model" makes, or its final text. */
export type ScriptStep = { tool: string; args: Record<string, unknown> } | { text: string };

/** The steps to play when the latest user message contains `when`. */
export type ScriptRule = { when: string; steps: ScriptStep[] };

type Message = { role: string; content?: unknown };
type ChatRequest = { model?: string; stream?: boolean; tools?: unknown[]; messages: Message[] };

const textOf = (m: Message) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? ""));

/** The rule matching the latest user message, at the step given by the tool results since that message. */
function nextStep(rules: ScriptRule[], messages: Message[]): ScriptStep {
  const lastUser = messages.map((m) => m.role).lastIndexOf("user");
  const rule = rules.find((r) => lastUser >= 0 && textOf(messages[lastUser]!).includes(r.when));
  const done = messages.slice(lastUser + 1).filter((m) => m.role === "tool").length;
  return rule?.steps[done] ?? { text: "done" };
}

async function readBody(req: IncomingMessage): Promise<ChatRequest> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/**
 * An OpenAI-compatible chat-completions server that plays a script, streaming the way opencode reads it:
 * a role chunk, the tool call's arguments, `finish_reason`, `[DONE]`. A request without tools (title
 * generation) gets plain text. It listens on every interface so sandboxes reach it through the bridge.
 * `refuse(401)` makes it answer every call with that status and an OpenAI-style error, as a gateway does to a
 * wrong key; `refuse()` restores the script. With `gateway.apiKey` or `gateway.models` it refuses another key (401)
 * or model (404) the same way.
 */
export async function startScriptedLlm(
  rules: ScriptRule[],
  host = "0.0.0.0",
  gateway: { apiKey?: string; models?: string[] } = {},
) {
  let requests = 0;
  /** The messages of every agent turn (a request with tools), in order: what the model was shown. */
  const turns: Message[][] = [];
  let refusal: number | undefined;
  const server = createServer(async (req, res) => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    const request = await readBody(req);
    requests += 1;
    const refuse = (status: number, message: string, code: string) => {
      const error = { message, type: "invalid_request_error", code };
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error }));
    };
    if (refusal) return refuse(refusal, "Incorrect API key provided", "invalid_api_key");
    if (gateway.apiKey && req.headers.authorization !== `Bearer ${gateway.apiKey}`) {
      return refuse(401, "Incorrect API key provided", "invalid_api_key");
    }
    if (gateway.models && !gateway.models.includes(request.model ?? "")) {
      return refuse(404, `The model \`${request.model}\` does not exist`, "model_not_found");
    }
    const id = `chatcmpl-${requests}`;
    const chunk = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    if (request.tools?.length) turns.push(request.messages);
    const step = request.tools?.length ? nextStep(rules, request.messages) : { text: "svc session" };
    if ("text" in step) {
      res.write(chunk({ role: "assistant", content: step.text }));
      res.write(chunk({}, "stop"));
    } else {
      const call = { index: 0, id: `call_${requests}`, type: "function", function: { name: step.tool, arguments: "" } };
      res.write(chunk({ role: "assistant", content: null, tool_calls: [call] }));
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify(step.args) } }] }));
      res.write(chunk({}, "tool_calls"));
    }
    res.write("data: [DONE]\n\n");
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests: () => requests,
    /** Each agent turn's messages as text, one string a turn: a later turn shows what context reached the model. */
    turns: () => turns.map((messages) => messages.map((m) => `${m.role}: ${textOf(m)}`).join("\n")),
    refuse: (status?: number) => {
      refusal = status;
    },
    /** Stops listening and drops kept-alive connections: the gateway is gone. */
    close: () => {
      server.close();
      server.closeAllConnections();
    },
  };
}
