import { describe, expect, it } from "vitest";
import { createEvents } from "./events.ts";

const session = (sessionId: string) => ({ projectId: "p", sessionId, status: "running", progress: null }) as const;

describe("the events hub", () => {
  it("calls each listener of a name, in the order they subscribed, until it unsubscribes", () => {
    const events = createEvents(() => {});
    const heard: string[] = [];
    const offA = events.on("session.changed", (e) => void heard.push(`a:${e.sessionId}`));
    events.on("session.changed", (e) => void heard.push(`b:${e.sessionId}`));
    events.on("repo.pushed", (e) => void heard.push(`push:${e.projectId}`));
    events.emit("session.changed", session("1"));
    offA();
    events.emit("session.changed", session("2"));
    events.emit("repo.fetched", { projectId: "nobody listens" });
    expect(heard).toEqual(["a:1", "b:1", "b:2"]);
  });

  it("logs a listener that throws or rejects, and the emitter and the other listeners go on", async () => {
    const logged: unknown[] = [];
    const events = createEvents((msg, extra) => logged.push({ msg, ...extra }));
    const heard: string[] = [];
    events.on("repo.pushed", () => {
      throw new Error("boom");
    });
    events.on("repo.pushed", async () => {
      throw new Error("later");
    });
    events.on("repo.pushed", (e) => void heard.push(e.projectId));
    expect(() => events.emit("repo.pushed", { projectId: "p" })).not.toThrow();
    await new Promise((r) => setImmediate(r));
    expect(heard).toEqual(["p"]);
    expect(logged).toEqual([
      { msg: "event listener failed", event: "repo.pushed", error: "Error: boom" },
      { msg: "event listener failed", event: "repo.pushed", error: "Error: later" },
    ]);
  });

  it("lets a listener unsubscribe while it is called", () => {
    const events = createEvents(() => {});
    let calls = 0;
    const off = events.on("repo.pushed", () => {
      calls += 1;
      off();
    });
    events.emit("repo.pushed", { projectId: "p" });
    events.emit("repo.pushed", { projectId: "p" });
    expect(calls).toBe(1);
  });
});
