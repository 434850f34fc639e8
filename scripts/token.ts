// A thin call of the CLI's command (apps/cli), kept so that `node scripts/token.ts` still works.
import '../apps/cli/src/commands/token.ts';
