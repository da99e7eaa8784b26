package approvals

import (
	"context"
	"errors"
	"fmt"

	"github.com/tabbridge/tabbridge/store"
)

// ErrNotRemembered is returned for letting a request be asked again when it
// is not a denial still remembered (it was allowed, expired, withdrawn,
// waits, or was already let go).
var ErrNotRemembered = errors.New("approvals: the request is not a remembered denial")

// rememberedDenial returns the decision for a call the person already denied
// in the same task — same site, tool and arguments, compared in canonical
// form — and has not let be asked again; nil when there is none. A careless
// or hostile agent that repeats a denied call then gets the same no at once
// instead of putting the question to the person again until they give in.
// Only the person's Deny is remembered: an expiry or a withdrawal asks
// again, since nobody said no.
func (g *Gate) rememberedDenial(ctx context.Context, call Call, argsHash string) (*Decision, error) {
	var r Request
	err := g.opts.DB.WithContext(ctx).
		Where("task_id = ? AND user_id = ? AND site = ? AND tool = ? AND args_hash = ? AND status = ? AND forgotten_at IS NULL",
			call.TaskID, call.OwnerID, call.Site, call.Tool, argsHash, StatusDenied).
		Order("id DESC").Limit(1).Find(&r).Error
	if err != nil {
		return nil, fmt.Errorf("find a remembered denial: %w", err)
	}
	if r.ID == "" {
		return nil, nil
	}
	d := Decision{Source: SourceRemembered, RequestID: r.ID, Answer: Deny, DecidedBy: r.DecidedBy}
	if r.DecidedAt != nil {
		d.DecidedAt = *r.DecidedAt
	}
	return &d, nil
}

// ForgetDenial lets the call a person denied be asked again: the next
// identical call in its task opens a new request instead of being refused.
// It returns ErrNotFound for a request that is not the person's, and
// ErrNotRemembered for one that is not a denial still remembered.
func (g *Gate) ForgetDenial(ctx context.Context, ownerID, requestID string) (Request, error) {
	res := g.opts.DB.WithContext(ctx).Model(&Request{}).
		Where("id = ? AND user_id = ? AND status = ? AND forgotten_at IS NULL", requestID, ownerID, StatusDenied).
		Update("forgotten_at", store.Now())
	if res.Error != nil {
		return Request{}, fmt.Errorf("forget denial: %w", res.Error)
	}
	r, err := g.Request(ctx, ownerID, requestID)
	if err != nil {
		return Request{}, err
	}
	if res.RowsAffected == 0 {
		return r, ErrNotRemembered
	}
	g.notify(ownerID, "approval.updated", r)
	return r, nil
}
