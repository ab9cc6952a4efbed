// Package api is Baton's task API: the HTTP entry point for programs rather
// than people in chat. It serves, under /api/, the creation of tasks,
// comments on them (answers, steering, follow-up requests), their state,
// a paged listing of them, the decisions on their calls waiting for
// approval, their abort, and the files of their workspaces (input/ and
// output/, listed and downloaded), as JSON, behind a bearer token. Its
// OpenAPI 3 document is served at /api/openapi.json (openapi.json, kept
// equal to the route table by a test).
//
// Every request goes through the same conversation service as the chat
// platforms: a task created here is a thread on the "api" platform, a
// comment is a message in it, and access control, dedup, steering and
// resumption behave as they do in chat. The bot's answers are stored as the
// task's comments, which GET returns; the outbox messages of API tasks are
// settled by Poster, which delivers nothing.
//
// The API sees only the tasks it created: a Slack or Discord task, or a
// subtask, is 404 here. With an empty token the API is off and every route
// answers 404, as if it were not there.
package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// Service is the part of the conversation service (*chat.Service) the API
// uses. Implementations are safe for concurrent use.
type Service interface {
	HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error)
	HandleCommand(ctx context.Context, c chat.Command) (chat.Reply, error)
	// HandleAction decides an approval as its button would: rights and
	// one decision per wait are the service's.
	HandleAction(ctx context.Context, a chat.Action) (chat.Reply, error)
}

// Store is the part of core.Store the API reads. Implementations are safe
// for concurrent use and return errors wrapping core.ErrNotFound for what
// does not exist.
type Store interface {
	Task(ctx context.Context, id int64) (core.Task, error)
	TaskByThread(ctx context.Context, ref core.ThreadRef) (core.Task, error)
	Job(ctx context.Context, id int64) (core.Job, error)
	Tasks(ctx context.Context, f core.TaskFilter) ([]core.Task, error)
	Jobs(ctx context.Context, f core.JobFilter) ([]core.Job, error)
	RecentComments(ctx context.Context, taskID int64, n int) ([]core.Comment, error)
	ApprovalByID(ctx context.Context, id int64) (core.Approval, error)
	PendingApprovals(ctx context.Context, taskID int64) ([]core.Approval, error)
	Events(ctx context.Context, jobID int64) ([]core.JobEvent, error)
}

var _ Store = (core.Store)(nil)

// Config configures the API.
type Config struct {
	// Token is the bearer token every request must carry (api.token).
	// Empty: the API is off and every route answers 404.
	Token  string
	Logger *slog.Logger
	// MaxBody caps a request body (1 MiB by default); a larger one is
	// refused with 400.
	MaxBody int64
}

// Limits of what the API shows and takes.
const (
	defaultMaxBody = 1 << 20
	shownComments  = 20
	shownJobs      = 50
	channel        = "api" // the one channel of the api platform
)

// API serves the task API. It is safe for concurrent use.
type API struct {
	svc   Service
	store Store
	cfg   Config
	log   *slog.Logger
	// tokenSum is the SHA-256 of Token: comparing digests of equal length
	// keeps the comparison constant-time whatever the token's length.
	tokenSum [32]byte
}

// New returns the API over the conversation service and the store.
func New(svc Service, store Store, cfg Config) *API {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = defaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{svc: svc, store: store, cfg: cfg, log: cfg.Logger, tokenSum: sha256.Sum256([]byte(cfg.Token))}
}

// route is one operation of the API: its method and ServeMux pattern, its
// handler, and the Go types of its JSON request and success response (nil:
// none, or not JSON). The table is the API: Handler serves it and nothing
// else, and the OpenAPI document (openapi.json) is tested against it.
type route struct {
	method, pattern string
	handle          func(a *API, w http.ResponseWriter, r *http.Request)
	request         any
	response        any
}

