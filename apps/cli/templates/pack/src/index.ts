import { definePack } from '@mtg/tool-kit';
import { config } from './config.ts';
import { countWords } from './tools/count-words.ts';
import { importNotes } from './tools/import-notes.ts';

export default definePack({
  name: '__NAME__',
  version: '0.1.0',
  config,
  // The downstream systems the tools call (ctx.target). `downstream` is the dev stack's demo
  // system; in production each target is an entry of TARGETS_FILE (deploy/targets.yaml).
  targets: ['downstream'],
  tools: (c) => [countWords(), importNotes(c)],
});
