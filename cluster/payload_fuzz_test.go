package cluster

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// FuzzParsePayload: a notification on the cluster's channel is read only in
// the form encode writes (any session on the database can NOTIFY it), and
// what encode writes reads back as the same message.
func FuzzParsePayload(f *testing.F) {
	sent := time.Unix(1700000000, 123456789)
	p := &Postgres{}
	for _, m := range []Message{
		{From: "inst-a", Topic: topicPing, Sent: sent},
		{From: "inst-b", Topic: "events", Sent: sent, Data: []byte(`{"user":"u1","type":"site.updated"}`)},
	} {
		s, err := p.encode(context.Background(), m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s)
	}
	f.Add("a\x1fb\x1f1\x1fr" + uuid.Must(uuid.NewV7()).String())
	f.Add("a\x1fb\x1f+1\x1fix")
	f.Add("a\x1fb\x1f1\x1fr{00000000-0000-0000-0000-000000000000}")
	f.Add("a\x1fb\x1f1\x1fq")
	f.Add("")
	f.Fuzz(func(t *testing.T, payload string) {
		m, ref, err := parsePayload(payload)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "malformed signal") {
				t.Fatalf("parsePayload(%q): %v", payload, err)
			}
			return
		}
		if ref != "" {
			if u, err := uuid.Parse(ref); err != nil || u.String() != ref || m.Data != nil {
				t.Fatalf("parsePayload(%q) accepted reference %q", payload, ref)
			}
			return
		}
		if strings.Contains(m.From, sep) || strings.Contains(m.Topic, sep) {
			t.Fatalf("parsePayload(%q) = %+v", payload, m)
		}
		again := m.From + sep + m.Topic + sep + strconv.FormatInt(m.Sent.UnixNano(), 10) + sep + "i" + string(m.Data)
		if again != payload {
			t.Fatalf("parsePayload(%q) re-encodes as %q", payload, again)
		}
	})
}

// FuzzEncodePayload: every small message encode writes inline reads back
// the same.
func FuzzEncodePayload(f *testing.F) {
	f.Add("inst-a", "events", int64(1700000000123456789), []byte(`{"a":1}`))
	f.Add("i", "_ping", int64(-1), []byte{})
	f.Fuzz(func(t *testing.T, from, topic string, nanos int64, data []byte) {
		if from == "" || strings.Contains(from, sep) || strings.Contains(topic, sep) || len(from)+len(topic)+len(data) > maxInline-64 {
			return // ids and topics are the code's own, without sep; larger data goes by reference
		}
		m := Message{From: from, Topic: topic, Sent: time.Unix(0, nanos), Data: data}
		s, err := (&Postgres{}).encode(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		back, ref, err := parsePayload(s)
		if err != nil || ref != "" || back.From != from || back.Topic != topic || back.Sent.UnixNano() != nanos || !bytes.Equal(back.Data, data) {
			t.Fatalf("%+v encoded as %q reads back %+v, %q, %v", m, s, back, ref, err)
		}
	})
}
