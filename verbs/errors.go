package verbs

import "errors"

// Errors of control operations. The control channel maps each to its
// status (device does the mapping); they never reach the wire.
var (
	ErrBadHandle    = errors.New("verbs: no such object or handle out of range")
	ErrHandleInUse  = errors.New("verbs: handle in use")
	ErrBadParam     = errors.New("verbs: parameter out of range")
	ErrBadState     = errors.New("verbs: invalid QP state transition")
	ErrBusy         = errors.New("verbs: object still referenced")
	ErrNoResources  = errors.New("verbs: device limit reached")
	ErrBadAccess    = errors.New("verbs: access flags invalid")
	ErrNotSupported = errors.New("verbs: not supported")
)
