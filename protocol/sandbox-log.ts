/**
 * A sandbox's own log (what its PID 1 wrote), kept inside the sandbox by its log keeper (daemon/log-keeper.ts) and
 * served by its daemon at DAEMON_LOGS_PATH (query: protocol/sandbox-access.ts's LogsQuery; answer: JSON lines of
 * SandboxLogLine), so `svc sessions logs` reaches it over the daemon's link like every other request.
 */
export const SANDBOX_LOG_DIR = "/var/log/svc";
/** The current file; the one before it is `<file>.1`. */
export const SANDBOX_LOG_FILE = "log.jsonl";
export const DAEMON_LOGS_PATH = "/svc/logs";
