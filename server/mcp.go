package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/store"
)

// mcpInstructions tells a connecting agent what this server is for.
const mcpInstructions = `Tabbridge lets you call the tools of websites that a person has shared with your workspace. ` +
	`The calls run in that person's own signed-in Chrome tab. Start with listSiteTools, read one tool's input schema ` +
	`with getSiteToolDefinition, then callSiteTool. Tools that change something need a taskId: open one with ` +
	`createTask and pass its id; the person approves such calls.`

// newMCPHandler builds the Streamable HTTP handler for /mcp. Sessions are
// stateful (the SDK's stateless mode loses a client's cancel notifications)
// and end after SessionTimeout without requests. Each session is bound to
// the agent token that opened it: the SDK refuses the session id with any
// other token.
func (s *Server) newMCPHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tabbridge", Title: "Tabbridge", Version: Version},
		&mcp.ServerOptions{Instructions: mcpInstructions, GetSessionID: s.newSessionID, Logger: slog.New(quiet{s.opts.Logger.Handler()}).With("component", "mcp")})
	s.addTaskTools(srv)
	s.addSiteTools(srv)
	srv.AddReceivingMiddleware(s.checkToolArguments)
	s.sessions = newSessionCap(s.opts.MCPSessionsPerToken)
	srv.AddReceivingMiddleware(s.limitSessions, refuseUnservedVersions)
	s.mcp = srv
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout: s.opts.MCPSessionTimeout,
		// Bearer tokens are not ambient credentials, so DNS rebinding gains an
		// attacker nothing here, and the check would refuse a reverse proxy on
		// localhost that forwards the public Host.
		DisableLocalhostProtection: true,
	})
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		id, _ := ctx.Value(localAgent).(*store.AgentIdentity)
		if id == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id.TokenID, Extra: map[string]any{"agent": id}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(s.resumeSessions(h))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := r.Context().Value(localAgent).(*store.AgentIdentity)
		if r.Method == http.MethodPost {
			s.mcpPosts.Add(1)
			defer s.mcpPosts.Done()
		}
		// The watch reads the connection from fasthttp's RequestCtx, so it
		// starts before ownContext replaces the request's context.
		if r.Method == http.MethodPost && id != nil {
			msgs, refused := readMCPBody(r)
			if refused != nil {
				refused.write(w)
				return
			}
			defer s.gone.watch(r, msgs, id.TokenID, s.gate.CancelAbandoned)()
			if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
				defer s.posts.begin(s.resumed.serving(id.TokenID, sid))()
			}
		}
		if r.Method == http.MethodDelete && id != nil {
			// The calls run in the session serving the id (a resumed one's
			// differs): the SDK's close would wait for them.
			s.gone.endSession(s.resumed.serving(id.TokenID, r.Header.Get("Mcp-Session-Id")), id.TokenID)
		}
		r, done := ownContext(r)
		defer done()
		if s.refuseFullSessions(w, r) {
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// ownContext gives the SDK a request context of the server's own, carrying
// only the agent identity, and ending with the request. (Not with the
// server's context: shutdown first lets waiting calls answer, then closes
// every session, which ends their streams.)
// The Fiber adaptor's context is fasthttp's RequestCtx, which fasthttp
// recycles once the request ends, while the SDK keeps the initialize
// request's context (values only) as the base of every call of the session:
// a value lookup in a later tool call (a database dial does one) read a
// recycled RequestCtx — a data race the race detector found during a
// database outage. Nothing may wait on the RequestCtx either
// (context.AfterFunc on it reads it from a goroutine of its own).
func ownContext(r *http.Request) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), localAgent, r.Context().Value(localAgent)))
	return r.WithContext(ctx), cancel
}

// mountMCP serves /mcp behind the agent guard, which authenticates the token
// once and refuses cookies with a clear error before the SDK sees the request.
func (s *Server) mountMCP() {
	s.mcpHTTP = s.newMCPHandler()
	s.app.All("/mcp", s.oneOfEachHeader, s.mcpChallenge, s.agent, s.forwardMCP, adaptor.HTTPHandler(ownStrings(s.mcpHTTP)))
}

// agentOf returns the workspace identity of the token behind an MCP request.
func agentOf(req *mcp.CallToolRequest) (*store.AgentIdentity, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if id, ok := req.Extra.TokenInfo.Extra["agent"].(*store.AgentIdentity); ok {
			return id, nil
		}
	}
	return nil, errors.New("this request carries no agent token; reconnect with 'Authorization: Bearer <token>'")
}

type createTaskIn struct {
	Title string `json:"title" jsonschema:"a short title for the piece of work, as the person will see it in their task list"`
}

type updateTaskIn struct {
	TaskID string `json:"taskId" jsonschema:"the id createTask returned"`
	Status string `json:"status" jsonschema:"one of notstarted, ongoing, blocked, completed, rejected"`
}

