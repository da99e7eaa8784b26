package server

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refuseUnservedVersions answers a server/discover that asks for a protocol
// version the server does not serve with the UnsupportedProtocolVersion
// error, listing the versions it does (the MCP specification's "Protocol
// Version Negotiation": a server MUST answer so for any request whose
// version it does not implement). Tabbridge's stateful Streamable HTTP
// handler serves only the handshake versions (up to 2025-11-25); go-sdk
// v1.8.0 answers such a discover with a success whose supportedVersions
// leave the requested version out, which clients that trust the success
// (mark3labs/mcp-go v1.2.1) take as the sessionless 2026-07-28 protocol
// being spoken, and every request after it is refused. With the error,
// they fall back to the initialize handshake. A discover for a version the
// server serves is answered as the SDK answers it.
func refuseUnservedVersions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "server/discover" || err != nil {
			return res, err
		}
		d, ok := res.(*mcp.DiscoverResult)
		r, isDiscover := req.(*mcp.ServerRequest[*mcp.DiscoverParams])
		if !ok || !isDiscover {
			return res, err
		}
		asked := r.ProtocolVersion()
		if slices.Contains(d.SupportedVersions, asked) {
			return res, nil
		}
		data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: d.SupportedVersions, Requested: asked})
		return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version", Data: data}
	}
}
