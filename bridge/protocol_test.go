package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/sitetools"
)

func TestDecode(t *testing.T) {
	in, err := Decode([]byte(`{"type":"hello","id":"h","protocol":2,"minProtocol":1,"browserId":"0193b0a4-7c1e-7abc-8def-0123456789ab","name":"  Work  ","version":"1.0.0-beta+3","extra":{"x":1}}`))
	if err != nil || in.Type != TypeHello || in.ID != "h" || in.Hello.Name != "Work" || in.Hello.MinProtocol != 1 {
		t.Fatalf("hello: %+v %v", in, err)
	}
	in, err = Decode([]byte(`{"type":"hello","protocol":1,"browserId":"abcdefgh","name":"n","version":"1"}`))
	if err != nil || in.Hello.MinProtocol != 1 {
		t.Fatalf("minProtocol defaults to protocol: %+v %v", in, err)
	}
	in, err = Decode([]byte(`{"type":"sites.open","sites":[{"origin":"HTTPS://A.example:443","lastUsed":5,"tabs":2}]}`))
	if err != nil || in.SitesOpen.Sites[0].Origin != "https://a.example" {
		t.Fatalf("sites.open: %+v %v", in, err)
	}
	for frame, code := range map[string]string{
		``:                        ErrCodeInvalidMessage,
		`null`:                    ErrCodeInvalidMessage,
		`"ping"`:                  ErrCodeInvalidMessage,
		`{"type":"ping"} {}`:      ErrCodeInvalidJSON,
		`{"type":""}`:             ErrCodeInvalidMessage,
		`{"type":"x"}`:            ErrCodeUnknownType,
		`{"type":"ping","id":{}}`: ErrCodeInvalidField,
		`{"type":"ping","id":"` + strings.Repeat("i", 65) + `"}`:                                                                     ErrCodeInvalidField,
		`{"type":"hello","protocol":1.5,"browserId":"abcdefgh","name":"n","version":"1"}`:                                            ErrCodeInvalidField,
		`{"type":"hello","protocol":1,"minProtocol":2,"browserId":"abcdefgh","name":"n","version":"1"}`:                              ErrCodeInvalidField,
		`{"type":"hello","protocol":1,"browserId":"abc/defgh","name":"n","version":"1"}`:                                             ErrCodeInvalidField,
		`{"type":"sites.open","sites":[{"origin":"https://a.example","tabs":-1}]}`:                                                   ErrCodeInvalidField,
		`{"type":"sites.open","sites":{}}`:                                                                                           ErrCodeInvalidField,
		`{"type":"tools.announce","documentId":"d 1","origin":"https://a.example","url":"https://a.example/","tools":[]}`:            ErrCodeInvalidField,
		`{"type":"tools.announce","documentId":"d1","origin":"https://a.example","url":"https://evil.example/","tools":[]}`:          ErrCodeInvalidField,
		`{"type":"tools.announce","documentId":"d1","origin":"https://a.example","url":"javascript:alert(1)","tools":[]}`:            ErrCodeInvalidField,
		`{"type":"tools.announce","documentId":"d1","origin":"chrome://settings","url":"chrome://settings/","tools":[]}`:             ErrCodeInvalidField,
		`{"type":"tools.announce","documentId":"d1","origin":"https://a.example","url":"https://a.example/"}`:                        ErrCodeInvalidField,
		`{"type":"tools.announce","documentId":"d1","origin":"https://a.example","url":"https://a.example/","tabId":"x","tools":[]}`: ErrCodeInvalidField,
		`{"type":"document.gone"}`:                                     ErrCodeInvalidField,
		`{"type":"document.used","documentId":"d1","lastUsed":-5}`:     ErrCodeInvalidField,
		`{"type":"call.result","callId":"c1","ok":false}`:              ErrCodeInvalidField,
		`{"type":"call.result","ok":true}`:                             ErrCodeInvalidField,
		`{"type":"call.dispatched","callId":"c1","documentId":"../x"}`: ErrCodeInvalidField,
	} {
		_, err := Decode([]byte(frame))
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Code != code || pe.Message == "" {
			t.Errorf("Decode(%s) = %v, want %s", frame, err, code)
		}
	}
}

// FuzzDecode checks that no frame crashes the decoder, that every refusal is
// a *ProtocolError with a message, and that accepted messages satisfy the
// limits the hub relies on.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"ping","id":"1"}`,
		`{"type":"hello","protocol":1,"browserId":"abcdefgh","name":"n","version":"1"}`,
		`{"type":"sites.open","sites":[{"origin":"https://a.example","lastUsed":1,"tabs":1}]}`,
		`{"type":"sites.open","sites":[]}`, `{`, `[]`, `{"type":null}`, "\xff",
		`{"type":"tools.announce","documentId":"d1","origin":"https://a.example","url":"https://a.example/x","title":"t","tabId":1,"lastUsed":1,"tools":[{"name":"s","description":"d"}]}`,
		`{"type":"document.used","documentId":"d1","lastUsed":5}`,
		`{"type":"document.gone","documentId":"d1"}`,
		`{"type":"call.dispatched","callId":"c1","documentId":"d1"}`,
		`{"type":"call.result","callId":"c1","ok":true,"result":{"a":1}}`,
		`{"type":"call.result","callId":"c1","ok":false,"error":{"code":"tool_error","message":"boom"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		in, err := Decode(frame)
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.Code == "" || pe.Message == "" {
				t.Fatalf("Decode(%q) error %v is not a ProtocolError with a message", frame, err)
			}
			return
		}
		if len(in.ID) > maxIDLen {
			t.Fatalf("id over the limit: %q", in.ID)
		}
		switch in.Type {
		case TypeHello:
			h := in.Hello
			if !browserIDPattern.MatchString(h.BrowserID) || h.Name == "" || h.Protocol < h.MinProtocol || h.MinProtocol < 1 {
				t.Fatalf("accepted hello %+v", h)
			}
		case TypeSitesOpen:
			for _, s := range in.SitesOpen.Sites {
				if o, err := sitetools.NormalizeOrigin(s.Origin); err != nil || o != s.Origin {
					t.Fatalf("accepted origin %q not normal", s.Origin)
				}
			}
		case TypeToolsAnnounce:
			a := in.Announce
			if o, err := sitetools.NormalizeOrigin(a.Origin); err != nil || o != a.Origin || !documentIDPattern.MatchString(a.DocumentID) || checkPageURL(a.URL, a.Origin) != nil {
				t.Fatalf("accepted announce %+v", a)
			}
		case TypeDocumentUsed, TypeDocumentGone:
			if !documentIDPattern.MatchString(in.Document.DocumentID) {
				t.Fatalf("accepted document %+v", in.Document)
			}
		case TypeCallDispatched:
			if in.Dispatched.CallID == "" {
				t.Fatalf("accepted dispatched %+v", in.Dispatched)
			}
		case TypeCallResult:
			r := in.Result
			if r.CallID == "" || (!r.OK && (r.Error == nil || r.Error.Code == "")) {
				t.Fatalf("accepted result %+v", r)
			}
		case TypePing:
		default:
			t.Fatalf("accepted type %q", in.Type)
		}
	})
}
