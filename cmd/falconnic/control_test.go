package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestControlCallsAnyMethod(t *testing.T) {
	dir, _ := startServe(t, serveConfig)
	sock := filepath.Join(dir, "ctl.sock")
	call := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"control", "--socket", sock}, args...), &out, io.Discard)
		return out.String(), err
	}
	out, err := call("methods")
	if err != nil || !strings.Contains(out, `"status"`) || !strings.Contains(out, `"fabric.impair"`) {
		t.Fatalf("methods: %s %v", out, err)
	}
	out, err = call("fabric.impair", `{"loss_percent":1.5,"seed":3}`)
	if err != nil || !strings.Contains(out, `"loss_percent": 1.5`) {
		t.Fatalf("fabric.impair: %s %v", out, err)
	}
	if _, err := call("fabric.impair", `{"loss_percent":`); !errors.Is(err, errUsage) {
		t.Errorf("bad JSON params: %v, want a usage error", err)
	}
	if _, err := call("no.such.method"); err == nil || !strings.Contains(err.Error(), "unknown_method") {
		t.Errorf("unknown method: %v", err)
	}
	if _, err := call(); !errors.Is(err, errUsage) {
		t.Errorf("no method: %v", err)
	}
}
