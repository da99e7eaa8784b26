package server

import (
	"errors"
	"net/http"

	"github.com/tabbridge/tabbridge/store"
)

// Caps bound the rows one person (or one of their workspaces) keeps, each
// a line on a page of theirs and in an API answer: without them a sign-in,
// or a stolen one, could add rows without end. Each is counted and the row
// written in one transaction that holds the owner, so it holds across
// instances (store.DB.InUser, InWorkspace). A zero field takes its default
// and a negative one is no cap; docs/DECISIONS.md says why each number.
type Caps struct {
	Workspaces  int // per person (default DefaultWorkspacesMax)
	AgentTokens int // not revoked, per workspace (DefaultAgentTokensMax)
	Machines    int // not revoked, per person (DefaultMachinesMax)
	SharedSites int // per person, over all their workspaces (DefaultSharedSitesMax)
	Invitations int // unused, per person (DefaultInvitationsMax)
}

// The default caps: far past what a person uses, so only a runaway script
// or a stolen sign-in meets them.
const (
	DefaultWorkspacesMax  = 100
	DefaultAgentTokensMax = 100
	DefaultMachinesMax    = 100
	DefaultSharedSitesMax = 1000
	DefaultInvitationsMax = 100
)

func (c *Caps) fillDefaults() {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&c.Workspaces, DefaultWorkspacesMax}, {&c.AgentTokens, DefaultAgentTokensMax}, {&c.Machines, DefaultMachinesMax},
		{&c.SharedSites, DefaultSharedSitesMax}, {&c.Invitations, DefaultInvitationsMax},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
}

// limitRefusals are the sentences a refusal at each cap says: which limit,
// its number (the %d, then the noun for one or for more), and what to do.
var limitRefusals = map[string]struct{ format, one, many string }{
	store.LimitWorkspaces: {"You have reached the limit of %d %s per person. Delete a workspace you no longer use, then create this one.",
		"workspace", "workspaces"},
	store.LimitAgentTokens: {"This workspace has reached the limit of %d %s. Revoke tokens you no longer use (expired ones too), then create this one.",
		"agent token", "agent tokens"},
	store.LimitMachines: {"You have reached the limit of %d %s per person. Revoke machines you no longer use, then connect this one.",
		"machine", "machines"},
	store.LimitSharedSites: {"You have reached the limit of %d %s per person. Stop sharing sites you no longer use, then share this one.",
		"shared site", "shared sites"},
	store.LimitInvitations: {"You have reached the limit of %d %s. Withdraw invitations that are no longer needed (expired ones too), then create this one.",
		"unused invitation", "unused invitations"},
}

// limitRefusal turns the store's refusal at a cap into the answer the
// person reads (409 limit_reached); any other error is returned as it is.
func limitRefusal(err error) error {
	var full *store.LimitError
	if !errors.As(err, &full) {
		return err
	}
	r := limitRefusals[full.Kind]
	noun := r.many
	if full.Max == 1 {
		noun = r.one
	}
	return errorf(http.StatusConflict, codeLimitReached, r.format, full.Max, noun)
}

// isLimit reports a refusal at a cap (limitRefusal's answer), which a page
// shows at the form that asked.
func isLimit(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == codeLimitReached
}
