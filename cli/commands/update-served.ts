import { spawnSync } from "node:child_process";
import { dirname } from "node:path";
import { readCliEnv } from "../config.ts";
import { CliError } from "../errors.ts";
import { failureReason, type HttpAnswer, httpRequest } from "../http-client.ts";
import { readInstallRecord, type ServedRecord } from "../installation.ts";
import { info, printJson } from "../output.ts";

const FETCH_TIMEOUT_MS = 30_000;

async function fetchScript(record: ServedRecord, kept: string): Promise<string> {
  let res: HttpAnswer;
  try {
    res = await httpRequest(record.script, { timeoutMs: FETCH_TIMEOUT_MS });
  } catch (err) {
    throw new CliError(`cannot reach ${record.script} (${failureReason(err)}); ${kept}`);
  }
  if (!res.ok) throw new CliError(`${record.script} answered HTTP ${res.status}; ${kept}`);
  return res.text();
}

/**
 * `svc update` on an installation made by a served script: the same script, fetched again from the host that
 * served it, run with the same prefix, shim directory and node. The script replaces the file in one rename only
 * after its checksum and a run of it passed, so a failure leaves the installed CLI as it was.
 */
export async function updateServed(record: ServedRecord, home: string, options: { json?: boolean }): Promise<void> {
  const kept = `svc ${record.version} stays installed at ${record.binary}`;
  info(`fetching ${record.script}…`);
  const script = await fetchScript(record, kept);
  const env = {
    ...process.env,
    PATH: `${dirname(record.node)}:${process.env.PATH ?? ""}`,
    SVC_HOME: home,
    SVC_PREFIX: record.prefix,
    SVC_BIN_DIR: readCliEnv().binDir ?? dirname(record.shim),
  };
  const run = spawnSync("bash", ["-s"], { input: script, stdio: ["pipe", 2, 2], env });
  const code = run.status ?? 1;
  if (code !== 0) throw new CliError(`the install script from ${record.origin} failed (exit ${code}); ${kept}`);

  const now = readInstallRecord(home);
  if (now?.kind !== "served") throw new CliError(`the install script from ${record.origin} left no record in ${home}`);
  const changed = now.sha256 !== record.sha256;
  if (options.json) {
    printJson({
      kind: "served",
      origin: now.origin,
      from: record.version,
      to: now.version,
      changed,
      binary: now.binary,
    });
    return;
  }
  const moved = changed ? `${record.version} → ${now.version}` : `${now.version}, already the newest`;
  info(`✓ svc updated from ${now.origin} (${moved})`);
}