// routes are the API's operations. A GET also answers HEAD.
var routes = []route{
	{"GET", "/api/tasks", (*API).list, nil, taskList{}},
	{"POST", "/api/tasks", (*API).create, request{}, taskView{}},
	{"GET", "/api/tasks/{id}", (*API).show, nil, taskView{}},
	{"POST", "/api/tasks/{id}/comments", (*API).comment, request{}, taskView{}},
	{"POST", "/api/tasks/{id}/abort", (*API).abort, request{}, taskView{}},
	{"POST", "/api/tasks/{id}/approvals/{approval}", (*API).decide, decisionRequest{}, taskView{}},
	{"GET", "/api/tasks/{id}/files", (*API).files, nil, fileList{}},
	{"GET", "/api/tasks/{id}/events", (*API).events, nil, nil},
	{"GET", "/api/tasks/{id}/files/{folder}/{path...}", (*API).download, nil, nil},
	{"GET", "/api/openapi.json", (*API).openAPI, nil, nil},
}

// Handler returns the API's HTTP handler. It serves full paths under
// /api/ and answers 404 elsewhere, so it is mounted on the http.addr
// server's mux as mux.Handle("/api/", h). Every request, on any path, needs
// the bearer token (401 otherwise); with no token configured every request
// is answered 404. A known path asked with another method is answered 405
// with the Allow header.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	var patterns []string
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+rt.pattern, func(w http.ResponseWriter, r *http.Request) { rt.handle(a, w, r) })
		if _, ok := allowed[rt.pattern]; !ok {
			patterns = append(patterns, rt.pattern)
		}
		allowed[rt.pattern] = append(allowed[rt.pattern], rt.method)
		if rt.method == "GET" {
			allowed[rt.pattern] = append(allowed[rt.pattern], "HEAD")
		}
	}
	for _, p := range patterns {
		methods := allowed[p]
		slices.Sort(methods)
		mux.HandleFunc(p, allow(strings.Join(methods, ", ")))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "There is nothing at "+r.URL.Path+".")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.cfg.Token == "" {
			writeError(w, http.StatusNotFound, "The task API is not enabled.")
			return
		}
		if !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			writeError(w, http.StatusUnauthorized, "A valid bearer token is required: send Authorization: Bearer <api.token>.")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the token.
func (a *API) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// allow answers 405 for a path served only with methods.
func allow(methods string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", methods)
		writeError(w, http.StatusMethodNotAllowed, "Use "+methods+" here, not "+r.Method+".")
	}
}

// request is the body of POST /api/tasks, /comments and /abort.
type request struct {
	Text   string `json:"text"`
	Piece  string `json:"piece"` // POST /api/tasks only
	Author string `json:"author"`
}

var (
	authorName = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)
	pieceName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// author is the person a request speaks for: "api:NAME", NAME from the
// request's author field or "api".
func author(req request) chat.Author {
	name := req.Author
	if name == "" {
		name = "api"
	}
	return chat.Author{ID: string(core.PlatformAPI) + ":" + name, Name: name}
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	req, ok := a.decode(w, r, false)
	if !ok {
		return
	}
	if req.Piece != "" && !pieceName.MatchString(req.Piece) {
		writeError(w, http.StatusBadRequest, "piece must be a piece's name (letters, digits, '.', '_', '-').")
		return
	}
	if strings.HasPrefix(strings.TrimSpace(req.Text), "!") {
		writeError(w, http.StatusBadRequest, `A new task's text cannot start with "!": commands work on a task's comments; name a piece with "piece".`)
		return
	}
	thread := core.ThreadRef{Platform: core.PlatformAPI, Channel: channel, Thread: rand.Text()}
	ctx := r.Context()
	m := a.message(thread, author(req), req.Text)
	m.Piece = req.Piece // never written into the text: the title and comment are the request as sent
	reply, err := a.svc.HandleMessage(ctx, m)
	if err != nil {
		a.fail(w, r, "create task", err)
		return
	}
	task, err := a.store.TaskByThread(ctx, thread)
	switch {
	case errors.Is(err, core.ErrNotFound) && reply.Text != "":
		// Refused before anything was stored: access control.
		writeError(w, http.StatusForbidden, reply.Text)
		return
	case err != nil:
		a.fail(w, r, "create task", err)
		return
	case reply.Text != "":
		// The task was opened but no job started: an unknown piece.
		writeError(w, http.StatusBadRequest, reply.Text)
		return
	}
	v, err := a.view(ctx, task)
	if err != nil {
		a.fail(w, r, "create task", err)
		return
	}
	w.Header().Set("Location", "/api/tasks/"+strconv.FormatInt(task.ID, 10))
	writeJSON(w, http.StatusCreated, v)
}

