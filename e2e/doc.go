// Package e2e holds Tabbridge's end-to-end tests over the real pieces: the
// server started in process on a loopback port (restartable on the same
// port and database), real headless Chromium driven through chromedp with
// the real unpacked extension, a WebMCP test site served on loopback, the
// go-sdk MCP client and the official TypeScript SDK client as agents, and a
// real terminal daemon running real programs in PTYs. It owns no product
// code; the files outside _test.go are the shared harness.
package e2e
