// A statement's plan as EXPLAIN (FORMAT JSON) gives it, and the scans of one table in it.

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Every node that reads `table` (not the one that writes it), anywhere in the plan. */
export const scansOf = (node: PlanNode, table: string): PlanNode[] => [
  ...(node['Relation Name'] === table && node['Node Type'] !== 'ModifyTable' ? [node] : []),
  ...(node.Plans ?? []).flatMap((child) => scansOf(child, table)),
];
