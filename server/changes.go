package server

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
)

// The write paths: one function per change the JSON API, the pages and MCP
// all make, which writes it and tells the owner's open pages. A caller
// validates its own input first and maps the error to its own answer.

// createWorkspace creates a workspace for uid, under the person's cap
// (Caps.Workspaces).
func (s *Server) createWorkspace(ctx context.Context, uid, name string) (*store.Workspace, error) {
	w, err := s.opts.DB.CreateWorkspaceUpTo(ctx, uid, name, s.opts.Caps.Workspaces)
	if err != nil {
		return nil, limitRefusal(err)
	}
	s.publish(uid, evWorkspaceCreated, fiber.Map{"workspace": w})
	return w, nil
}

// renameWorkspace renames one of uid's workspaces.
func (s *Server) renameWorkspace(ctx context.Context, uid, id, name string) (*store.Workspace, error) {
	w, err := s.opts.DB.RenameWorkspace(ctx, uid, id, name)
	if err != nil {
		return nil, err
	}
	s.publish(uid, evWorkspaceUpdated, fiber.Map{"workspace": w})
	return w, nil
}

// createAgentToken creates an agent token in one of uid's workspaces, under
// the workspace's cap (Caps.AgentTokens), and returns it with its secret.
func (s *Server) createAgentToken(ctx context.Context, uid, workspaceID, name string, expires *time.Time) (*store.AgentToken, string, error) {
	tok, plain, err := s.opts.DB.CreateAgentTokenUpTo(ctx, uid, workspaceID, name, expires, s.opts.Caps.AgentTokens)
	if err != nil {
		return nil, "", limitRefusal(err)
	}
	s.opts.Logger.Info("agent token created", "user", uid, "workspace", tok.WorkspaceID, "token", tok.ID, "name", tok.Name, "expires", tok.ExpiresAt)
	s.publish(uid, evTokenCreated, fiber.Map{"token": tok})
	return tok, plain, nil
}

// createTask creates a task in a workspace of owner's, by createdBy (the
// person, or "agent:<token id>"), with status when one is given. An open one
// is counted against the cap in the same transaction that writes it, so
// instances sharing the database cannot together let more through.
func (s *Server) createTask(ctx context.Context, owner, workspaceID, title, status, createdBy string) (*store.Task, error) {
	t, err := s.opts.DB.CreateTask(ctx, store.NewTask{WorkspaceID: workspaceID, Title: title, Status: status,
		CreatedBy: createdBy, OpenMax: s.opts.TasksOpenMax})
	if err != nil {
		return nil, openTaskRefusal(err)
	}
	s.publish(owner, evTaskCreated, fiber.Map{"task": t})
	return t, nil
}

// errTaskStaysRejected refuses an agent's move of a task out of rejected:
// rejecting is how the person stops a piece of work, so only they reopen it.
var errTaskStaysRejected = errors.New("this task is rejected, and only the person can reopen it: do not go on with that work; ask the person what they want, or open a new task with createTask for different work")

// updateTask changes a task's title and/or status (blank keeps either), by
// the person or (byAgent) by an agent. A status change reads the task and
// writes it in one transaction of the store's: reopening a finished task
// opens one more (the cap), and an agent cannot reopen a rejected one.
func (s *Server) updateTask(ctx context.Context, owner, workspaceID, id, title, status string, byAgent bool) (*store.Task, error) {
	change := store.TaskChange{Title: title, Status: status, OpenMax: s.opts.TasksOpenMax}
	if byAgent {
		change.Allow = func(from string) error {
			if from == "rejected" && status != "rejected" {
				return errTaskStaysRejected
			}
			return nil
		}
	}
	t, err := s.opts.DB.UpdateTask(ctx, workspaceID, id, change)
	if err != nil {
		return nil, openTaskRefusal(err)
	}
	if status != "" && !store.TaskOpen(status) {
		// a finished task asks nothing more: what waits in it is withdrawn
		if err := s.gate.EndTask(ctx, owner, id); err != nil {
			return nil, err
		}
	}
	s.publish(owner, evTaskUpdated, fiber.Map{"task": t})
	return t, nil
}

// createMachine creates a machine for uid, under the person's cap
// (Caps.Machines), and returns it with its token.
func (s *Server) createMachine(ctx context.Context, uid, name string) (*store.Machine, string, error) {
	m, plain, err := s.opts.DB.CreateMachineUpTo(ctx, uid, name, s.opts.Caps.Machines)
	if err != nil {
		return nil, "", limitRefusal(err)
	}
	s.publish(uid, evMachineCreated, fiber.Map{"machine": s.machineView(*m)})
	return m, plain, nil
}

// renameMachine renames one of uid's machines.
func (s *Server) renameMachine(ctx context.Context, uid, id, name string) (*store.Machine, error) {
	m, err := s.opts.DB.RenameMachine(ctx, uid, id, name)
	if err != nil {
		return nil, err
	}
	s.publish(uid, evMachineUpdated, fiber.Map{"machine": s.machineView(*m)})
	return m, nil
}

// revokeGrant revokes one of uid's standing grants; another person's is not
// found.
func (s *Server) revokeGrant(ctx context.Context, uid, id string) error {
	if err := s.gate.RevokeGrant(ctx, uid, id); err != nil {
		if errors.Is(err, approvals.ErrNotFound) {
			return notFound("grant")
		}
		return err
	}
	s.publish(uid, evGrantRevoked, fiber.Map{"grant": fiber.Map{"id": id}})
	return nil
}
