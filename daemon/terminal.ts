import { execFile } from "node:child_process";
import { readdir, readFile, readlink } from "node:fs/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

/** How long a resize waits for the terminal's command to exist (script forks it a moment after starting). */
const FIND_MS = 2000;

const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

/**
 * A command under a pseudo-terminal without a PTY library (none may download binaries): util-linux `script`, in
 * every Debian image, runs it on a fresh pts. Its size is set inside, before the command, as no option of script
 * sets one. script runs the line with $SHELL, so SHELL is pinned to /bin/sh for script and given back to the
 * command as it was.
 */
export function terminalCommand(
  cmd: string[],
  options: { cols?: number; rows?: number; shell: string | undefined },
): { argv: string[]; env: Record<string, string> } {
  const size = options.cols && options.rows ? `stty cols ${options.cols} rows ${options.rows} && ` : "";
  const shell = options.shell === undefined ? "unset SHELL; " : `SHELL=${quote(options.shell)}; export SHELL; `;
  return {
    argv: ["script", "-qfec", `${shell}${size}exec ${cmd.map(quote).join(" ")}`, "/dev/null"],
    env: { SHELL: "/bin/sh" },
  };
}

/** The processes whose parent is `pid`: the kernel's list when it keeps one, else a walk of /proc. */
async function childrenOf(pid: number): Promise<number[]> {
  const listed = await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => undefined);
  if (listed !== undefined) return listed.split(/\s+/).filter(Boolean).map(Number);
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // The command name, in parentheses, may hold spaces: the parent's pid is the second field after it.
    const ppid = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1];
    if (Number(ppid) === pid) found.push(Number(entry));
  }
  return found;
}

/** script's child, the terminal's session leader, and its pts once it has them; undefined after FIND_MS. */
async function terminalOf(scriptPid: number): Promise<{ pid: number; pts: string } | undefined> {
  const deadline = Date.now() + FIND_MS;
  for (;;) {
    for (const pid of await childrenOf(scriptPid)) {
      const pts = await readlink(`/proc/${pid}/fd/0`).catch(() => "");
      if (/^\/dev\/pts\/\d+$/.test(pts)) return { pid, pts };
    }
    if (Date.now() > deadline) return undefined;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * What the daemon does to a running terminal. Resizing sets the pts's size from outside (`stty -F`): the kernel then
 * signals SIGWINCH to the terminal's foreground process group itself, which is the right group even when a shell
 * has put a job in front; one sent by hand would go to the wrong group then, so none is. Hanging up sends SIGHUP to
 * the session leader's group, as a terminal's hangup does; script ends with its child.
 */
export function terminalControl(scriptPid: number) {
  let found: Promise<{ pid: number; pts: string } | undefined> | undefined;
  const terminal = () => {
    found ??= terminalOf(scriptPid).then((t) => {
      if (!t) found = undefined;
      return t;
    });
    return found;
  };
  // One resize at a time: the last size asked for is the one the terminal keeps.
  let resizing: Promise<void> = Promise.resolve();
  return {
    resize(cols: number, rows: number): Promise<void> {
      resizing = resizing.then(async () => {
        const t = await terminal();
        if (t) await run("stty", ["-F", t.pts, "cols", String(cols), "rows", String(rows)]).catch(() => {});
      });
      return resizing;
    },
    async hangUp(): Promise<void> {
      const t = await terminal();
      try {
        if (t) process.kill(-t.pid, "SIGHUP");
        else process.kill(scriptPid, "SIGTERM");
      } catch {}
    },
  };
}
