import type { Session } from "../../protocol/session.ts";

const WAIT_TIMEOUT_MS = 180_000;
const POLL_MS = 250;
const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/**
 * Polls a provisioning session until it leaves `provisioning` (or three minutes pass). On a terminal, stderr shows
 * a spinner with what it is doing (`building image: step 2/5 RUN make`, `starting sandbox`, `cloning workspace`),
 * erased when it is done; in a pipe, nothing.
 */
export async function waitUntilRunning(session: Session, reload: () => Promise<Session>): Promise<Session> {
  const tty = Boolean(process.stderr.isTTY);
  let s = session;
  let frame = 0;
  const draw = () => {
    const width = process.stderr.columns || 80;
    const text = `${SPINNER[frame++ % SPINNER.length]} session ${s.session_id.slice(0, 8)}: ${s.progress ?? s.status}`;
    process.stderr.write(`\r\u001b[2K${text.slice(0, width - 1)}`);
  };
  const spinner = tty ? setInterval(draw, 100) : undefined;
  try {
    if (tty) draw();
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    while (s.status === "provisioning" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      s = await reload();
    }
    return s;
  } finally {
    clearInterval(spinner);
    if (tty) process.stderr.write("\r\u001b[2K");
  }
}
