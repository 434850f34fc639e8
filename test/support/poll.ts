export { pollUntil } from '../../scripts/lib/poll-until.ts';
