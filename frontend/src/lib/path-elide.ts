// Long scope paths shortened from their start: what a name says last (the layer, the op's own
// name) is what tells one node from another, its first components mostly repeat (gradients/,
// shared_model/). Pure; the views render the result as text.

/** What stands for the components left out at the start of a path. */
export const ELIDED_HEAD = '…/';

/**
 * `name` shortened to about `maxChars` by dropping whole leading components, replaced by "…/":
 * `gradients/shared_model/unet_11/Conv2D_grad/Conv2DBackpropInput` at 44 reads
 * `…/unet_11/Conv2D_grad/Conv2DBackpropInput`. The last `keep` components (the op's own name and
 * the scope's last two, where the layer is) always stay, even past `maxChars`; a name that fits,
 * or has no more than `keep` components, is returned as it is.
 */
export function elideLeading(name: string, maxChars: number, keep = 3): string {
  if (name.length <= maxChars) return name;
  const parts = name.split('/');
  if (parts.length <= keep) return name;
  let first = parts.length - keep;
  let length = ELIDED_HEAD.length + parts.slice(first).join('/').length;
  // Add earlier components while the shortened name stays within the budget.
  while (first > 1 && length + parts[first - 1]!.length + 1 <= maxChars) {
    first -= 1;
    length += parts[first]!.length + 1;
  }
  // "…/" in place of a first component as short ("x/") would hide it and save nothing.
  if (length >= name.length) return name;
  return `${ELIDED_HEAD}${parts.slice(first).join('/')}`;
}
