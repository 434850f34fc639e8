/** Why a registry could not be built; every one stops the process at start (exit 2). */
export type RegistryErrorCode =
  | 'pack_not_found'
  | 'pack_failed'
  | 'not_a_pack'
  | 'kit_incompatible'
  | 'pack_config'
  | 'duplicate_tool'
  | 'invalid_tool'
  | 'unknown_tool'
  | 'missing_target';

export class RegistryError extends Error {
  readonly code: RegistryErrorCode;
  constructor(code: RegistryErrorCode, message: string, cause?: unknown) {
    super(message, cause === undefined ? {} : { cause });
    this.name = 'RegistryError';
    this.code = code;
  }
}
