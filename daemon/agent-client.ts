import { httpRequest } from "./http-json.ts";

/** opencode's `/event` stream: `{type, properties}` objects (see ../shared/notes/opencode.md). */
export type RuntimeEvent = { type: string; properties?: Record<string, unknown> };

/** The slice of opencode's server API the daemon drives: sessions, prompts, abort, status. */
export function createAgentClient(port: number, directory: string) {
  const base = `http://127.0.0.1:${port}`;
  const json = async <T>(method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<T> => {
    const res = await httpRequest(method, base + path, {
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      timeoutMs,
    });
    if (res.status < 200 || res.status >= 300)
      throw new Error(`agent runtime answered ${res.status} to ${method} ${path}`);
    return (res.body ? JSON.parse(res.body) : undefined) as T;
  };
  const dir = `directory=${encodeURIComponent(directory)}`;

  return {
    async createSession(title: string): Promise<string> {
      const session = await json<{ id: string }>("POST", `/session?${dir}`, { title });
      return session.id;
    },
    /** The agents a prompt may name: those the runtime defines, but its hidden ones (title, summary, compaction). */
    async agents(): Promise<string[]> {
      const agents = await json<{ name: string; hidden?: boolean | null }[]>("GET", `/agent?${dir}`);
      return (agents ?? []).filter((a) => !a.hidden).map((a) => a.name);
    },
    async prompt(session: string, text: string, agent?: string): Promise<void> {
      await json("POST", `/session/${encodeURIComponent(session)}/prompt_async?${dir}`, {
        parts: [{ type: "text", text }],
        ...(agent ? { agent } : {}),
      });
    },
    /**
     * Pays opencode's first-use costs before anyone waits on them: an instance's first agent loop boots its
     * project services, loads the provider SDK, the tools and the bash command parser (seconds). One prompt to
     * the loopback warm-up model (warm-up-model.ts) runs that loop; the throwaway session goes again.
     */
    async warmUp(model: { providerID: string; modelID: string }): Promise<void> {
      const session = await json<{ id: string }>("POST", `/session?${dir}`, { title: "warm-up" });
      const path = `/session/${encodeURIComponent(session.id)}`;
      // Bounded: a warm-up that stalls costs the first prompt only what it would have cost anyway.
      await json(
        "POST",
        `${path}/message?${dir}`,
        { agent: "build", model, parts: [{ type: "text", text: "warm-up" }] },
        30_000,
      );
      await json("DELETE", `${path}?${dir}`);
    },
    /** The runtime's conversations, but the warm-up's (warm-up-model.ts). */
    async conversations(): Promise<{ id: string; title?: string }[]> {
      const sessions = await json<{ id: string; title?: string }[]>("GET", `/session?${dir}`);
      return (sessions ?? []).filter((s) => s.title !== "warm-up");
    },
    /** A conversation's messages, each with its parts, oldest first. */
    async messages(session: string): Promise<unknown[]> {
      return (await json<unknown[]>("GET", `/session/${encodeURIComponent(session)}/message?${dir}`)) ?? [];
    },
    /**
     * Adds a person's message to a conversation without starting a run: the model reads it with the next one
     * (how a restarted session's earlier conversation reaches it).
     */
    async note(session: string, text: string): Promise<void> {
      await json("POST", `/session/${encodeURIComponent(session)}/message?${dir}`, {
        noReply: true,
        parts: [{ type: "text", text }],
      });
    },
    async abort(session: string): Promise<void> {
      await json("POST", `/session/${encodeURIComponent(session)}/abort?${dir}`);
    },
    /** Agent sessions with a run in progress, with opencode's status of each (`busy`, `retry` and its message). */
    async busySessions(): Promise<{ id: string; status: { type: string; message?: string } }[]> {
      const status = await json<Record<string, { type: string; message?: string }>>(
        "GET",
        `/session/status?${dir}`,
        undefined,
        1000,
      );
      return Object.entries(status ?? {})
        .filter(([, s]) => s.type !== "idle")
        .map(([id, s]) => ({ id, status: s }));
    },
  };
}

export type AgentClient = ReturnType<typeof createAgentClient>;
