// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';
import { themeFrom } from './host';

describe('themeFrom', () => {
  it('follows TensorBoard’s dark-mode class on its page’s body, both ways', () => {
    const hostBody = document.createElement('body');
    const root = document.createElement('html');
    themeFrom(hostBody, root);
    expect(root.dataset.theme).toBe('light');
    hostBody.classList.add('dark-mode');
    themeFrom(hostBody, root);
    expect(root.dataset.theme).toBe('dark');
  });
});
