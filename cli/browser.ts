import { spawn, spawnSync } from "node:child_process";

/**
 * Opens `url` the way gh does: `$BROWSER` (split into words by the shell, so `BROWSER="firefox --new-tab"` works),
 * else `xdg-open` when it is installed. Returns false when there is nothing to open it with.
 */
export function openBrowser(url: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const command = env.BROWSER
    ? ["sh", "-c", 'exec $BROWSER "$0"', url]
    : spawnSync("sh", ["-c", "command -v xdg-open"], { stdio: "ignore" }).status === 0
      ? ["xdg-open", url]
      : undefined;
  if (!command) return false;
  const child = spawn(command[0]!, command.slice(1), { stdio: "ignore", detached: true, env });
  child.on("error", () => {});
  child.unref();
  return true;
}
