import { describe, expect, it } from 'vitest';
import { graphsDashboardHref, tensorBoardRoot } from './links';

describe('tensorBoardRoot', () => {
  it('strips the plugin entry page', () => {
    expect(tensorBoardRoot('/data/plugin_entry.html')).toBe('/');
  });
  it('strips the plugin route', () => {
    expect(tensorBoardRoot('/data/plugin/memory/index.js')).toBe('/');
  });
  it('keeps --path_prefix and experiment ids', () => {
    expect(tensorBoardRoot('/tb/data/plugin_entry.html')).toBe('/tb/');
    expect(tensorBoardRoot('/tb/experiment/abc/data/plugin/memory/x')).toBe('/tb/experiment/abc/');
  });
});

describe('graphsDashboardHref', () => {
  it('points at the Graphs dashboard with the run encoded', () => {
    expect(graphsDashboardHref('/tb/data/plugin_entry.html', 'unet b2/&x')).toBe(
      '/tb/#graphs&run=unet%20b2%2F%26x',
    );
  });
  it('cannot be turned into a javascript: URL by a run name', () => {
    const href = graphsDashboardHref('/data/plugin_entry.html', 'javascript:alert(1)');
    expect(href.startsWith('/#graphs&run=')).toBe(true);
    expect(href).not.toContain('javascript:alert');
  });
});