func (a *API) comment(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	req, ok := a.decode(w, r, false)
	if !ok {
		return
	}
	if req.Piece != "" {
		writeError(w, http.StatusBadRequest, `A comment has no piece: write "!piece NAME request" as its text to start a job with one.`)
		return
	}
	ctx := r.Context()
	if name, args, ok := command(req.Text); ok && name != "piece" {
		// A command answers the caller: the HTTP response is the API's
		// thread, where chat would post the answer.
		reply, err := a.svc.HandleCommand(ctx, chat.Command{Name: name, Args: args, Thread: task.Thread, InThread: true, Author: author(req)})
		if err != nil {
			a.fail(w, r, "command", err)
			return
		}
		a.respond(w, r, http.StatusOK, task, reply.Text)
		return
	}
	m := a.message(task.Thread, author(req), req.Text)
	reply, err := a.svc.HandleMessage(ctx, m)
	if err != nil {
		a.fail(w, r, "comment", err)
		return
	}
	if reply.Text != "" {
		stored, err := a.stored(ctx, task.ID, m.MsgID)
		if err != nil {
			a.fail(w, r, "comment", err)
			return
		}
		status := http.StatusForbidden // refused: nothing stored
		if stored {
			status = http.StatusBadRequest // kept, but `!piece` named no piece
		}
		writeError(w, status, reply.Text)
		return
	}
	a.respond(w, r, http.StatusAccepted, task, "")
}

// stored reports whether the task's recent comments hold message msgID.
func (a *API) stored(ctx context.Context, taskID int64, msgID string) (bool, error) {
	recent, err := a.store.RecentComments(ctx, taskID, shownComments)
	if err != nil {
		return false, err
	}
	for _, c := range recent {
		if c.PlatformMsgID == msgID {
			return true, nil
		}
	}
	return false, nil
}

func (a *API) abort(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	req, ok := a.decode(w, r, true)
	if !ok {
		return
	}
	if req.Text != "" || req.Piece != "" {
		writeError(w, http.StatusBadRequest, `An abort takes only "author".`)
		return
	}
	ctx := r.Context()
	active, err := a.store.Jobs(ctx, core.JobFilter{TaskID: task.ID, States: activeStates, Limit: 1})
	if err != nil {
		a.fail(w, r, "abort", err)
		return
	}
	reply, err := a.svc.HandleCommand(ctx, chat.Command{Name: "abort", Thread: task.Thread, InThread: true, Author: author(req)})
	if err != nil {
		a.fail(w, r, "abort", err)
		return
	}
	if len(active) == 0 {
		writeError(w, http.StatusConflict, reply.Text)
		return
	}
	// The reply is a sentence for people; what happened to the job says
	// whether the abort was taken.
	j, err := a.store.Job(ctx, active[0].ID)
	if err != nil {
		a.fail(w, r, "abort", err)
		return
	}
	switch {
	case !j.AbortRequestedAt.IsZero() || j.State == core.JobAborted:
		a.respond(w, r, http.StatusAccepted, task, reply.Text)
	case j.State.Active():
		writeError(w, http.StatusForbidden, reply.Text)
	default: // it ended on its own meanwhile
		writeError(w, http.StatusConflict, reply.Text)
	}
}

var activeStates = []core.JobState{core.JobQueued, core.JobRunning, core.JobWaitingHuman, core.JobWaitingSubtasks, core.JobWaitingApproval}

