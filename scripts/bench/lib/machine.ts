import os from 'node:os';
import pg from 'pg';

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGb: number;
  node: string;
  postgres: string;
  postgresSettings: string;
  os: string;
}

export async function machineInfo(databaseUrl: string): Promise<MachineInfo> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const version = (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]!
      .server_version;
    const settings = await client.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings
        WHERE name IN ('autovacuum', 'max_connections', 'shared_buffers', 'fsync', 'synchronous_commit') ORDER BY name`,
    );
    return {
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.cpus().length,
      memoryGb: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      postgres: version,
      postgresSettings: settings.rows
        .map(
          (s) =>
            `${s.name}=${s.unit === '8kB' ? `${(Number(s.setting) * 8) / 1024}MB` : s.setting}`,
        )
        .join(', '),
      os: `${os.type()} ${os.release()}`,
    };
  } finally {
    await client.end();
  }
}
