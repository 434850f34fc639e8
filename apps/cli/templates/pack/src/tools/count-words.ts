import { defineTool } from '@mtg/tool-kit';
import { z } from 'zod';

/** An instant tool: answered at once, no task. */
export const countWords = () =>
  defineTool({
    name: 'count_words',
    title: 'Count words',
    description: 'Counts the words of a text.',
    input: z.object({ text: z.string().max(100_000) }),
    output: z.object({ words: z.number() }),
    scope: 'notes:write',
    async run(_ctx, { text }) {
      return { words: text.split(/\s+/).filter(Boolean).length };
    },
  });
