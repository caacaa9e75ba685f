import { existsSync, mkdtempSync, readFileSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { createProcessSpawner } from "./process-spawner.ts";

describe("the process spawner", () => {
  const spawner = createProcessSpawner();

  it("runs a command from its helper, not from this process: its input, directory, environment and exit code", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "svc-spawner-")));
    process.env.SVC_SPAWNER_INHERITED = "inherited";
    try {
      const result = await spawner.run({
        file: "sh",
        args: ["-c", 'cat; echo "$PPID $(pwd) $SET $SVC_SPAWNER_INHERITED"; echo oops >&2; exit 3'],
        cwd: dir,
        input: "from stdin\n",
        env: { SET: "set", SVC_SPAWNER_INHERITED: undefined },
      });
      const [input, line] = result.stdout.split("\n");
      expect(input).toBe("from stdin");
      const [ppid, cwd, set, inherited] = line!.split(" ");
      expect(Number(ppid)).not.toBe(process.pid);
      expect([cwd, set, inherited]).toEqual([dir, "set", ""]);
      expect(result.stderr).toBe("oops\n");
      expect(result.exitCode).toBe(3);
      expect(result.failure).toBeUndefined();
    } finally {
      delete process.env.SVC_SPAWNER_INHERITED;
    }
  });

  it("runs commands at once, each answered with its own output", async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => spawner.run({ file: "sh", args: ["-c", `sleep 0.0${i % 5}; echo ${i}`] })),
    );
    expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 20 }, (_, i) => `${i}\n`));
  });

  it("kills a command past its timeout or its output limit, and says which; a missing program is a failure", async () => {
    const slow = await spawner.run({ file: "sleep", args: ["5"], timeoutMs: 200 });
    expect(slow).toMatchObject({ exitCode: null, failure: "timed out after 200 ms" });
    const loud = await spawner.run({ file: "sh", args: ["-c", "yes | head -c 100000"], maxBuffer: 1000 });
    expect(loud).toMatchObject({ exitCode: null, failure: "output over 1000 bytes" });
    const missing = await spawner.run({ file: "svc-no-such-program", args: [] });
    expect(missing.exitCode).toBeNull();
    expect(missing.failure).toContain("ENOENT");
  });

  it("fails the commands of a helper that died and starts a new one for the next", async () => {
    const running = spawner.run({ file: "sh", args: ["-c", "kill -9 $PPID; sleep 5"] });
    expect((await running).failure).toMatch(/^the process spawner exited \(SIGKILL\)/);
    expect((await spawner.run({ file: "echo", args: ["again"] })).stdout).toBe("again\n");
  });

  it("streams a command's input and output on one socket, in a process group the caller ends whole", async () => {
    process.env.SVC_SPAWNER_SECRET = "secret";
    try {
      const child = await spawner.stream({
        file: "sh",
        args: ["-c", 'echo "$SET$SVC_SPAWNER_SECRET"; wc -l; echo oops >&2'],
        env: { SET: "only this", PATH: process.env.PATH },
        extendEnv: false,
      });
      const out: Buffer[] = [];
      child.stdio.on("data", (chunk: Buffer) => out.push(chunk));
      child.stdio.end("one\ntwo\n");
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk;
      });
      const closed = new Promise((r) => child.stdio.once("close", r));
      expect(await child.exited).toBe(0);
      await closed;
      expect(Buffer.concat(out).toString()).toBe("only this\n2\n");
      expect(stderr).toBe("oops\n");
    } finally {
      delete process.env.SVC_SPAWNER_SECRET;
    }
    const group = await spawner.stream({ file: "sh", args: ["-c", "sleep 30 & echo $!; wait"] });
    const grandchild = Number(
      await new Promise<string>((r) => group.stdio.once("data", (d: Buffer) => r(d.toString()))),
    );
    group.killGroup();
    expect(await group.exited).toBeNull();
    // Dead: gone, or a zombie until whoever adopted it reaps it.
    const state = () =>
      existsSync(`/proc/${grandchild}/stat`) ? readFileSync(`/proc/${grandchild}/stat`, "utf8") : "";
    await expect.poll(() => /^\d+ \(sleep\) [^Z]/.test(state())).toBe(false);
    await expect(spawner.stream({ file: "svc-no-such-program", args: [] })).rejects.toThrow("ENOENT");
  });

  it("delivers what a streaming command writes before the caller has its socket, however busy the caller is", async () => {
    // git http-backend writes its headers before it reads the request: a caller busy elsewhere takes the socket
    // only later, and every byte written until then must still reach it.
    const children = Array.from({ length: 8 }, () => spawner.stream({ file: "sh", args: ["-c", "echo early; cat"] }));
    const busyUntil = Date.now() + 300;
    while (Date.now() < busyUntil) {
      // The caller's event loop is held: the helper's answers wait in the channel.
    }
    const outputs = await Promise.all(
      children.map(async (pending) => {
        const child = await pending;
        const out: Buffer[] = [];
        child.stdio.on("data", (chunk: Buffer) => out.push(chunk));
        const closed = new Promise((r) => child.stdio.once("close", r));
        child.stdio.end("late\n");
        await child.exited;
        await closed;
        return Buffer.concat(out).toString();
      }),
    );
    expect(outputs).toEqual(Array.from({ length: 8 }, () => "early\nlate\n"));
  });

  it("starts no command it reads after its caller died", async () => {
    const marker = join(realpathSync(mkdtempSync(join(tmpdir(), "svc-spawner-"))), "ran");
    // The caller stops its helper, sends a command, dies; the helper, continued, reads the command too late.
    const script = `import { createProcessSpawner } from "./orchestrator/process-spawner.ts";
      const spawner = createProcessSpawner();
      const helper = Number((await spawner.run({ file: "sh", args: ["-c", "echo $PPID"] })).stdout);
      console.log(helper);
      process.kill(helper, "SIGSTOP");
      void spawner.run({ file: "touch", args: [${JSON.stringify(marker)}] });
      setTimeout(() => process.kill(process.pid, "SIGKILL"), 200);`;
    const caller = await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: new URL("..", import.meta.url).pathname,
      reject: false,
      timeout: 20_000,
      // The helper inherits its caller's stderr: the caller's end would wait for the stopped helper.
      stderr: "ignore",
    });
    expect(caller.signal).toBe("SIGKILL");
    const helper = Number(caller.stdout.trim());
    process.kill(helper, "SIGCONT");
    await expect
      .poll(
        () =>
          existsSync(`/proc/${helper}/stat`) && !/^\d+ \(\S+\) Z/.test(readFileSync(`/proc/${helper}/stat`, "utf8")),
      )
      .toBe(false);
    expect(existsSync(marker)).toBe(false);
  });

  it("ends the commands still running when its caller dies: a merge's ref write never lands after it", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), "svc-spawner-")));
    const marker = join(dir, "ran");
    const started = join(dir, "started");
    const script = `import { createProcessSpawner } from "./orchestrator/process-spawner.ts";
      void createProcessSpawner().run({ file: "sh", args: ["-c", ${JSON.stringify(`touch ${started}; sleep 1.5; touch ${marker}`)}] });
      setInterval(() => {}, 1000);`;
    const caller = execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: new URL("..", import.meta.url).pathname,
      reject: false,
      timeout: 20_000,
      stderr: "ignore",
    });
    await expect.poll(() => existsSync(started), { timeout: 15_000 }).toBe(true);
    caller.kill("SIGKILL");
    await caller;
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(existsSync(marker)).toBe(false);
  });

  it("keeps its process alive while a command runs and not after: a script that awaits one prints and exits", async () => {
    const script = `import { createProcessSpawner } from "./orchestrator/process-spawner.ts";
      createProcessSpawner().run({ file: "sh", args: ["-c", "sleep 0.3; echo done"] }).then((r) => process.stdout.write(r.stdout));`;
    const ran = await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: new URL("..", import.meta.url).pathname,
      timeout: 20_000,
    });
    expect(ran.stdout).toBe("done");
  });
});
