const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/**
 * A one-line spinner on stderr while something is awaited. Only a terminal sees it: in a pipe or a log it would be
 * noise, so there it says nothing at all.
 */
export function createSpinner(stream: NodeJS.WriteStream = process.stderr) {
  let text = "";
  let frame = 0;
  let timer: NodeJS.Timeout | undefined;
  const draw = () => stream.write(`\r\x1b[K${FRAMES[frame++ % FRAMES.length]} ${text}`);
  return {
    update(next: string): void {
      if (!stream.isTTY) return;
      text = next;
      if (!timer) timer = setInterval(draw, 100);
      draw();
    },
    stop(): void {
      if (!timer) return;
      clearInterval(timer);
      timer = undefined;
      stream.write("\r\x1b[K");
    },
  };
}
