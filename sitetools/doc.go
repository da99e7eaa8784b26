// Package sitetools owns what Tabbridge knows about the WebMCP tools a shared site offers: the tool
// descriptors a page registers and the extension announces, the per-site catalog, the validation of
// an agent's arguments against the page's own input schema, and the three agent-facing operations
// (listSiteTools, getSiteToolDefinition, callSiteTool) with their error texts.
//
// Everything here is pure: no HTTP, no WebSocket, no storage. A page may lie about anything, so
// every announced descriptor is checked ([CheckDescriptor], [ParseDescriptors]) and every input
// schema is translated into the JSON Schema draft 7 that gojsonschema understands, or refused with
// a reason a person can read ([CompileSchema]). An agent's arguments are then checked before
// anything reaches a browser ([Schema.Validate]), and each violation names its JSON path and says
// how to fix the call. docs/SCHEMAS.md lists the limits and what is translated or refused.
//
// This file set covers descriptors and schemas; the catalog and the MCP operations are added
// beside it. Routing a call to a browser belongs to package bridge, approvals to package approvals.
package sitetools
