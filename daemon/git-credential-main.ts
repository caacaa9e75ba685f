import { gitCredentialHelper } from "./git-credential.ts";

// The workspace's git credential helper (workspace.ts), a program of its own: git runs it for every fetch and push
// that needs the project's credential, and loading the whole daemon for that cost 0.114 CPU-s a run against 0.075.
process.exitCode = await gitCredentialHelper(process.argv[2], process.env);
