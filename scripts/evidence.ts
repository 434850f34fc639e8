// A thin call of the CLI's command (apps/cli), kept so that `node scripts/evidence.ts` still works.
import '../apps/cli/src/commands/evidence.ts';
