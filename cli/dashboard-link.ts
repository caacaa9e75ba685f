import { SignInLink } from "../protocol/dashboard.ts";
import { openBrowser } from "./browser.ts";
import type { Context } from "./context.ts";
import { info, printJson, printLine } from "./output.ts";

/**
 * `svc projects open`, `svc sessions open`: a one-time link that signs a browser in and lands on `next`, printed
 * on stdout (SSH and headless users open it elsewhere) and, at a terminal, opened with `$BROWSER` or `xdg-open`.
 */
export async function openDashboard(ctx: Context, next: string, opts: { json?: boolean }): Promise<void> {
  const { url } = await ctx.client.request("POST", "/dashboard/sign-in-links", SignInLink, { body: { next } });
  if (opts.json) return printJson({ url });
  printLine(url);
  if (process.stdout.isTTY && openBrowser(url)) info("opened it in your browser; the link works once, for two minutes");
}
