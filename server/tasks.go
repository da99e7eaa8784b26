package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/tabbridge/tabbridge/store"
)

// DefaultTasksOpenMax is how many tasks one workspace may have open by
// default: an agent opens one per piece of work and is told to reuse it, so
// hundreds open at once is a loop, not work — and every open task is a row on
// the person's workspace page and in listTasks (docs/DECISIONS.md).
const DefaultTasksOpenMax = 200

// Pages of tasks: the workspace page and listTasks show tasksShown, the API
// gives tasksPageDefault unless asked for up to tasksPageMax.
const (
	tasksShown       = 50
	tasksPageDefault = 100
	tasksPageMax     = 500
)

// openTaskRefusal turns the store's refusal at the open-task cap into the
// answer the person and agents read; any other error is returned as it is.
func openTaskRefusal(err error) error {
	var full *store.TooManyOpenTasksError
	if !errors.As(err, &full) {
		return err
	}
	return errorf(http.StatusConflict, codeTooManyOpenTasks,
		"This workspace has %d open tasks, the most it may have. Reuse an open task (listTasks) or set finished ones to completed or rejected (updateTask) first.", full.Open)
}

// taskPage reads up to n tasks older than before through list, and the
// cursor of the next page ("" when there is none).
func taskPage(list func(before string, n int) ([]store.Task, error), before string, n int) ([]store.Task, string, error) {
	ts, err := list(before, n+1)
	if err != nil || len(ts) <= n {
		return ts, "", err
	}
	return ts[:n], ts[n-1].ID, nil
}

// taskCursor checks a page cursor: "" or a task id, as a page's next gives.
func taskCursor(field, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return "", badRequest(codeInvalidField, "%q must be a task id, as the page before gave it as \"next\".", field)
	}
	return id.String(), nil
}

// getTasks is GET /api/workspaces/:id/tasks: a page of tasks, newest first
// (?before=<next of the page before>, ?limit=1…500, default 100).
func (s *Server) getTasks(c *fiber.Ctx) error {
	before, err := taskCursor("before", c.Query("before"))
	if err != nil {
		return err
	}
	n := tasksPageDefault
	if v := c.Query("limit"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > tasksPageMax {
			return badRequest(codeInvalidField, "\"limit\" must be a whole number from 1 to %d.", tasksPageMax)
		}
	}
	uid, ws := userID(c), c.Params("id")
	ts, next, err := taskPage(func(b string, k int) ([]store.Task, error) { return s.opts.DB.Tasks(c.UserContext(), uid, ws, b, k) }, before, n)
	if err != nil {
		return storeError(err, "workspace")
	}
	out := fiber.Map{"tasks": ts}
	if next != "" {
		out["next"] = next
	}
	return c.JSON(out)
}
