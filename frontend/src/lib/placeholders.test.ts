import { describe, expect, it } from 'vitest';
import { placeholderText } from './placeholders';

describe('placeholderText', () => {
  it('explains the names the server makes up, and nothing else', () => {
    expect(placeholderText('(no op)')).toMatch(/no op running/);
    expect(placeholderText('(before this step)')).toMatch(/negative/);
    expect(placeholderText('small_unet/dec_1/(self)')).toMatch(/own op/);
    expect(placeholderText('(copies to device)/f32[32,28,28,1]')).toMatch(/copied/);
    expect(placeholderText('(input pipeline)')).toMatch(/tf.data/);
    expect(placeholderText('small_unet/dec_1')).toBeNull();
    expect(placeholderText('(no op)x')).toBeNull();
  });
});
