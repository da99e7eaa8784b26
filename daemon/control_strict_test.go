package daemon_test

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
)

// TestControlSocketReadsARequestOneWayOnly: a request the daemon cannot read
// exactly is refused with words naming what is wrong, and starts nothing: a
// field it does not know (a misspelt "cwd" was dropped, and the command ran
// in the daemon's own directory), a field of the wrong type, two requests on
// one line; and `tabbridge run` refuses a command word that is not UTF-8
// (JSON turned its bytes into U+FFFD, so the daemon ran another command).
func TestControlSocketReadsARequestOneWayOnly(t *testing.T) {
	_, path := controlDaemon(t)

	for line, want := range map[string]string{
		`{"argv":["true"],"cwd":"/tmp"}`:       `unknown field "cwd"`,
		`{"argv":"true"}`:                      `"argv" is string`,
		`{"argv":["true"],"cols":"wide"}`:      `"cols" is string`,
		`{"argv":["true"]} {"argv":["false"]}`: "more than one JSON value",
		`["true"]`:                             "not one JSON object",
	} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte(line + "\n"))
		answer, err := bufio.NewReader(c).ReadBytes('\n')
		c.Close()
		var reply daemon.StartReply
		if err != nil || json.Unmarshal(answer, &reply) != nil || reply.ID != "" || !strings.Contains(reply.Error, want) {
			t.Errorf("%s answered %q (%v), want no session and an error saying %q", line, answer, err, want)
		}
	}
	for i, req := range []daemon.StartRequest{
		{Argv: []string{"true", "caf\xe9.txt"}},
		{Argv: []string{"true"}, Dir: "/tmp/\xff"},
		{Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin", "BAD=\xfe"}},
	} {
		id, err := daemon.RequestStart(path, req)
		if err == nil || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("request %d (%+v) started %q, err %v; want it refused as not UTF-8", i, req, id, err)
		}
	}
}