// approval loads the approval the path names, raw; an error wrapping
// core.ErrNotFound when it is none of task's.
func (a *API) approval(ctx context.Context, task core.Task, raw string) (core.Approval, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return core.Approval{}, fmt.Errorf("approval %q: %w", raw, core.ErrNotFound)
	}
	ap, err := a.store.ApprovalByID(ctx, id)
	if err != nil {
		return core.Approval{}, err
	}
	if ap.TaskID != task.ID {
		return core.Approval{}, fmt.Errorf("approval %d is of task %d: %w", id, ap.TaskID, core.ErrNotFound)
	}
	return ap, nil
}

// decisionRequest is the body of POST /api/tasks/{id}/approvals/{approval}.
type decisionRequest struct {
	Decision string `json:"decision"` // approve | deny | always
	Author   string `json:"author"`
}

// decide decides approval {approval} of the task as the caller, through
// the conversation service as a click on its button: 200 with the task's
// view once decided, 404 for an approval the task does not have, 409 for
// one decided already (or whose job no longer waits for it), 403 when the
// caller may not decide it.
func (a *API) decide(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	ap, err := a.approval(ctx, task, r.PathValue("approval"))
	if errors.Is(err, core.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Task %d has no approval %s.", task.ID, strconv.Quote(r.PathValue("approval"))))
		return
	}
	if err != nil {
		a.fail(w, r, "decide", err)
		return
	}
	var req decisionRequest
	if !a.decodeInto(w, r, &req, "decision, author") || !validAuthor(w, req.Author) {
		return
	}
	v, ok := core.ParseVerdict(req.Decision)
	if !ok {
		writeError(w, http.StatusBadRequest, `decision must be "approve", "deny" or "always".`)
		return
	}
	if ap.State != core.ApprovalPending {
		writeError(w, http.StatusConflict, fmt.Sprintf("Approval %d was decided already (%s); nothing changed.", ap.ID, ap.State))
		return
	}
	who := author(request{Author: req.Author})
	reply, err := a.svc.HandleAction(ctx, chat.Action{Value: string(v) + ":" + core.ApprovalKey(ap.JobID, ap.WaitSeq), Thread: task.Thread, Author: who})
	if err != nil {
		a.fail(w, r, "decide", err)
		return
	}
	// The reply is a sentence for people (empty once decided); the
	// approval and its job say what happened.
	after, err := a.store.ApprovalByID(ctx, ap.ID)
	if err != nil {
		a.fail(w, r, "decide", err)
		return
	}
	j, err := a.store.Job(ctx, ap.JobID)
	if err != nil {
		a.fail(w, r, "decide", err)
		return
	}
	switch {
	case reply.Text == "" && after.State != core.ApprovalPending && after.DecidedBy == who.ID:
		a.respond(w, r, http.StatusOK, task, "")
	case after.State != core.ApprovalPending || j.State != core.JobWaitingApproval || j.WaitSeq != ap.WaitSeq:
		writeError(w, http.StatusConflict, cmp.Or(reply.Text, "That approval was decided already; nothing changed."))
	default:
		writeError(w, http.StatusForbidden, cmp.Or(reply.Text, "You may not decide this approval; nothing changed."))
	}
}

func (a *API) show(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	a.respond(w, r, http.StatusOK, task, "")
}

// respond writes the task's view with status and an optional message.
func (a *API) respond(w http.ResponseWriter, r *http.Request, status int, task core.Task, message string) {
	v, err := a.view(r.Context(), task)
	if err != nil {
		a.fail(w, r, "show task", err)
		return
	}
	v.Message = scrub(task, message)
	writeJSON(w, status, v)
}

// message is a message from the API into thread.
func (a *API) message(thread core.ThreadRef, who chat.Author, text string) chat.Message {
	// No Channel: access.allowed_channels names chat channels, and the
	// token is the API's gate; access.allowed_users still applies.
	return chat.Message{Thread: thread, MsgID: rand.Text(), Author: who, Text: text, Addressed: true}
}

