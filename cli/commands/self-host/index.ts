import { Command } from "commander";
import { parsePort, parsePositiveInt } from "../../flag-parsers.ts";
import { envList, envSet } from "./env.ts";
import { selfHostLogs } from "./logs.ts";
import { startSelfHost } from "./start.ts";
import { stopSelfHost } from "./stop.ts";

/** `svc self-host`: one verb a file beside this one, with the stack's state, process and health helpers. */
export function selfHostCommand(): Command {
  const selfHost = new Command("self-host").description("run the whole platform on this machine");
  selfHost
    .command("start")
    .description("start the local stack in the background and log in to it as host 'selfhost'")
    .option("--port <port>", "port the API listens on (default 7700, remembered)", parsePort)
    .action((opts: { port?: number }) => startSelfHost(opts));
  selfHost
    .command("stop")
    .description("stop the local stack")
    .action(() => stopSelfHost());
  selfHost
    .command("logs")
    .description("print the stack's logs")
    .argument("[service]", "service to show (api)")
    .option("-f, --follow", "keep printing new lines")
    .option("-n, --lines <n>", "lines to show", parsePositiveInt, 200)
    .action((service: string | undefined, opts: { follow?: boolean; lines: number }) => selfHostLogs(service, opts));
  const env = selfHost.command("env").description("persistent settings of the stack, applied at the next start");
  env
    .command("ls")
    .description("show the values, secrets masked")
    .option("--json", "output JSON")
    .action((opts: { json?: boolean }) => envList(opts));
  env
    .command("set")
    .description("set KEY=VALUE pairs (an empty value removes the key)")
    .argument("<pairs...>", "KEY=VALUE")
    .action((pairs: string[]) => envSet(pairs));
  return selfHost;
}
