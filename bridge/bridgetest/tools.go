package bridgetest

import (
	"encoding/json"
	"time"

	"github.com/tabbridge/tabbridge/bridge"
)

// Doc is a document (a page in a tab) the test browser announces.
type Doc struct {
	ID       string
	Origin   string
	URL      string
	Title    string
	TabID    int
	LastUsed time.Time
	// Tools is the JSON array of tool descriptors the page registered.
	Tools string
}

// Announce sends tools.announce for doc and waits for tools.accepted (or an
// error message, returned as the message).
func (b *Browser) Announce(doc Doc, timeout time.Duration) (*Message, error) {
	var used int64
	if !doc.LastUsed.IsZero() {
		used = doc.LastUsed.UnixMilli()
	}
	msg := map[string]any{
		"type": bridge.TypeToolsAnnounce, "id": "a-" + doc.ID, "documentId": doc.ID, "origin": doc.Origin,
		"url": doc.URL, "title": doc.Title, "tabId": doc.TabID, "lastUsed": used,
		"tools": json.RawMessage(doc.Tools),
	}
	if err := b.Send(msg); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		m, err := b.Next(time.Until(deadline))
		if err != nil {
			return nil, err
		}
		if (m.Type == bridge.TypeToolsAccepted || m.Type == bridge.TypeError) && m.Ref == "a-"+doc.ID {
			return m, nil
		}
	}
}

// Used reports that a document's tab was used at t.
func (b *Browser) Used(documentID string, t time.Time) error {
	return b.Send(map[string]any{"type": bridge.TypeDocumentUsed, "documentId": documentID, "lastUsed": t.UnixMilli()})
}

// Gone reports that a document unloaded.
func (b *Browser) Gone(documentID string) error {
	return b.Send(map[string]any{"type": bridge.TypeDocumentGone, "documentId": documentID})
}

// Dispatched reports which document runs a call.
func (b *Browser) Dispatched(callID, documentID string) error {
	return b.Send(map[string]any{"type": bridge.TypeCallDispatched, "callId": callID, "documentId": documentID})
}

// Result answers a call with the page's result.
func (b *Browser) Result(callID string, result any) error {
	return b.Send(map[string]any{"type": bridge.TypeCallResult, "callId": callID, "ok": true, "result": result})
}

// Fail answers a call with a failure.
func (b *Browser) Fail(callID, code, message string) error {
	return b.Send(map[string]any{"type": bridge.TypeCallResult, "callId": callID, "ok": false,
		"error": map[string]any{"code": code, "message": message}})
}
