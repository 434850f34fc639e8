import { randomBytes } from 'node:crypto';

/** 128 random bits, lowercase hex: usable in resource names (`env-<taskId>`). */
export function newTaskId(random: (n: number) => Buffer = randomBytes): string {
  return random(16).toString('hex');
}

export const TASK_ID = /^[0-9a-f]{32}$/;
