import { describe, expect, it } from 'vitest';
import { graphNode } from '../test-fixtures/graph';
import type { GraphNode, GraphResponse } from '../api';
import { BOX_HEIGHT, boxBytes, boxFiguresText, boxSubLabel, boxWidth, layoutGraph } from './graph-layout';

const node = (id: string): GraphNode => graphNode(id, id.split('/').pop()!);

function graph(ids: string[], edges: [string, string][]): GraphResponse {
  return {
    scope: '',
    source: 'run_graph',
    nodes: ids.map(node),
    edges: edges.map(([source, target]) => ({ source, target, count: 1 })),
    omitted_nodes: 0,
    graphs_dashboard_run: 'r',
  };
}

describe('layoutGraph', () => {
  it('places every node and ranks edges top to bottom', () => {
    const layout = layoutGraph(graph(['m/a', 'm/b', 'm/c'], [['m/a', 'm/b'], ['m/b', 'm/c']]));
    expect(layout.nodes).toHaveLength(3);
    const y = Object.fromEntries(layout.nodes.map((n) => [n.node.id, n.y]));
    expect(y['m/a']!).toBeLessThan(y['m/b']!);
    expect(y['m/b']!).toBeLessThan(y['m/c']!);
    expect(layout.edges).toHaveLength(2);
    expect(layout.edges[0]!.points.length).toBeGreaterThan(1);
    expect(layout.width).toBeGreaterThan(0);
  });
  it('drops edges to unknown nodes and self loops instead of failing', () => {
    const layout = layoutGraph(graph(['a', 'b'], [['a', 'zzz'], ['a', 'a'], ['a', 'b']]));
    expect(layout.edges.map((e) => `${e.edge.source}>${e.edge.target}`)).toEqual(['a>b']);
  });
  it('keeps boxes from overlapping', () => {
    const ids = Array.from({ length: 30 }, (_, i) => `n${i}`);
    const layout = layoutGraph(graph(ids, []));
    for (let i = 0; i < layout.nodes.length; i++) {
      for (let j = i + 1; j < layout.nodes.length; j++) {
        const a = layout.nodes[i]!;
        const b = layout.nodes[j]!;
        const apart =
          Math.abs(a.x - b.x) >= (a.width + b.width) / 2 - 0.5 || Math.abs(a.y - b.y) >= (a.height + b.height) / 2 - 0.5;
        expect(apart).toBe(true);
      }
    }
    expect(layout.nodes[0]!.height).toBe(BOX_HEIGHT);
  });
  it('fills rows with boxes no edge touches, largest first, under the layered ones, not one long row', () => {
    const ids = Array.from({ length: 18 }, (_, i) => `n${i}`);
    const loose = layoutGraph(graph(ids, []));
    expect(loose.width).toBeLessThan(4 * loose.height);
    expect(loose.nodes[0]!.x).toBeLessThan(loose.nodes[1]!.x); // in the response's order, left to right
    expect(new Set(loose.nodes.map((n) => n.y)).size).toBeGreaterThan(1);
    const mixed = layoutGraph(graph(['a', 'b', ...ids], [['a', 'b']]));
    const y = Object.fromEntries(mixed.nodes.map((n) => [n.node.id, n.y]));
    expect(y['a']!).toBeLessThan(y['b']!);
    for (const id of ids) expect(y[id]!).toBeGreaterThan(y['b']!);
    for (const n of mixed.nodes) {
      expect(n.x - n.width / 2).toBeGreaterThanOrEqual(0);
      expect(n.x + n.width / 2).toBeLessThanOrEqual(mixed.width);
      expect(n.y + n.height / 2).toBeLessThanOrEqual(mixed.height);
    }
    expect(mixed.edges).toHaveLength(1);
  });
  it('sizes boxes by label within bounds', () => {
    expect(boxWidth('a')).toBe(70);
    expect(boxWidth('x'.repeat(500))).toBe(220);
  });
});

describe('box labels', () => {
  const n: GraphNode = { ...graphNode('m/a', 'a'), op_type: 'Conv2D', at_peak_bytes: 0, allocated_bytes: 2048, output_bytes: 1024 };

  it('shows at peak with a curve', () => {
    expect(boxSubLabel({ ...n, at_peak_bytes: 1024 })).toBe('1.00 KiB · Conv2D');
    expect(boxFiguresText({ ...n, at_peak_bytes: 1024 })).toBe('at peak 1.00 KiB · allocated 2.00 KiB · output 1.00 KiB');
    expect(boxBytes({ ...n, at_peak_bytes: 1024 })).toBe(1024);
  });

  it('shows allocated bytes, and no "at peak 0 B", without a curve', () => {
    expect(boxSubLabel(n, false)).toBe('2.00 KiB allocated · Conv2D');
    expect(boxFiguresText(n, false)).toBe('allocated 2.00 KiB · output 1.00 KiB');
    expect(boxFiguresText(n, false)).not.toContain('at peak');
    expect(boxBytes(n, false)).toBe(2048);
  });
});
