/** The slice of opencode's server API the daemon drives: sessions, prompts, abort, status. */
export function createAgentClient(port: number, directory: string) {
  const base = `http://127.0.0.1:${port}`;
  const json = async <T>(method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<T> => {
    const res = await fetch(base + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) throw new Error(`agent runtime answered ${res.status} to ${method} ${path}`);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  };
  const dir = `directory=${encodeURIComponent(directory)}`;

  return {
    async createSession(title: string): Promise<string> {
      const session = await json<{ id: string }>("POST", `/session?${dir}`, { title });
      return session.id;
    },
    async prompt(session: string, text: string, agent?: string): Promise<void> {
      await json("POST", `/session/${encodeURIComponent(session)}/prompt_async?${dir}`, {
        parts: [{ type: "text", text }],
        ...(agent ? { agent } : {}),
      });
    },
    async abort(session: string): Promise<void> {
      await json("POST", `/session/${encodeURIComponent(session)}/abort?${dir}`);
    },
    /** Agent sessions with a run in progress. */
    async busySessions(): Promise<string[]> {
      const status = await json<Record<string, { type: string }>>("GET", `/session/status?${dir}`, undefined, 1000);
      return Object.entries(status ?? {})
        .filter(([, s]) => s.type !== "idle")
        .map(([id]) => id);
    },
  };
}

export type AgentClient = ReturnType<typeof createAgentClient>;
