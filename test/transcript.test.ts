import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Transcript } from "../protocol/transcript.ts";
import { call } from "./support/api-server.ts";
import { databaseKinds } from "./support/databases.ts";
import { type TwoAccountApi, twoAccountApi } from "./support/no-sandboxes.ts";

const at = (s: number) => new Date(Date.UTC(2026, 10, 25, 12, 0, s)).toISOString();

describe.each(databaseKinds("postgres"))("session transcript store and route (%s)", (kind) => {
  let stack: TwoAccountApi;
  let sessionId: string;
  const read = (query = "", token = stack.alice.token, project = stack.aliceProject) =>
    call(stack.api.url, "GET", `/v1/projects/${project}/sessions/${sessionId}/transcript${query}`, { token });

  beforeAll(async () => {
    stack = await twoAccountApi(kind);
    const created = await stack.api.services.sessionStore.createWithinCap({
      accountId: stack.alice.accountId,
      projectId: stack.aliceProject,
      baseRef: "main",
      agentName: "build",
      agentModel: null,
      initialPrompt: "Fix the failing test",
      createdBy: stack.alice.userId,
      cap: 100,
      provisioner: stack.api.services.instanceId,
    });
    if (!("session" in created)) throw new Error("session cap reached");
    sessionId = created.session.session_id;
  }, 60_000);
  afterAll(() => stack?.close());

  it("starts with the first prompt; the agent's parts are stored once each, in order, and grow in place", async () => {
    const store = stack.api.services.transcripts;
    const first = Transcript.parse((await read()).body);
    expect(first.map((e) => [e.role, e.text, e.conversation])).toEqual([["user", "Fix the failing test", null]]);

    const text = (t: string) => ({
      key: "prt_1",
      conversation: "ses_1",
      role: "assistant" as const,
      text: t,
      tool: null,
      at: at(1),
    });
    const tool = (status: "running" | "completed", output: string | null) => ({
      key: "prt_2",
      conversation: "ses_1",
      role: "tool" as const,
      text: "Runs the tests",
      tool: { name: "bash", status, input: { command: "npm test" }, output, output_truncated: false },
      at: at(2),
    });
    // The same part twice in one batch, and again later: one row, the newest text.
    await store.upsertRuntime(sessionId, [text("Let me"), text("Let me look"), tool("running", null)]);
    const mid = Transcript.parse((await read()).body);
    expect(mid.map((e) => [e.role, e.text])).toEqual([
      ["user", "Fix the failing test"],
      ["assistant", "Let me look"],
      ["tool", "Runs the tests"],
    ]);
    const seen = Math.max(...mid.map((e) => e.rev));
    // Reported again unchanged (a recorder that reconnected): nothing moves.
    await store.upsertRuntime(sessionId, [text("Let me look")]);
    expect((await read(`?after_rev=${seen}`)).body).toEqual([]);

    await store.upsertRuntime(sessionId, [text("Let me look at it."), tool("completed", "1 passing")]);
    const changed = Transcript.parse((await read(`?after_rev=${seen}`)).body);
    expect(changed.map((e) => [e.seq, e.text, e.tool?.output ?? null])).toEqual([
      [mid[1]!.seq, "Let me look at it.", null],
      [mid[2]!.seq, "Runs the tests", "1 passing"],
    ]);
    expect(changed[0]!.at).toBe(at(1));
    expect(changed[1]!.tool).toEqual({
      name: "bash",
      status: "completed",
      input: { command: "npm test" },
      output: "1 passing",
      output_truncated: false,
    });
  });

  it("answers another account as if the session did not exist, and refuses a bad after_rev", async () => {
    const other = await read("", stack.bob.token);
    expect(other.status).toBe(403);
    expect(JSON.stringify(other.body)).not.toContain("Fix the failing test");
    const elsewhere = await read("", stack.bob.token, stack.bobProject);
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body.code).toBe("SESSION_NOT_FOUND");
    for (const bad of ["?after_rev=-1", "?after_rev=abc", "?since=1"]) {
      const res = await read(bad);
      expect(res.status, bad).toBe(400);
      expect(res.body.code).toBe("VALIDATION_FAILED");
    }
  });
});
