package bridge

import "testing"

func TestMergeApprovalsKeepsTheNewestCountAndACreation(t *testing.T) {
	ref := func(id string) *ApprovalRef { return &ApprovalRef{ID: id, Tool: "buy", Site: "https://shop.example"} }
	created := func(id string, n int) ApprovalsMsg {
		return ApprovalsMsg{Type: TypeApprovals, Pending: n, Event: EventApprovalCreated, Request: ref(id)}
	}
	decided := func(id string, n int) ApprovalsMsg {
		return ApprovalsMsg{Type: TypeApprovals, Pending: n, Event: "approval.decided", Request: ref(id)}
	}
	cases := []struct {
		name    string
		queued  *ApprovalsMsg
		next    ApprovalsMsg
		event   string
		request string
		pending int
	}{
		{"nothing queued", nil, decided("r1", 0), "approval.decided", "r1", 0},
		{"a newer creation wins", &ApprovalsMsg{Type: TypeApprovals, Pending: 1, Event: EventApprovalCreated, Request: ref("r1")}, created("r2", 2), EventApprovalCreated, "r2", 2},
		{"a creation survives another request's answer", ptr(created("r2", 2)), decided("r1", 1), EventApprovalCreated, "r2", 1},
		{"created and answered before anyone was told", ptr(created("r2", 2)), decided("r2", 1), "approval.decided", "r2", 1},
		{"a change after a change", ptr(decided("r1", 2)), decided("r2", 1), "approval.decided", "r2", 1},
	}
	for _, c := range cases {
		m := mergeApprovals(c.queued, c.next)
		if m.Event != c.event || m.Request == nil || m.Request.ID != c.request || m.Pending != c.pending {
			t.Errorf("%s: got %+v %+v", c.name, m, m.Request)
		}
	}
}

func ptr(m ApprovalsMsg) *ApprovalsMsg { return &m }

func TestRecentIDsIsBounded(t *testing.T) {
	var r recentIDs
	for _, id := range []string{"a", "b", "c"} {
		r.add(id, 2)
	}
	if r.take("a") || !r.take("c") || r.take("c") || !r.take("b") || len(r.set) != 0 || len(r.order) != 0 {
		t.Fatalf("recentIDs: %+v", r)
	}
}
