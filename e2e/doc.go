// Package e2e holds Tabbridge's end-to-end tests: the real server, started in
// process on a loopback port, driven by real headless Chromium through
// chromedp (and later the real extension, MCP client and terminal daemon).
// It has no code of its own outside its tests.
package e2e
