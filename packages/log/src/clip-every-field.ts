import type { Logger } from './create-logger.ts';
import { clipInput } from './clip-input.ts';

/**
 * A view of `logger` for call sites whose every field may quote request input, such as an
 * SDK's error messages: each string field of each line goes through clipInput. Built the way
 * winston's own `child()` is (an object over the logger with its own `write`), so levels,
 * format and transports stay the logger's.
 */
export function clipEveryField(logger: Logger): Logger {
  return Object.create(logger, {
    write: {
      value(info: Record<string, unknown>) {
        const clipped: Record<string, unknown> = { ...info }; // keeps winston's symbol keys
        for (const [key, value] of Object.entries(clipped)) {
          if (key !== 'level' && typeof value === 'string') clipped[key] = clipInput(value);
        }
        return logger.write(clipped);
      },
    },
  }) as Logger;
}
