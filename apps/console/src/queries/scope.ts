/**
 * What a query may see: always one tenant; a user only their own tasks (the subject of
 * their `task.created` events).
 */
export interface ReadScope {
  tenant: string;
  /** Set for the user role: only this subject's own tasks. */
  ownerOnly?: string;
}
