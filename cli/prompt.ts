import { createInterface } from "node:readline";

/** Ctrl-C or Ctrl-D at a question: the person wants out, not an empty answer. */
export class Interrupted extends Error {}

/** Whether questions can be asked: someone types on stdin and reads stderr. */
export const interactive = () => Boolean(process.stdin.isTTY && process.stderr.isTTY);

/** One line typed at the terminal, echoed and editable as usual; the prompt goes to stderr (stdout is data). */
export function ask(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  return new Promise((resolve, reject) => {
    let answered = false;
    rl.on("SIGINT", () => {
      answered = true;
      rl.close();
      process.stderr.write("\n");
      reject(new Interrupted());
    });
    rl.on("close", () => {
      if (!answered) reject(new Interrupted());
    });
    rl.question(question, (answer) => {
      answered = true;
      rl.close();
      resolve(answer.trim());
    });
  });
}

/** Everything piped into stdin, less the one line ending `echo` adds. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

/**
 * One line typed without echo, for secrets: the terminal in raw mode, so nothing of the value reaches the screen,
 * a scrollback or a screen recording. Backspace and Ctrl-U edit; escape sequences (arrows) are ignored. `trim`
 * (default): blanks around the value go; a password keeps them (`{ trim: false }`), every character counts.
 */
export function askSecret(question: string, options: { trim?: boolean } = {}): Promise<string> {
  const { stdin, stderr } = process;
  // Raw (no echo) before the question shows: an answer typed as soon as it appears must not be echoed.
  stdin.setRawMode(true);
  stderr.write(question);
  stdin.setEncoding("utf8");
  stdin.resume();
  let value = "";
  let inSequence = false;
  return new Promise((resolve, reject) => {
    const finish = () => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      stderr.write("\n");
    };
    function onData(chunk: string) {
      for (const ch of chunk) {
        if (inSequence) {
          // A CSI sequence ends with a letter or '~'.
          if (/[A-Za-z~]/.test(ch)) inSequence = false;
          continue;
        }
        if (ch === "\r" || ch === "\n") {
          finish();
          resolve(options.trim === false ? value : value.trim());
          return;
        }
        if (ch === "\u0003" || (ch === "\u0004" && value === "")) {
          finish();
          reject(new Interrupted());
          return;
        }
        if (ch === "\u001b") inSequence = true;
        else if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
        else if (ch === "\u0015") value = "";
        else if (ch >= " ") value += ch;
      }
    }
    stdin.on("data", onData);
  });
}
