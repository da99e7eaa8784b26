package server

import "github.com/modelcontextprotocol/go-sdk/mcp"

// addSiteTools registers listSiteTools, getSiteToolDefinition and
// callSiteTool once the catalog exists.
func (s *Server) addSiteTools(srv *mcp.Server) {}
