package server

import (
	"context"
	"fmt"
)

// evTokenUsed tells the person's pages that an agent token was used for the
// first time, so the first-run checklist stops "waiting for the first call".
const evTokenUsed = "token.used"

// checklist is the first run's list on the home page: what is set up and,
// for each step not done, the one action that does it.
type checklist struct {
	Workspace, Agent, Extension, Site, Machine bool
	// AgentWaiting is set when a token or app exists but no agent has used
	// one yet: the step reads "waiting for the first call…".
	AgentWaiting bool
	// WorkspaceID is the first workspace, where the connect commands are.
	WorkspaceID string
}

// Done reports whether every step is done (the checklist is then not shown).
func (c checklist) Done() bool {
	return c.Workspace && c.Agent && c.Extension && c.Site && c.Machine
}

// Left counts the steps not done.
func (c checklist) Left() int {
	n := 0
	for _, ok := range []bool{c.Workspace, c.Agent, c.Extension, c.Site, c.Machine} {
		if !ok {
			n++
		}
	}
	return n
}

// checklistFor reads the person's first-run state: one small query per step.
func (s *Server) checklistFor(ctx context.Context, uid string) (checklist, error) {
	db := s.opts.DB.WithContext(ctx)
	var c checklist
	var ids []string
	if err := db.Table("workspaces").Where("owner_id = ?", uid).Order("id").Limit(1).Pluck("id", &ids).Error; err != nil {
		return c, fmt.Errorf("checklist: %w", err)
	}
	if len(ids) > 0 {
		c.Workspace, c.WorkspaceID = true, ids[0]
	}
	count := func(q string, args ...any) (bool, error) {
		var n int64
		if err := db.Raw(q, args...).Scan(&n).Error; err != nil {
			return false, fmt.Errorf("checklist: %w", err)
		}
		return n > 0, nil
	}
	steps := []struct {
		to   *bool
		q    string
		args []any
	}{
		{&c.Agent, `SELECT COUNT(*) FROM agent_tokens JOIN workspaces ON workspaces.id = agent_tokens.workspace_id
			WHERE workspaces.owner_id = ? AND agent_tokens.last_used_at IS NOT NULL`, []any{uid}},
		{&c.AgentWaiting, `SELECT COUNT(*) FROM agent_tokens JOIN workspaces ON workspaces.id = agent_tokens.workspace_id
			WHERE workspaces.owner_id = ? AND agent_tokens.revoked_at IS NULL`, []any{uid}},
		{&c.Extension, `SELECT COUNT(*) FROM browsers WHERE user_id = ?`, []any{uid}},
		{&c.Site, `SELECT COUNT(*) FROM shared_sites WHERE user_id = ?`, []any{uid}},
		{&c.Machine, `SELECT COUNT(*) FROM machines WHERE user_id = ? AND last_seen_at IS NOT NULL`, []any{uid}},
	}
	for _, st := range steps {
		ok, err := count(st.q, st.args...)
		if err != nil {
			return c, err
		}
		*st.to = ok
	}
	if !c.Agent { // an app the person allowed has connected: its consent was its first call
		ok, err := count(`SELECT COUNT(*) FROM oauth_grants WHERE user_id = ? AND revoked_at IS NULL`, uid)
		if err != nil {
			return c, err
		}
		c.Agent = ok
	}
	c.AgentWaiting = c.AgentWaiting && !c.Agent
	return c, nil
}
