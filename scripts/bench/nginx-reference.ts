import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * nginx as a same-run reference proxy, when the machine has it (`apt-get install nginx-light`): it shows how
 * much of the gap to direct throughput any user-space proxy pays for the second TCP hop on this machine.
 */
export function startNginxReference(listenPort: number, upstreamPort: number): { stop(): void } | undefined {
  try {
    execFileSync("nginx", ["-v"], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-nginx-"));
  const conf = join(dir, "nginx.conf");
  writeFileSync(
    conf,
    `daemon off; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log;
events { worker_connections 1024; }
http {
  access_log off; client_body_temp_path ${dir}; proxy_temp_path ${dir};
  upstream app { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${listenPort};
    location /proxy/${upstreamPort}/ { proxy_pass http://app/; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`,
  );
  const child = spawn("nginx", ["-c", conf, "-p", dir], { stdio: "ignore" });
  return { stop: () => child.kill("SIGKILL") };
}
