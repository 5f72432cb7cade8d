// Names the server makes up for what has no op of its own (docs/figures.md), in words for a tooltip.

const PLACEHOLDERS: Record<string, string> = {
  '(no op)': 'allocations made with no op running on their thread',
  '(before this step)': 'frees of bytes allocated before the step (an earlier step, or before the profile): negative',
  '(input pipeline)': 'what tf.data’s threads allocate (a map function’s ops, slicing each batch): the step’s input',
  '(feeds)': 'tensors fed to the step (feed_dict, function arguments)',
  '(plumbing)': 'the executor’s own nodes: sources, sinks, return values, sends and receives',
  '(copies to device)': 'arguments copied to the device before an XLA program runs',
  '(self)': 'the scope’s own op: a node named like the scope, beside its children',
};

/** What a made-up name stands for (matched on the last path component), or null for a real name. */
export function placeholderText(scope: string): string | null {
  const last = scope.slice(scope.lastIndexOf('/') + 1);
  return PLACEHOLDERS[last] ?? (scope.startsWith('(copies to device)/') ? PLACEHOLDERS['(copies to device)']! : null);
}
