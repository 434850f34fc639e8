import type { Readable, Writable } from 'node:stream';

/**
 * Copies a child's output to ours a whole line at a time, so lines of several children never
 * interleave mid-line, and keeps the last few lines for error messages.
 */
export function forwardLines(from: Readable, to: Writable, keep = 20) {
  const tail: string[] = [];
  let partial = '';
  const emit = (line: string) => {
    to.write(line + '\n');
    tail.push(line);
    if (tail.length > keep) tail.shift();
  };
  from.setEncoding('utf8');
  from.on('data', (chunk: string) => {
    partial += chunk;
    let newline: number;
    while ((newline = partial.indexOf('\n')) >= 0) {
      emit(partial.slice(0, newline));
      partial = partial.slice(newline + 1);
    }
  });
  from.on('end', () => {
    if (partial) emit(partial);
    partial = '';
  });
  return { tail: () => [...tail] };
}
