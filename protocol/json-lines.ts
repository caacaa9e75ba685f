/**
 * The lines of a JSON-lines body (`application/x-ndjson`), as they arrive; empty lines are skipped, and so is a
 * last line without its newline (a stream cut in the middle of a record).
 */
export async function* textLines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let partial = "";
  for await (const chunk of chunks) {
    const lines = (partial + decoder.decode(chunk, { stream: true })).split("\n");
    partial = lines.pop()!;
    for (const line of lines) if (line) yield line;
  }
}
