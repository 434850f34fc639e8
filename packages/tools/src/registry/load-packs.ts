import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { isPack, type Pack } from '@mtg/tool-kit';
import type { ToolLimitsOverrides } from '../tool-limits-config.ts';
import { createRegistry, type LoadedPack, type ToolRegistry } from './create-registry.ts';
import {
  checkKitCompatibility,
  hostKitVersion,
  packageNameOf,
  resolvePackageFile,
} from './kit-compat.ts';
import { RegistryError } from './registry-error.ts';

/** The pack `npm start` and every process load when TOOL_PACKS is unset. */
export const DEFAULT_TOOL_PACKS = ['@mtg/demo-tools'];

export interface LoadOptions {
  /** TOOL_PACKS: package names or paths (relative to `baseDir`). */
  packs: readonly string[];
  /** Where each pack's configuration is read from (the process environment). */
  env: Record<string, string | undefined>;
  /** Paths in `packs` resolve against this directory (the process's working directory). */
  baseDir?: string;
  limits?: ToolLimitsOverrides;
  /** The module loader; the default is the runtime's dynamic import. */
  importModule?: (specifier: string) => Promise<Record<string, unknown>>;
  /** Where a pack loaded without a kit compatibility check is reported (default: a process warning). */
  warn?: (message: string) => void;
}

/**
 * Loads each pack once and builds the registry. A pack that cannot be found or loaded, one
 * whose package.json asks for a tool kit this process does not serve (checked before its
 * code runs), a module that exports no pack, a configuration value its schema refuses and a
 * tool name two packs define all throw a RegistryError naming the pack (and the variable).
 */
export async function loadToolRegistry(options: LoadOptions): Promise<ToolRegistry> {
  const importModule = options.importModule ?? ((s: string) => import(s));
  const baseDir = options.baseDir ?? process.cwd();
  const warn = options.warn ?? ((message: string) => process.emitWarning(message));
  const kit = options.packs.length ? hostKitVersion() : '';
  const loaded: LoadedPack[] = [];
  for (const spec of options.packs) {
    checkPackKit(spec, baseDir, kit, warn);
    const pack = await importPack(spec, baseDir, importModule);
    loaded.push({ pack, config: parsePackConfig(pack, options.env) });
  }
  return createRegistry(loaded, options.limits ? { limits: options.limits } : {});
}

/** The kit check of one TOOL_PACKS entry; a package that does not resolve is left to the import to report. */
function checkPackKit(spec: string, baseDir: string, kit: string, warn: (m: string) => void) {
  if (isPath(spec)) {
    const file = packEntry(path.resolve(baseDir, spec));
    if (existsSync(file)) checkKitCompatibility({ spec, file }, kit, warn);
    return;
  }
  const file = resolvePackageFile(spec);
  if (!file) return;
  checkKitCompatibility({ spec, file, packageName: packageNameOf(spec) }, kit, warn);
}

function isPath(spec: string): boolean {
  return spec.startsWith('.') || spec.startsWith('/') || path.isAbsolute(spec);
}

async function importPack(
  spec: string,
  baseDir: string,
  importModule: (specifier: string) => Promise<Record<string, unknown>>,
): Promise<Pack> {
  const specifier = isPath(spec)
    ? pathToFileURL(packEntry(path.resolve(baseDir, spec))).href
    : spec;
  let module: Record<string, unknown>;
  try {
    module = await importModule(specifier);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_UNSUPPORTED_DIR_IMPORT') {
      const missing = String((error as Error).message);
      // A pack that is there but imports something missing is a broken pack, not a missing one.
      if (!missing.includes(spec) && !isPath(spec)) {
        throw new RegistryError('pack_failed', `pack ${spec} failed to load: ${missing}`, error);
      }
      throw new RegistryError(
        'pack_not_found',
        `pack ${spec} was not found (TOOL_PACKS takes package names or paths to a pack's directory or module): ${missing}`,
        error,
      );
    }
    throw new RegistryError(
      'pack_failed',
      `pack ${spec} failed to load: ${error instanceof Error ? error.message : String(error)}`,
      error,
    );
  }
  const candidate = module.default ?? module.pack;
  if (!isPack(candidate)) {
    throw new RegistryError(
      'not_a_pack',
      `pack ${spec} exports no pack: its default export (or \`pack\`) must come from definePack()`,
    );
  }
  return candidate;
}

/**
 * The file a conditional export gives a running process (`import`, else `default`): the built
 * module, not the `development` sources a scaffolded pack also names.
 */
function runtimeEntry(exported: unknown): string | undefined {
  if (typeof exported === 'string') return exported;
  if (!exported || typeof exported !== 'object') return undefined;
  const conditions = exported as Record<string, unknown>;
  return runtimeEntry(conditions.import) ?? runtimeEntry(conditions.default);
}

/** A pack given as a directory loads the module its package.json names (exports or main). */
function packEntry(file: string): string {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(file).isDirectory();
  } catch {
    return file; // the import reports it missing
  }
  if (!isDirectory) return file;
  try {
    const manifest = JSON.parse(readFileSync(path.join(file, 'package.json'), 'utf8')) as {
      exports?: unknown;
      main?: unknown;
    };
    const exported =
      typeof manifest.exports === 'string'
        ? manifest.exports
        : (manifest.exports as Record<string, unknown> | undefined)?.['.'];
    const entry = runtimeEntry(exported) ?? manifest.main;
    if (typeof entry === 'string') return path.join(file, entry);
  } catch {
    // no package.json: fall through to index.ts
  }
  return path.join(file, 'index.ts');
}

function parsePackConfig(pack: Pack, env: Record<string, string | undefined>): unknown {
  if (!pack.config) return {};
  const parsed = pack.config.safeParse(env);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues
    .map((i) => `${i.path.join('.') || '(configuration)'}: ${i.message}`)
    .join('; ');
  throw new RegistryError('pack_config', `pack ${pack.name}: invalid configuration: ${problems}`);
}

/** TOOL_PACKS of an environment: comma-separated, default the demo pack. */
export function toolPacksFromEnv(env: Record<string, string | undefined>): string[] {
  const packs = (env.TOOL_PACKS ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  return packs.length ? packs : [...DEFAULT_TOOL_PACKS];
}
