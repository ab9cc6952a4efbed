package tools

// Effect says what a tool's calls may do to the workspace's files, for
// the limits the agent loop applies around them (the workspace's size
// cap, data_dir's free-space floor: see workspace.Quota).
type Effect int

const (
	// ReadsOnly: the call changes no file of the agent's (a record the
	// tool keeps under logs/ aside).
	ReadsOnly Effect = iota
	// WritesFile: the call writes the one file its "path" argument names
	// (Write, Edit).
	WritesFile
	// RunsCommands: the call may create, change or delete any file
	// (Bash).
	RunsCommands
)

// Effector is implemented by the tools whose calls change the workspace;
// a tool that does not implement it reads only.
type Effector interface {
	Effect() Effect
}

// EffectOf returns what t's calls may do to the workspace.
func EffectOf(t Tool) Effect {
	if e, ok := t.(Effector); ok {
		return e.Effect()
	}
	return ReadsOnly
}

// Effect implements Effector.
func (Write) Effect() Effect { return WritesFile }

// Effect implements Effector.
func (Edit) Effect() Effect { return WritesFile }

// Effect implements Effector.
func (*Bash) Effect() Effect { return RunsCommands }
