/**
 * The host firewall for sandboxes: which ports of the host they reach, and the iptables chain that closes the rest.
 * Shared by the two programs that install it, each with its own way of running iptables: the API on the host
 * (embedded mode, sandboxes told apart by their bridges) and the CLI for a stack in containers (compose mode,
 * sandboxes told apart by their source addresses).
 */

/** Runs iptables with these arguments; resolves with how it went, never rejects on a failure. */
export type IptablesRun = (args: string[]) => Promise<{ exitCode: number; stdout: string; stderr: string }>;

/** The installation's chain: iptables names are short (28 characters), a uuid's first 12 hex digits suffice. */
export const firewallChain = (installationId: string) => `SVC-${installationId.replace(/-/g, "").slice(0, 12)}`;

/** A loopback URL on the host means the host as the sandbox sees it. */
export function hostUrlForSandbox(url: string, hostAlias: string): string {
  try {
    const parsed = new URL(url);
    if (["127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"].includes(parsed.hostname)) {
      parsed.hostname = hostAlias;
      return parsed.toString().replace(/\/$/, url.endsWith("/") ? "/" : "");
    }
  } catch {}
  return url;
}

/** The host's ports among these URLs as a sandbox has them (the API's origin, the model gateway): those on the host. */
export function hostPortsOf(urls: (string | undefined)[], hostAlias: string): number[] {
  const ports = urls.flatMap((url) => {
    if (!url) return [];
    const parsed = new URL(hostUrlForSandbox(url, hostAlias));
    if (parsed.hostname !== hostAlias) return [];
    return [Number(parsed.port || (parsed.protocol === "https:" ? 443 : 80))];
  });
  return [...new Set(ports)];
}

const holderTag = (holder: string) => `svc-holder:${holder}`;
const ESTABLISHED = ["-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"];

/** `iptables -S` prints rules as `-A <chain> <spec>`, comments quoted; none of ours holds a space. */
const tokensOf = (rule: string) => rule.split(" ").map((t) => t.replace(/^"(.*)"$/, "$1"));

/**
 * The host's INPUT filter for sandboxes: what a sandbox sends to any address of the host enters INPUT, so one chain,
 * jumped to from INPUT for what identifies the sandboxes (their bridges, or their source addresses), decides. The
 * chain accepts answers to connections the host opened (the API calling a daemon), then each holder's ports (every
 * process that shares the chain adds its own, tagged as its holder, and removes them when it stops), and drops the
 * rest.
 */
export function createHostFirewall(deps: { run: IptablesRun }) {
  const { run } = deps;

  async function must(args: string[]): Promise<string> {
    const result = await run(args);
    if (result.exitCode !== 0) {
      throw new Error(`iptables ${args.join(" ")} failed: ${(result.stderr || result.stdout).trim()}`);
    }
    return result.stdout;
  }

  const exists = async (args: string[]) => (await run(["-C", ...args])).exitCode === 0;

  async function dropHolder(chain: string, holder: string): Promise<void> {
    const listed = await run(["-S", chain]);
    if (listed.exitCode !== 0) return;
    for (const rule of listed.stdout.split("\n")) {
      const tokens = tokensOf(rule.trim());
      if (tokens[0] === "-A" && tokens.includes(holderTag(holder))) await must(["-D", ...tokens.slice(1)]);
    }
  }

  return {
    /** Opens `ports` to the chain's sandboxes for `holder` (replacing what it opened before), closing everything else. */
    async open(chain: string, holder: string, ports: number[]): Promise<void> {
      // Exists already (exit 1) when another process of the installation made it.
      await run(["-N", chain]);
      if (!(await exists([chain, ...ESTABLISHED]))) await must(["-I", chain, "1", ...ESTABLISHED]);
      if (!(await exists([chain, "-j", "DROP"]))) await must(["-A", chain, "-j", "DROP"]);
      await dropHolder(chain, holder);
      for (const port of new Set(ports)) {
        await must([
          "-I",
          chain,
          "2",
          ...["-p", "tcp", "--dport", String(port)],
          ...["-m", "comment", "--comment", holderTag(holder)],
          ...["-j", "ACCEPT"],
        ]);
      }
    },

    /**
     * Puts the traffic to the host that `match` selects (`-i <bridge>`, `-s <subnet>`) under the chain, ahead of any
     * rule that would accept it.
     */
    async cover(chain: string, match: string[]): Promise<void> {
      if (!(await exists(["INPUT", ...match, "-j", chain]))) await must(["-I", "INPUT", "1", ...match, "-j", chain]);
    },

    /** Closes `holder`'s ports; the last holder out removes the chain and its jumps. True when the chain is gone. */
    async close(chain: string, holder: string): Promise<boolean> {
      await dropHolder(chain, holder);
      const listed = await run(["-S", chain]);
      if (listed.exitCode !== 0) return true;
      if (listed.stdout.includes(holderTag(""))) return false;
      for (const rule of (await must(["-S", "INPUT"])).split("\n")) {
        const tokens = tokensOf(rule.trim());
        if (tokens[0] === "-A" && tokens.at(-1) === chain && tokens.at(-2) === "-j")
          await must(["-D", ...tokens.slice(1)]);
      }
      await must(["-F", chain]);
      await must(["-X", chain]);
      return true;
    },
  };
}

export type HostFirewall = ReturnType<typeof createHostFirewall>;
