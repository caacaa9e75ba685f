import { type Session, STARTING_STATUSES } from "../../protocol/session.ts";
import { createSpinner } from "../spinner.ts";

const WAIT_TIMEOUT_MS = 180_000;
/** How long one read may wait on the API; it answers as soon as the session starts or its progress changes. */
const READ_WAIT_S = 30;
/** The least time between two reads that saw nothing change: an API that predates `wait_for` answers at once. */
const MIN_READ_MS = 250;

/** The query of a read that waits until the session starts or its progress is no longer `progress` shows. */
export type SessionWait = { wait_for: "running"; timeout_s: string; progress: string };

/**
 * Waits until a starting session runs (or fails, or three minutes pass), each read held by the API until the
 * session changes (`?wait_for=running`, protocol/session.ts). On a terminal, stderr shows a spinner with what it is
 * doing (`building image: step 2/5 RUN make`, `starting sandbox`, `cloning workspace`): the read also answers when
 * that line changes, so each step shows as it starts. Erased when done; in a pipe, nothing.
 */
export async function waitUntilRunning(
  session: Session,
  read: (query: SessionWait) => Promise<Session>,
): Promise<Session> {
  const spinner = createSpinner();
  let s = session;
  // One line, or the spinner's redraw would leave the wrapped rest behind.
  const show = () => {
    const text = `session ${s.session_id.slice(0, 8)}: ${s.progress ?? s.status}`;
    spinner.update(text.slice(0, (process.stderr.columns || 80) - 3));
  };
  try {
    show();
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    while (STARTING_STATUSES.includes(s.status) && Date.now() < deadline) {
      const asked = Date.now();
      const seen = s;
      const waitS = Math.max(1, Math.min(READ_WAIT_S, Math.ceil((deadline - asked) / 1000)));
      s = await read({ wait_for: "running", timeout_s: String(waitS), progress: seen.progress ?? "" });
      show();
      if (s.status === seen.status && s.progress === seen.progress)
        await new Promise((r) => setTimeout(r, MIN_READ_MS - (Date.now() - asked)));
    }
    return s;
  } finally {
    spinner.stop();
  }
}
