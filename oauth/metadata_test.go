package oauth

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true,
		"127.0.0.1": false, "127.1.2.3": false, "10.0.0.1": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "0.0.0.0": false, "100.64.0.1": false, "224.0.0.1": false, "255.255.255.255": false,
		"::1": false, "::": false, "fd00::1": false, "fe80::1": false, "::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false,
		"64:ff9b::a00:1": false, "2002:7f00:1::": false,
	} {
		a := netip.MustParseAddr(addr).Unmap()
		if got := publicAddr(a); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", addr, got, want)
		}
	}
}

// docServer is a TLS server that serves a client ID metadata document.
type docServer struct {
	*httptest.Server
	hits atomic.Int64
	doc  func(id string) any // the document served at /client.json
}

func newDocServer(t *testing.T) *docServer {
	d := &docServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/client.json", func(w http.ResponseWriter, r *http.Request) {
		d.hits.Add(1)
		json.NewEncoder(w).Encode(d.doc(d.URL + "/client.json"))
	})
	mux.HandleFunc("/big.json", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"client_id":"` + strings.Repeat("x", 70<<10) + `"}`))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers: the fetcher's deadline must end it
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	d.Server = httptest.NewTLSServer(mux)
	d.doc = func(id string) any {
		return map[string]any{"client_id": id, "client_name": "Doc client", "redirect_uris": []string{"http://127.0.0.1/callback"},
			"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}}
	}
	t.Cleanup(d.Close)
	return d
}

// fetcherFor allows exactly srv's own address, as the tests of a server
// that fetches from itself must; nothing else on loopback.
func fetcherFor(srv *docServer) *MetadataFetcher {
	return NewMetadataFetcher(FetcherOptions{AllowAddrs: []string{srv.Listener.Addr().String()}, RootCAs: srv.rootCAs()})
}

func (d *docServer) rootCAs() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(d.Certificate())
	return p
}

func TestMetadataDocumentIsFetchedAndCached(t *testing.T) {
	srv := newDocServer(t)
	f := fetcherFor(srv)
	id := srv.URL + "/client.json"
	for i := 0; i < 3; i++ {
		c, err := f.Client(context.Background(), id)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if c.Name != "Doc client" || !c.Metadata || c.ID != id || c.Host("http://127.0.0.1/callback") != srv.Listener.Addr().String() {
			t.Fatalf("client %+v host %s", c, c.Host(""))
		}
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("fetched %d times, want once (cached)", n)
	}
}

func TestMetadataDocumentIsChecked(t *testing.T) {
	srv := newDocServer(t)
	f := fetcherFor(srv)
	ctx := context.Background()
	cases := map[string]func(id string) any{
		"not its own URL": func(string) any {
			return map[string]any{"client_id": "https://elsewhere.example/c.json", "redirect_uris": []string{"http://127.0.0.1/cb"}}
		},
		"confidential": func(id string) any {
			return map[string]any{"client_id": id, "redirect_uris": []string{"http://127.0.0.1/cb"}, "token_endpoint_auth_method": "client_secret_basic"}
		},
		"no redirect URIs": func(id string) any { return map[string]any{"client_id": id} },
		"http redirect off loopback": func(id string) any {
			return map[string]any{"client_id": id, "redirect_uris": []string{"http://evil.example/cb"}}
		},
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			srv.doc = doc
			f := fetcherFor(srv) // no cache between cases
			if _, err := f.Client(ctx, srv.URL+"/client.json"); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := f.Client(ctx, srv.URL+"/big.json"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized document: %v", err)
	}
	for _, bad := range []string{"http://example.com/c.json", "https://example.com", "https://example.com/", "https://u:p@example.com/c"} {
		if _, err := f.Client(ctx, bad); err == nil {
			t.Errorf("accepted client id %q", bad)
		}
	}
}

// TestMetadataFetchRefusesPrivateAddresses proves the dial check is on
// although the test's own server is allowed: another loopback server
// reached by a hostname, and a redirect from the allowed server to a
// private address, are both refused.
func TestMetadataFetchRefusesPrivateAddresses(t *testing.T) {
	allowed := newDocServer(t)
	other := newDocServer(t)
	f := fetcherFor(allowed)
	ctx := context.Background()
	otherPort := other.Listener.Addr().String()[strings.LastIndex(other.Listener.Addr().String(), ":"):]
	for name, id := range map[string]string{
		"hostname resolving to 127.0.0.1": "https://localhost" + otherPort + "/client.json",
		"redirect to a loopback hostname": allowed.URL + "/redirect?to=" + "https://localhost" + otherPort + "/client.json",
		"redirect to a private address":   allowed.URL + "/redirect?to=https://10.0.0.1/client.json",
		"redirect to the metadata IP":     allowed.URL + "/redirect?to=https://169.254.169.254/latest",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.Client(ctx, id)
			var oe *Error
			if !errors.As(err, &oe) || oe.Code != "invalid_client" || !strings.Contains(oe.Description, "not public") {
				t.Fatalf("got %v, want a refusal naming the address", err)
			}
		})
	}
	if other.hits.Load() != 0 {
		t.Fatal("the private server was reached")
	}
}

func FuzzClientMetadata(f *testing.F) {
	f.Add(`{"redirect_uris":["http://127.0.0.1:3000/cb"],"client_name":"x"}`, "http://127.0.0.1:4000/cb")
	f.Add(`{"redirect_uris":["myapp:/cb","https://a.example/cb"]}`, "https://a.example/cb")
	f.Add(`{"redirect_uris":["http://[::1]/cb"]}`, "http://[::1]:9/cb")
	f.Fuzz(func(t *testing.T, body, got string) {
		var meta oauthex.ClientRegistrationMetadata
		if json.Unmarshal([]byte(body), &meta) != nil {
			return
		}
		c, err := checkMetadata(&meta)
		if err != nil {
			return
		}
		for _, r := range c.RedirectURIs {
			if checkRedirectURI(r) != nil || !redirectMatches(r, r) {
				t.Fatalf("accepted redirect %q fails its own checks", r)
			}
			if redirectMatches(r, got) && checkRedirectURI(got) != nil && got != r {
				t.Fatalf("%q matched registered %q but is not a valid redirect", got, r)
			}
		}
	})
}

func TestMetadataFetchHasADeadline(t *testing.T) {
	srv := newDocServer(t)
	f := NewMetadataFetcher(FetcherOptions{AllowAddrs: []string{srv.Listener.Addr().String()}, RootCAs: srv.rootCAs(), Timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := f.Client(context.Background(), srv.URL+"/slow")
	if err == nil || !strings.Contains(err.Error(), "fetching it failed") {
		t.Fatalf("slow document: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the fetch took %s despite a 300ms limit", took)
	}
}
