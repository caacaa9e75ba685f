import { describe, expect, it } from "vitest";
import type { Session } from "../../protocol/session.ts";
import { type SessionWait, waitUntilRunning } from "./session-wait.ts";

const base: Session = {
  session_id: "0b7c1f8e-0000-4000-8000-000000000000",
  project_id: "0b7c1f8e-0000-4000-8000-000000000001",
  status: "provisioning",
  branch: "0b7c1f8e-0000-4000-8000-000000000000",
  base_ref: "main",
  agent_name: "build",
  agent_model: null,
  sandbox_url: null,
  error: null,
  progress: null,
  created_by: "0b7c1f8e-0000-4000-8000-000000000002",
  trigger: null,
  created_at: "2025-01-01T00:00:00.000Z",
  updated_at: "2025-01-01T00:00:00.000Z",
};

describe("svc sessions new, waiting for its session", () => {
  it("asks the API to wait, telling it the progress it shows, until the session runs", async () => {
    const answers: Session[] = [
      { ...base, progress: "starting sandbox" },
      { ...base, progress: "cloning workspace" },
      { ...base, status: "running", progress: null },
    ];
    const asked: SessionWait[] = [];
    const final = await waitUntilRunning(base, async (query) => {
      asked.push(query);
      return answers.shift()!;
    });
    expect(final.status).toBe("running");
    expect(asked).toEqual([
      { wait_for: "running", timeout_s: "30", progress: "" },
      { wait_for: "running", timeout_s: "30", progress: "starting sandbox" },
      { wait_for: "running", timeout_s: "30", progress: "cloning workspace" },
    ]);
  });

  it("does not spin on an API that answers at once with nothing new (one that predates wait_for)", async () => {
    let reads = 0;
    const started = Date.now();
    const final = await waitUntilRunning(base, async () => {
      reads += 1;
      return reads < 4 ? base : { ...base, status: "failed", error: "no image" };
    });
    expect(final.status).toBe("failed");
    expect(reads).toBe(4);
    // Three unchanged answers, each followed by the least pause between reads (250 ms).
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
  });
});
