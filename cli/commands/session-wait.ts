import type { Session } from "../../protocol/session.ts";
import { createSpinner } from "../spinner.ts";

const WAIT_TIMEOUT_MS = 180_000;
const POLL_MS = 250;

/**
 * Polls a provisioning session until it leaves `provisioning` (or three minutes pass). On a terminal, stderr shows
 * a spinner with what it is doing (`building image: step 2/5 RUN make`, `starting sandbox`, `cloning workspace`),
 * erased when it is done; in a pipe, nothing.
 */
export async function waitUntilRunning(session: Session, reload: () => Promise<Session>): Promise<Session> {
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
    while (s.status === "provisioning" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      s = await reload();
      show();
    }
    return s;
  } finally {
    spinner.stop();
  }
}
