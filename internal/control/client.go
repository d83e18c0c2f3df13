package control

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
)

// Client calls methods on a server over one connection. It is safe for
// concurrent use; calls are serialised.
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	rd   *bufio.Reader
	next uint64
}

// Dial connects to the server at the unix socket path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return &Client{conn: c, rd: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call sends method with params (nil for none) and decodes the result into
// result (nil to discard). A server-side failure is returned as *Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	req := Request{ID: c.next, Method: method}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("control: encoding params: %w", err)
		}
		req.Params = raw
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer stop()
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	var resp Response
	for {
		b, err := readLine(c.rd)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("control: %w", err)
		}
		resp = Response{}
		if err := json.Unmarshal(b, &resp); err != nil {
			return fmt.Errorf("control: bad response: %w", err)
		}
		if resp.ID == req.ID {
			break
		}
	}
	if resp.Error != nil {
		return resp.Error
	}
	if result != nil {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return fmt.Errorf("control: decoding %s result: %w", method, err)
		}
	}
	return nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, part...)
		if len(line) > MaxMessage {
			return nil, fmt.Errorf("response longer than %d bytes", MaxMessage)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// Call dials path, makes one call and closes the connection.
func Call(ctx context.Context, path, method string, params, result any) error {
	c, err := Dial(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(ctx, method, params, result)
}
