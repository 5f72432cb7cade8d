// @vitest-environment jsdom
// The page's CSS as the browser parses it: rules layout depends on, which jsdom cannot lay out.
import { describe, expect, it } from 'vitest';
import { CSS } from './styles';

function sheet(): CSSStyleSheet {
  const style = document.createElement('style');
  style.textContent = CSS;
  document.head.append(style);
  const parsed = style.sheet!;
  style.remove();
  return parsed;
}

/** The style rules (in media rules too, with their condition) whose selector matches `test`. */
function rules(test: (selector: string) => boolean): { media: string | null; rule: CSSStyleRule }[] {
  const out: { media: string | null; rule: CSSStyleRule }[] = [];
  const walk = (list: CSSRuleList, media: string | null) => {
    for (const r of Array.from(list)) {
      if (r instanceof CSSMediaRule) walk(r.cssRules, r.media.mediaText);
      else if (r instanceof CSSStyleRule && test(r.selectorText)) out.push({ media, rule: r });
    }
  };
  walk(sheet().cssRules, null);
  return out;
}

describe('page CSS', () => {
  it('sets no minimum width that TensorBoard’s 800 px iframe cannot hold', () => {
    for (const { rule } of rules(() => true)) {
      const min = parseFloat(rule.style.minWidth);
      if (rule.style.minWidth.endsWith('px')) expect(min, rule.selectorText).toBeLessThan(400);
    }
    expect(parseFloat(rules((s) => s === '.mem-root')[0]!.rule.style.minWidth)).toBe(0);
  });

  it('stacks the details under the curve and the treemap below 1000 px', () => {
    const narrow = rules((s) => s.includes('.single-layout')).filter((r) => r.media?.includes('max-width: 999px'));
    const areas = narrow.map((r) => r.rule.style.getPropertyValue('grid-template-areas')).find(Boolean)!;
    expect(areas.replace(/\s+/g, ' ')).toBe('"curve" "maps" "side" "fit" "resident" "ops"');
    const columns = narrow.map((r) => r.rule.style.getPropertyValue('grid-template-columns')).find(Boolean);
    expect(columns).toBe('minmax(0, 1fr)');
  });

  it('never breaks a table cell inside a word: it breaks at the <wbr>s, and a too-wide table scrolls in its box', () => {
    for (const { rule } of rules((s) => /table|td|th\b/.test(s))) {
      expect(rule.style.getPropertyValue('overflow-wrap'), rule.selectorText).not.toBe('anywhere');
      expect(rule.style.getPropertyValue('word-break'), rule.selectorText).not.toBe('break-all');
    }
    const td = rules((s) => s === 'table.data td')[0]!.rule.style;
    expect(td.getPropertyValue('overflow-wrap')).toBe('normal');
    expect(td.getPropertyValue('word-break')).toBe('normal');
    expect(rules((s) => s === '.table-wrap')[0]!.rule.style.overflow).toBe('auto');
  });
});
