// A thin call of the CLI's command (apps/cli), kept so that `node scripts/start.ts` still works.
import '../apps/cli/src/commands/start.ts';
