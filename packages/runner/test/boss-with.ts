import type { PgBoss } from 'pg-boss';

/** The real pg-boss with one method replaced (to count or time its calls); the rest its own. */
export function bossWith<K extends keyof PgBoss>(boss: PgBoss, name: K, method: PgBoss[K]): PgBoss {
  return new Proxy(boss, {
    get(target, prop, receiver) {
      if (prop === name) return method;
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
