package server

import (
	"net/http"
	"net/url"
	"strings"
)

// ownStrings gives the handler a request whose strings are its own.
//
// Fiber's adaptor builds the net/http request over fasthttp's buffers
// without copying: its header names and values, method, host, request URI
// and the URL parsed from it are views of memory fasthttp reuses for the
// connection's next request once this one returns (fasthttpadaptor:
// "Memory in use by the http.Request will be reused after your handler has
// returned"). Fiber's Immutable setting does not reach them. The MCP path
// keeps such strings past its request — a session id as the key of the
// POSTs in flight, a request id in the context of a call that outlives an
// agent that hung up, whatever the SDK keeps of a session — and a key whose
// bytes changed under a map is a key no lookup finds: a revoked agent's
// session was closed before its last call was answered, which the agent
// read as "request terminated without response". Copying is a few small
// allocations per request (TestAdaptedRequestsOwnTheirStrings).
func ownStrings(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := make(http.Header, len(r.Header))
		for k, vs := range r.Header {
			own := make([]string, len(vs))
			for i, v := range vs {
				own[i] = strings.Clone(v)
			}
			h[strings.Clone(k)] = own
		}
		r.Header = h
		r.Method = strings.Clone(r.Method)
		r.Host = strings.Clone(r.Host)
		r.RequestURI = strings.Clone(r.RequestURI)
		if r.URL != nil {
			if u, err := url.ParseRequestURI(r.URL.String()); err == nil { // String builds a new string
				r.URL = u
			}
		}
		r.TransferEncoding = cloneAll(r.TransferEncoding)
		next.ServeHTTP(w, r)
	})
}

func cloneAll(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.Clone(s)
	}
	return out
}
