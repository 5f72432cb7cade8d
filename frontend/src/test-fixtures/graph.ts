// Graph test fixtures, shared by lib/graph-*.test.ts: tests only, never imported by the page.
import type { GraphNode } from '../api';

/** A scope box with 1 byte of every figure. */
export const graphNode = (id: string, name: string = id): GraphNode => ({
  id,
  name,
  kind: 'scope',
  op_type: null,
  node_count: 1,
  at_peak_bytes: 1,
  allocated_bytes: 1,
  output_bytes: 1,
});