type taskOut struct {
	TaskID    string    `json:"taskId"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

type listTasksIn struct {
	Before string `json:"before,omitempty" jsonschema:"to read older tasks: the next value of the list before"`
}

type listTasksOut struct {
	Tasks []taskOut `json:"tasks"`
	// Next is set when older tasks remain: pass it as before.
	Next string `json:"next,omitempty"`
}

func taskView(t *store.Task) taskOut {
	return taskOut{TaskID: t.ID, Title: t.Title, Status: t.Status, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// The MCP tools' annotations say what each does to the world, so a client's
// own policy (Codex asks before any tool that is not read-only; others
// decide by destructiveHint) treats them as what they are. Without them
// the spec's defaults apply: destructive, open-world.
//
// readsOwnRecords: a read of Tabbridge's own records (sites, tools, tasks).
var readsOwnRecords = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}

// ownRecords is a change to Tabbridge's own records (a task) that touches
// no website and destroys nothing.
func ownRecords(idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: idempotent, OpenWorldHint: new(false)}
}

func (s *Server) addTaskTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "createTask",
		Title:       "Open a task",
		Annotations: ownRecords(false),
		Description: "Open a task in your workspace for the work you are about to do, and get its taskId. " +
			"Every callSiteTool call that changes something must carry a taskId: the person sees and approves " +
			"such calls inside that task. Reuse one task for one piece of work.",
	}, s.mcpCreateTask)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "updateTask",
		Title:       "Set a task's status",
		Annotations: ownRecords(true),
		Description: "Set a task's status as your work progresses: notstarted, ongoing, blocked, completed or rejected.",
	}, s.mcpUpdateTask)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "listTasks",
		Title:       "List tasks",
		Description: "List your workspace's tasks, newest first, with their ids and statuses, 50 at a time; when older ones remain, next is set: pass it as before to read them.",
		Annotations: readsOwnRecords,
	}, s.mcpListTasks)
}

func (s *Server) mcpCreateTask(ctx context.Context, req *mcp.CallToolRequest, in createTaskIn) (*mcp.CallToolResult, taskOut, error) {
	id, err := agentOf(req)
	if err != nil {
		return nil, taskOut{}, err
	}
	title, err := cleanName("title", in.Title)
	if err != nil {
		return nil, taskOut{}, agentMessage(err)
	}
	t, err := s.createTask(ctx, id.Workspace.OwnerID, id.Workspace.ID, title, "", "agent:"+id.TokenID)
	if ae := (*apiError)(nil); errors.As(err, &ae) {
		return nil, taskOut{}, errors.New(ae.Message)
	}
	if err != nil {
		return nil, taskOut{}, s.storeFailure("the task could not be saved", err)
	}
	s.opts.Logger.Info("task created by agent", "workspace", id.Workspace.ID, "task", t.ID)
	return nil, taskView(t), nil
}

func (s *Server) mcpUpdateTask(ctx context.Context, req *mcp.CallToolRequest, in updateTaskIn) (*mcp.CallToolResult, taskOut, error) {
	id, err := agentOf(req)
	if err != nil {
		return nil, taskOut{}, err
	}
	if !store.ValidTaskStatus(in.Status) {
		return nil, taskOut{}, fmt.Errorf("status %q is not one of %s; call updateTask again with one of them", in.Status, strings.Join(store.TaskStatuses, ", "))
	}
	t, err := s.updateTask(ctx, id.Workspace.OwnerID, id.Workspace.ID, in.TaskID, "", in.Status, true)
	if ae := (*apiError)(nil); errors.As(err, &ae) {
		return nil, taskOut{}, errors.New(ae.Message)
	}
	if errors.Is(err, errTaskStaysRejected) {
		return nil, taskOut{}, err
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, taskOut{}, fmt.Errorf("no task %q in your workspace; call listTasks to see your tasks, or createTask to open one", in.TaskID)
	}
	if err != nil {
		return nil, taskOut{}, s.storeFailure("the task could not be saved", err)
	}
	return nil, taskView(t), nil
}

func (s *Server) mcpListTasks(ctx context.Context, req *mcp.CallToolRequest, in listTasksIn) (*mcp.CallToolResult, listTasksOut, error) {
	id, err := agentOf(req)
	if err != nil {
		return nil, listTasksOut{}, err
	}
	before, err := taskCursor("before", in.Before)
	if err != nil {
		return nil, listTasksOut{}, errors.New(`"before" must be the next value an earlier listTasks gave; call listTasks without it for the newest tasks`)
	}
	ts, next, err := taskPage(func(b string, n int) ([]store.Task, error) {
		return s.opts.DB.WorkspaceTasks(ctx, id.Workspace.ID, b, n)
	}, before, tasksShown)
	if err != nil {
		return nil, listTasksOut{}, s.storeFailure("the tasks could not be read", err)
	}
	out := listTasksOut{Tasks: make([]taskOut, 0, len(ts)), Next: next}
	for i := range ts {
		out.Tasks = append(out.Tasks, taskView(&ts[i]))
	}
	return nil, out, nil
}

// agentMessage turns an API error into the sentence an agent reads.
func agentMessage(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return errors.New(ae.Message)
	}
	return err
}

// quiet passes the MCP library's records on at debug level unless they are
// warnings or errors: the SDK logs every session's start and end at info,
// which buries what an operator wants to see (issue 19).
type quiet struct{ slog.Handler }

func demote(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (q quiet) Enabled(ctx context.Context, l slog.Level) bool {
	return q.Handler.Enabled(ctx, demote(l))
}

func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return q.Handler.Handle(ctx, r)
}

func (q quiet) WithAttrs(a []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(a)} }
func (q quiet) WithGroup(n string) slog.Handler      { return quiet{q.Handler.WithGroup(n)} }
