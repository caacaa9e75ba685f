import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Transcript, type TranscriptEntry } from "../protocol/transcript.ts";
import { call, startApi } from "./support/api-server.ts";
import { svc } from "./support/cli.ts";
import { type SandboxedProject, startSandboxedProject } from "./support/sandboxed-project.ts";
import { startScriptedLlm } from "./support/scripted-llm.ts";
import { waitFor } from "./support/wait.ts";

const FIRST = "Write notes.txt, and remember the code word PLUM.";
const ASK = "What is the code word?";
const WROTE = "I wrote **notes.txt**.";

/**
 * A session's stored transcript and its resume, on the real API, sandbox and opencode with a scripted model: what
 * the person and the agent said and did is kept through a stop, a restart and another server, and a restarted
 * agent's next request to the model carries it.
 */
describe("session transcript: stored as it happens, read anywhere, carried into a restart", () => {
  let sp: SandboxedProject;
  let llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  let id: string;

  const transcript = async (afterRev?: number): Promise<TranscriptEntry[]> => {
    const res = await sp.sessions(`/${id}/transcript${afterRev === undefined ? "" : `?after_rev=${afterRev}`}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return Transcript.parse(res.body);
  };
  const said = (entries: TranscriptEntry[]) =>
    entries.map((e) => (e.role === "tool" ? `tool ${e.tool?.name} ${e.tool?.status}` : `${e.role}: ${e.text}`));
  const running = () =>
    waitFor(
      "the session running",
      async () => {
        const s = (await sp.sessions(`/${id}`)).body;
        if (s.status === "failed") throw new Error(`session failed: ${s.error}`);
        return s.status === "running";
      },
      { timeoutMs: 120_000 },
    );
  /** A message once the agent takes it (it may still be starting), then the run's answer in the transcript. */
  const ask = async (text: string, answers: number) => {
    await waitFor(
      "the agent to take the message",
      async () => (await sp.sessions(`/${id}/messages`, "POST", { text })).status === 202,
      { timeoutMs: 60_000, everyMs: 500 },
    );
    return waitFor(
      "the answer in the transcript",
      async () => {
        const entries = await transcript();
        return entries.filter((e) => e.role === "assistant").length >= answers && entries;
      },
      { timeoutMs: 60_000 },
    ).catch(async (err: Error) => {
      // What the transcript and the sandbox said: the failure's own evidence.
      const logs = await svc(["sessions", "logs", id], { env: sp.cliEnv });
      throw new Error(`${err.message}\ntranscript: ${JSON.stringify(said(await transcript()))}\nlogs:\n${logs.stdout}`);
    });
  };

  beforeAll(async () => {
    llm = await startScriptedLlm([
      {
        when: "Write notes.txt",
        steps: [
          {
            tool: "bash",
            args: { command: "printf 'one\\ntwo\\n' > notes.txt && cat notes.txt", description: "Write the notes" },
          },
          { text: WROTE },
        ],
      },
      { when: "What is the code word", steps: [{ text: "It is in our conversation." }] },
    ]);
    sp = await startSandboxedProject(
      "Transcribed",
      { llm: { baseUrl: llm.url, apiKey: "transcript", model: "scripted" } },
      { background: true },
    );
  }, 300_000);
  afterAll(async () => {
    await sp?.close();
    llm?.close();
  });

  it("stores the first prompt, the tool call with its input and output, and the answer, as they happen", async () => {
    const created = await sp.sessions("", "POST", { prompt: FIRST });
    expect(created.status).toBe(201);
    id = created.body.session_id;
    // The first prompt is there at once, before any sandbox runs.
    expect(said(await transcript())).toEqual([`user: ${FIRST}`]);
    await running();
    const entries = await waitFor(
      "the agent's answer stored",
      async () => {
        const all = await transcript();
        return all.some((e) => e.role === "assistant" && e.text === WROTE) && all;
      },
      { timeoutMs: 60_000 },
    );
    expect(said(entries)).toEqual([`user: ${FIRST}`, "tool bash completed", `assistant: ${WROTE}`]);
    const tool = entries[1]!;
    // opencode titles a finished bash call with its command.
    expect(tool.text).toBe("printf 'one\\ntwo\\n' > notes.txt && cat notes.txt");
    expect(tool.tool).toMatchObject({
      input: { command: "printf 'one\\ntwo\\n' > notes.txt && cat notes.txt" },
      output_truncated: false,
    });
    expect(tool.tool!.output).toContain("one\ntwo");
    // Ordered as they happened; `after_rev` gives only what changed since.
    expect(entries.map((e) => e.seq)).toEqual([...entries.map((e) => e.seq)].sort((a, b) => a - b));
    const newest = Math.max(...entries.map((e) => e.rev));
    expect(await transcript(newest)).toEqual([]);
  }, 200_000);

  it("svc sessions transcript prints it for a person and as JSON, from an id prefix", async () => {
    const human = await svc(["sessions", "transcript", id.slice(0, 8)], { env: sp.cliEnv });
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.split("\n");
    expect(lines[0]).toMatch(/^you {2}\d\d:\d\d:\d\d$/);
    expect(lines[1]).toBe(`  ${FIRST}`);
    expect(human.stdout).toMatch(/^tool bash {2}\d\d:\d\d:\d\d {2}completed$/m);
    expect(human.stdout).toContain("  $ printf 'one\\ntwo\\n' > notes.txt && cat notes.txt\n  one\n  two");
    expect(human.stdout).toMatch(/^agent {2}\d\d:\d\d:\d\d\n {2}I wrote \*\*notes\.txt\*\*\.$/m);
    const json = await svc(["sessions", "transcript", id, "--json"], { env: sp.cliEnv });
    expect(json.code, json.stderr).toBe(0);
    expect(Transcript.parse(JSON.parse(json.stdout))).toEqual(await transcript());
  });

  it("keeps it through a stop; a restarted agent's next model request carries the earlier conversation", async () => {
    await ask(ASK, 2);
    const before = await transcript();
    expect((await sp.sessions(`/${id}/stop`, "POST", {})).status).toBe(200);
    await waitFor("stopped", async () => (await sp.sessions(`/${id}`)).body.status === "stopped");
    expect(await transcript()).toEqual(before);

    expect((await sp.sessions(`/${id}/restart`, "POST", {})).status).toBe(200);
    await running();
    const turnsBefore = llm.turns().length;
    const after = await ask("What is the code word, once more?", 3);
    // The first prompt was not run again: the restored conversation took its place.
    expect(said(after)).toEqual([
      `user: ${FIRST}`,
      "tool bash completed",
      `assistant: ${WROTE}`,
      `user: ${ASK}`,
      "assistant: It is in our conversation.",
      "user: What is the code word, once more?",
      "assistant: It is in our conversation.",
    ]);
    const turn = llm.turns().slice(turnsBefore).at(-1)!;
    expect(turn).toContain("PLUM");
    expect(turn).toContain(WROTE);
    expect(turn).toContain("cat notes.txt");
    expect(turn).toContain("What is the code word, once more?");
  }, 300_000);

  it("is served by another server on the same database, and goes with the session", async () => {
    const stored = await transcript();
    const other = await startApi(sp.db.sql);
    try {
      const res = await call(other.url, "GET", `/v1/projects/${sp.project.id}/sessions/${id}/transcript`, {
        token: sp.user.token,
      });
      expect(res.status).toBe(200);
      expect(Transcript.parse(res.body)).toEqual(stored);
    } finally {
      await other.close();
    }
    expect((await sp.sessions(`/${id}`, "DELETE")).status).toBe(204);
    const gone = await sp.sessions(`/${id}/transcript`);
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe("SESSION_NOT_FOUND");
    const [rows] = await sp.db.sql.query<{ n: number }>(
      "select count(*)::int as n from session_transcript where session_id = $1",
      [id],
    );
    expect(rows!.n).toBe(0);
  }, 120_000);
});
