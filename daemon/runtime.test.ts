import { describe, expect, it } from "vitest";
import { createRuntimeSupervisor } from "./runtime.ts";

/** A runtime that boots and never serves: its state is all these tests read. */
const silent = () => ({ command: ["sleep", "30"], env: {}, cwd: "/", port: 1 });

describe("the runtime supervisor's standby: an agent that starts at its first use", () => {
  it("on standby nothing runs; a wake starts it, once, and a wait gives up after its time", async () => {
    const logged: string[] = [];
    const runtime = createRuntimeSupervisor(silent, (msg) => logged.push(msg));
    runtime.standBy();
    expect(runtime.status()).toMatchObject({ state: "standby", pid: null });

    const started = Date.now();
    await runtime.wake(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    const { state, pid } = runtime.status();
    expect(state).toBe("starting");
    expect(pid).toBeTypeOf("number");
    await runtime.wake();
    expect(runtime.status().pid).toBe(pid);
    expect(logged).toEqual(["the agent runtime starts at its first use"]);
    await runtime.stop();
    expect(runtime.status().state).toBe("stopped");
  });

  it("a restart (new environment, refreshed workspace) leaves a runtime on standby as it is", async () => {
    const runtime = createRuntimeSupervisor(silent, () => {});
    runtime.standBy();
    expect(await runtime.restart()).toBe(false);
    expect(runtime.status()).toMatchObject({ state: "standby", pid: null, restarts: 0 });
  });

  it("a runtime already started never goes on standby", async () => {
    const runtime = createRuntimeSupervisor(silent, () => {});
    runtime.start();
    runtime.standBy();
    expect(runtime.status().state).toBe("starting");
    await runtime.stop();
  });
});
