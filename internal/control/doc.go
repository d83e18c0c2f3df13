// Package control is the local management protocol between the falconnic
// CLI and the daemon: JSON requests and responses over a unix socket.
//
// Wire format: each message is one JSON object on one line (newline
// terminated, at most MaxMessage bytes). A client sends requests and reads
// one response per request, in order, on the same connection:
//
//	→ {"id":1,"method":"status","params":{...}}
//	← {"id":1,"result":{...}}
//	← {"id":2,"error":{"code":"unknown_method","message":"..."}}
//
// Methods are registered by name on a Server (the daemon registers
// "status"; counters, connections and fault injection are added the same
// way). Every server answers "methods" with the sorted list of its methods,
// so clients can discover what a daemon supports. A malformed line gets a
// bad_request error and the connection stays open; a line longer than
// MaxMessage closes the connection.
//
// The package knows nothing of the daemon: it carries json.RawMessage
// params and any JSON-encodable result.
package control
