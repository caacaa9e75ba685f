import { execa } from "execa";
import { BIN, type CliEnv } from "./cli.ts";

// Cursor moves and line clears readline writes: what a person sees is the text between them.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters being removed
const CONTROL = /\u001b\[[0-9;?]*[A-Za-z]/g;

/**
 * The real `svc` binary on a pseudo-terminal (util-linux `script`), driven as a person would: wait for a
 * question to appear, type an answer, press Enter. Keystrokes go through the terminal's line discipline, so
 * echo (or its absence, for secrets) is what a screen would show.
 */
export function svcPty(args: string[], options: { env?: CliEnv; cwd?: string; timeoutMs?: number } = {}) {
  const command = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const child = execa("script", ["-qfec", command, "/dev/null"], {
    env: options.env,
    extendEnv: true,
    cwd: options.cwd,
    reject: false,
    stdin: "pipe",
    timeout: options.timeoutMs ?? 90_000,
  });
  let raw = "";
  let seen = 0;
  let ended = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const check of waiters) check();
  };
  child.stdout?.on("data", (chunk: Buffer) => {
    raw += chunk.toString("utf8");
    wake();
  });
  void child.then(() => {
    ended = true;
    wake();
  });
  const screen = () => raw.replace(CONTROL, "").replace(/\r/g, "");

  return {
    /** Everything shown so far, control sequences removed. */
    screen,
    /** Waits until `text` appears after what was awaited before; fails with the screen so far. */
    expect(text: string, timeoutMs = 20_000): Promise<void> {
      return new Promise((resolve, reject) => {
        const fail = (why: string) => {
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(`${why} ${JSON.stringify(text)}; the terminal shows:\n${screen().slice(-1500)}`));
        };
        const timer = setTimeout(() => fail("did not see"), timeoutMs);
        function check() {
          const at = screen().indexOf(text, seen);
          if (at >= 0) {
            seen = at + text.length;
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          } else if (ended) fail("the command ended without showing");
        }
        waiters.add(check);
        check();
      });
    },
    /** Types `text` and presses Enter (a terminal sends CR). */
    answer(text = ""): void {
      child.stdin?.write(`${text}\r`);
    },
    /** Raw keystrokes, e.g. Ctrl-C as "\u0003". */
    type(keys: string): void {
      child.stdin?.write(keys);
    },
    async exit(): Promise<{ code: number; screen: string }> {
      const result = await child;
      return { code: result.exitCode ?? -1, screen: screen() };
    },
  };
}
