// strip.js says what the popup's strip shows for a tab: its site, how many WebMCP tools the page
// registers and their names (so a person sees what an agent would get before pressing Share),
// and whether there is anything to share. A blank tab (a new tab, about:blank, a browser page)
// has no site: the strip says so in words instead of "No site · 0 tools".

// originOf is the tab's web origin, or '' for anything that is not an http(s) page.
export function originOf(url) {
  try {
    const u = new URL(url ?? '');
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : '';
  } catch {
    return '';
  }
}

const blank = /^(about:blank|chrome:\/\/newtab|chrome-search:\/\/|edge:\/\/newtab)/;

// describeTab returns {site, count, tools, countN, reload, canShare} for a tab at url, given the
// worker's tabInfo answer (null: no tools known) and whether detection is on.
export function describeTab(url, info, detecting) {
  const origin = originOf(url);
  if (!origin) {
    const site = !url || blank.test(url) ? 'New tab' : 'A browser page';
    return { site, count: 'Open a website to share it or see its tools.', tools: [], countN: null, reload: false, canShare: false };
  }
  const base = { site: origin, tools: [], countN: null, reload: false, canShare: true };
  if (!detecting) return { ...base, count: 'Tool detection is off' };
  if (info?.needsReload) return { ...base, count: 'Reload this tab to detect its tools', reload: true };
  const tools = info?.tools ?? [];
  const n = tools.length;
  if (n === 0) return { ...base, count: 'No WebMCP tools on this page', countN: 0 };
  return { ...base, count: n === 1 ? '1 tool' : `${n} tools`, tools, countN: n };
}
