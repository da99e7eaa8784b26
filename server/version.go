package server

// Version is the server's version, reported to MCP clients and extensions.
const Version = "0.1.0"
