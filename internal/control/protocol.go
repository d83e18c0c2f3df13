package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxMessage is the longest request or response line, in bytes.
const MaxMessage = 4 << 20

// Request is one call.
type Request struct {
	ID     uint64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Response answers the request with the same ID: Result on success, Error
// otherwise.
type Response struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error codes.
const (
	CodeBadRequest    = "bad_request"    // the line is not a valid request
	CodeUnknownMethod = "unknown_method" // no handler for the method
	CodeBadParams     = "bad_params"     // the handler rejected the params
	CodeFailed        = "failed"         // the handler failed
)

// Error is a failed call as it travels on the wire.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrBadParams marks a handler error caused by the caller's params; the
// server answers it with CodeBadParams.
var ErrBadParams = errors.New("bad params")

// DecodeRequest parses one request line strictly: one JSON object with
// known fields only and a non-empty method.
func DecodeRequest(line []byte) (Request, error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("request: %w", err)
	}
	if dec.More() {
		return Request{}, errors.New("request: trailing data after the object")
	}
	if r.Method == "" {
		return Request{}, errors.New("request: no method")
	}
	return r, nil
}
