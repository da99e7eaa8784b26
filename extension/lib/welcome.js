// welcome.js: on a fresh install the extension opens its options page in welcome mode, which asks
// for the server's address rather than assuming http://127.0.0.1:8080. Updates and Chrome's own
// updates open nothing.

export const WELCOME_PATH = 'options/options.html?welcome=1';

// onInstalled opens the welcome tab for details.reason 'install'; create is chrome.tabs.create.
export async function onInstalled(details, create, getURL) {
  if (details?.reason !== 'install') return false;
  await create({ url: getURL(WELCOME_PATH) });
  return true;
}
