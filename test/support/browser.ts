import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

export const CHROMIUM = process.env.SVC_CHROMIUM ?? "/usr/bin/chromium";

/** Debian's Chromium (scripts/setup.sh chromium): missing, the suite fails; it never skips. */
export async function requireChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is required (run scripts/setup.sh chromium): no ${CHROMIUM}`);
  return chromium.launch({ executablePath: CHROMIUM, args: ["--no-proxy-server"] });
}
