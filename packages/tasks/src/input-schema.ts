/**
 * The form a question may take (MCP form-mode elicitation: a flat object of primitive
 * fields) and the answers it accepts. The runner checks a tool's schema when it asks; the
 * task service checks every answer against it before anything is recorded.
 */

export type FormField =
  | {
      type: 'string';
      title?: string;
      description?: string;
      minLength?: number;
      maxLength?: number;
      format?: 'email' | 'uri' | 'date' | 'date-time';
      enum?: string[];
      default?: string;
    }
  | {
      type: 'number' | 'integer';
      title?: string;
      description?: string;
      minimum?: number;
      maximum?: number;
      default?: number;
    }
  | { type: 'boolean'; title?: string; description?: string; default?: boolean };

export interface FormSchema {
  type: 'object';
  properties: Record<string, FormField>;
  required?: string[];
}

/** What a person answered: the protocol's ElicitResult. */
export type InputResponse =
  | { action: 'accept'; content: Record<string, string | number | boolean> }
  | { action: 'decline' }
  | { action: 'cancel' };

const FIELD_KEYS: Record<string, readonly string[]> = {
  string: [
    'type',
    'title',
    'description',
    'minLength',
    'maxLength',
    'format',
    'enum',
    'enumNames',
    'default',
  ],
  number: ['type', 'title', 'description', 'minimum', 'maximum', 'default'],
  integer: ['type', 'title', 'description', 'minimum', 'maximum', 'default'],
  boolean: ['type', 'title', 'description', 'default'],
};

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why `schema` is not a form the protocol allows, or undefined when it is. */
export function formSchemaProblem(schema: unknown): string | undefined {
  if (!isObject(schema) || schema.type !== 'object' || !isObject(schema.properties))
    return 'the schema must be { type: "object", properties: { … } }';
  const names = Object.keys(schema.properties);
  if (names.length === 0) return 'the schema has no fields';
  for (const [name, field] of Object.entries(schema.properties)) {
    if (!isObject(field) || typeof field.type !== 'string' || !FIELD_KEYS[field.type])
      return `field ${name}: only string, number, integer and boolean fields are allowed`;
    const extra = Object.keys(field).filter((k) => !FIELD_KEYS[field.type as string]!.includes(k));
    if (extra.length) return `field ${name}: ${extra.join(', ')} not allowed in a form field`;
    if (
      field.enum !== undefined &&
      !(Array.isArray(field.enum) && field.enum.every((e) => typeof e === 'string'))
    )
      return `field ${name}: enum must be a list of strings`;
  }
  const required = schema.required;
  if (
    required !== undefined &&
    !(Array.isArray(required) && required.every((r) => names.includes(r as string)))
  )
    return 'required must list fields of the schema';
  return undefined;
}

/** Why `response` does not answer `schema`, or undefined when it does. */
export function answerProblem(schema: FormSchema, response: unknown): string | undefined {
  if (!isObject(response)) return 'the answer must be an object with an action';
  if (response.action === 'decline' || response.action === 'cancel') return undefined;
  if (response.action !== 'accept') return 'action must be accept, decline or cancel';
  const content = response.content;
  if (!isObject(content)) return 'an accepted answer needs content';
  for (const name of schema.required ?? [])
    if (content[name] === undefined) return `${name} is required`;
  for (const [name, value] of Object.entries(content)) {
    const field = schema.properties[name];
    if (!field) return `${name} is not a field of this question`;
    const problem = fieldProblem(field, value);
    if (problem) return `${name} ${problem}`;
  }
  return undefined;
}

function fieldProblem(field: FormField, value: unknown): string | undefined {
  switch (field.type) {
    case 'boolean':
      return typeof value === 'boolean' ? undefined : 'must be true or false';
    case 'number':
    case 'integer': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a number';
      if (field.type === 'integer' && !Number.isInteger(value)) return 'must be a whole number';
      if (field.minimum !== undefined && value < field.minimum)
        return `must be at least ${field.minimum}`;
      if (field.maximum !== undefined && value > field.maximum)
        return `must be at most ${field.maximum}`;
      return undefined;
    }
    case 'string': {
      if (typeof value !== 'string') return 'must be a string';
      if (field.enum && !field.enum.includes(value))
        return `must be one of ${field.enum.join(', ')}`;
      if (field.minLength !== undefined && value.length < field.minLength)
        return `must be at least ${field.minLength} characters`;
      if (field.maxLength !== undefined && value.length > field.maxLength)
        return `must be at most ${field.maxLength} characters`;
      return undefined;
    }
  }
}

/**
 * What the audit trail keeps of an answer: the action and, per field, a boolean, a number or
 * a choice among the schema's values as given; free text only as its length, unless the tool
 * said it may be kept (and then cut at 200 characters).
 */
export function answerSummary(
  schema: FormSchema,
  response: InputResponse,
  keepText: boolean,
): Record<string, unknown> {
  if (response.action !== 'accept') return { action: response.action };
  const fields: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(response.content)) {
    const field = schema.properties[name];
    if (typeof value !== 'string' || (field?.type === 'string' && field.enum)) fields[name] = value;
    else fields[name] = keepText ? value.slice(0, 200) : `[${value.length} characters withheld]`;
  }
  return { action: 'accept', fields };
}
