import { describe, expect, it } from 'vitest';
import { ELIDED_HEAD, elideLeading } from './path-elide';

describe('elideLeading', () => {
  const conv = 'gradients/shared_model/unet_11/Conv2D_grad/Conv2DBackpropInput';

  it('keeps a name that fits as it is', () => {
    expect(elideLeading('shared_model/skip_2', 48)).toBe('shared_model/skip_2');
    expect(elideLeading(conv, conv.length)).toBe(conv);
  });

  it('drops whole leading components, never the middle of the name', () => {
    expect(elideLeading(conv, 44)).toBe('…/unet_11/Conv2D_grad/Conv2DBackpropInput');
    expect(elideLeading(conv, 55)).toBe('…/shared_model/unet_11/Conv2D_grad/Conv2DBackpropInput');
    // The review's case: the layer (unet_11) and the op's own name both stay.
    const shown = elideLeading(conv, 48);
    expect(shown.startsWith(ELIDED_HEAD)).toBe(true);
    expect(shown).toContain('unet_11');
    expect(shown.endsWith('/Conv2DBackpropInput')).toBe(true);
    expect(conv.endsWith(shown.slice(ELIDED_HEAD.length))).toBe(true);
  });

  it('keeps the last components however short the budget', () => {
    expect(elideLeading(conv, 10)).toBe('…/unet_11/Conv2D_grad/Conv2DBackpropInput');
    expect(elideLeading(conv, 10, 1)).toBe('…/Conv2DBackpropInput');
    const keras = 'gradient_tape/small_unet/dec_1/convolution/Conv2DBackpropFilter';
    expect(elideLeading(keras, 40)).toBe('…/dec_1/convolution/Conv2DBackpropFilter');
  });

  it('leaves a name of few components whole, however long', () => {
    const long = 'a'.repeat(80) + '/b/c';
    expect(elideLeading(long, 20)).toBe(long);
  });

  it('never leaves out the first component alone for "…/" (as long as what it replaces)', () => {
    // "…/" + rest would be no shorter than "x/" + rest: the name stays whole.
    expect(elideLeading('x/aaaaaaaaaa/bbbbbbbbbb/cccccccccc', 30)).toBe('x/aaaaaaaaaa/bbbbbbbbbb/cccccccccc');
  });
});