// task loads the task named in the path; it answers 404 for unknown tasks
// and tasks of other platforms.
func (a *API) task(w http.ResponseWriter, r *http.Request) (core.Task, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusNotFound, "There is no task "+strconv.Quote(r.PathValue("id"))+".")
		return core.Task{}, false
	}
	task, err := a.store.Task(r.Context(), id)
	if errors.Is(err, core.ErrNotFound) || (err == nil && task.Thread.Platform != core.PlatformAPI) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("There is no task %d.", id))
		return core.Task{}, false
	}
	if err != nil {
		a.fail(w, r, "load task", err)
		return core.Task{}, false
	}
	return task, true
}

// decode reads a JSON request body strictly. An empty body is allowed only
// when optional is set; text is required otherwise.
func (a *API) decode(w http.ResponseWriter, r *http.Request, optional bool) (request, bool) {
	var req request
	body, ok := a.body(w, r)
	if !ok {
		return req, false
	}
	if optional && len(strings.TrimSpace(string(body))) == 0 {
		return req, true
	}
	if !unmarshal(w, body, &req, "text, piece, author") || !validAuthor(w, req.Author) {
		return req, false
	}
	if !optional && strings.TrimSpace(req.Text) == "" {
		writeError(w, http.StatusBadRequest, "text is required and must not be empty.")
		return req, false
	}
	return req, true
}

// decodeInto reads a JSON request body strictly into v, whose fields are
// named in the error for an unknown one.
func (a *API) decodeInto(w http.ResponseWriter, r *http.Request, v any, fields string) bool {
	body, ok := a.body(w, r)
	return ok && unmarshal(w, body, v, fields)
}

// body reads a request's body, JSON if it says what it is, at most MaxBody
// bytes.
func (a *API) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	// No Content-Type is taken as JSON: the body is decoded strictly
	// anyway, and a client that names no type means no other.
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "Send JSON with Content-Type: application/json (or no Content-Type); curl -d sends a form type unless given -H 'Content-Type: application/json'.")
			return nil, false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("The body is larger than %d bytes.", a.cfg.MaxBody))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "The body could not be read.")
		return nil, false
	}
	return body, true
}

// unmarshal decodes body, one JSON value with only the fields of v, into v.
func unmarshal(w http.ResponseWriter, body []byte, v any, fields string) bool {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "The body is not a valid JSON request: "+jsonProblem(err, fields)+".")
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "The body holds more than one JSON value.")
		return false
	}
	return true
}

// validAuthor answers 400 for an author field that names no one.
func validAuthor(w http.ResponseWriter, name string) bool {
	if name != "" && !authorName.MatchString(name) {
		writeError(w, http.StatusBadRequest, "author must be 1 to 64 letters, digits, '.', '_', '@' or '-'.")
		return false
	}
	return true
}

// jsonProblem describes a decoding error in a sentence fit for a client;
// fields lists the body's fields.
func jsonProblem(err error, fields string) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must be a %s", typ.Field, typ.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + " (fields: " + fields + ")"
	default:
		return "it must be a JSON object"
	}
}

// command splits a `!name args` comment as the conversation service does.
func command(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "!") {
		return "", "", false
	}
	name, args, _ = strings.Cut(strings.TrimPrefix(text, "!"), " ")
	name, _, _ = strings.Cut(name, "\n")
	name = strings.ToLower(strings.TrimSpace(name))
	return name, strings.TrimSpace(args), name != ""
}

// fail answers 500 with a plain sentence; the detail goes to the log.
func (a *API) fail(w http.ResponseWriter, r *http.Request, op string, err error) {
	if r.Context().Err() != nil {
		return // the client is gone
	}
	a.log.Error("task API request failed", "op", op, "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "Something went wrong on the server; try again later.")
}

// errorBody is every error's answer.
type errorBody struct {
	Error string `json:"error"` // a plain sentence saying what to change
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client is gone when it fails
}
