package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// URootVersion is the u-root release that builds the guest userland.
const URootVersion = "v0.16.0"

const urootModule = "github.com/u-root/u-root"

// URootCommands are the u-root commands in the guest (u-root's own ip is
// left out: Debian's iproute2 is there).
var URootCommands = []string{
	"init", "gosh", "cat", "chmod", "cp", "dd", "df", "dmesg", "echo", "false", "find", "free",
	"grep", "head", "hexdump", "hostname", "insmod", "kill", "ln", "ls", "lsmod", "md5sum",
	"mkdir", "mknod", "mount", "mv", "netcat", "ping", "poweroff", "printenv", "ps", "pwd",
	"readlink", "rm", "rmmod", "seq", "shasum", "shutdown", "sleep", "sync", "tail", "tee",
	"timeout", "touch", "true", "umount", "uname", "uptime", "wc", "which", "xargs",
}

// GuestCommands are the falconnic guest programs, by package path.
var GuestCommands = []string{"falconnic/guest/uinit", "falconnic/guest/agent", "falconnic/guest/xfer", "falconnic/guest/litmus", "falconnic/guest/rawframe", "falconnic/guest/nfsrdma"}

// guestModule is the module path the guest programs are built under.
// u-root's busybox builder takes import paths without a dot in the first
// element for the standard library, so "falconnic/..." is rewritten.
const guestModule = "falconnic.guest"

// rewriteImports moves falconnic imports to guestModule.
func rewriteImports(src []byte) []byte {
	return bytes.ReplaceAll(src, []byte(`"falconnic/`), []byte(`"`+guestModule+`/`))
}

// guestFile is one source file of the guest programs, relative to the
// source tree.
type guestFile struct {
	rel  string
	data []byte
}

// guestSources lists the Go files of the guest programs and of every
// falconnic package they import.
func guestSources(ctx context.Context, src string) ([]guestFile, error) {
	args := append([]string{"list", "-deps", "-json=ImportPath,Dir,GoFiles,Module"}, GuestCommands...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("image: listing the guest programs in %s: %w", src, cmdErr(err))
	}
	var files []guestFile
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath, Dir string
			GoFiles         []string
			Module          *struct{ Path string }
		}
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if p.Module == nil || p.Module.Path != "falconnic" {
			continue
		}
		for _, f := range p.GoFiles {
			data, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				return nil, err
			}
			rel, err := filepath.Rel(src, filepath.Join(p.Dir, f))
			if err != nil {
				return nil, err
			}
			files = append(files, guestFile{rel: filepath.ToSlash(rel), data: data})
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("image: no guest sources found in %s", src)
	}
	return files, nil
}

// goEnv is the environment for go and u-root: module mode, no cgo, this
// toolchain.
func goEnv(extra ...string) []string {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	return append(env, extra...)
}

// urootTool returns a writable copy of u-root's module and the u-root
// binary built from it, both cached per version.
func (b *builder) urootTool() (srcDir, bin string, err error) {
	base := filepath.Join(b.o.CacheDir, "u-root", URootVersion)
	srcDir, bin = filepath.Join(base, "src"), filepath.Join(base, "u-root")
	if _, err := os.Stat(filepath.Join(base, ".complete")); err == nil {
		return srcDir, bin, nil
	}
	b.progress("fetching u-root %s through the module proxy", URootVersion)
	os.RemoveAll(base)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(b.ctx, "go", "mod", "download", "-json", urootModule+"@"+URootVersion)
	cmd.Dir = base
	cmd.Env = goEnv("GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download u-root: %w", cmdErr(err))
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", "", fmt.Errorf("go mod download u-root: no module directory (%s)", m.Error)
	}
	if err := copyTree(m.Dir, srcDir); err != nil {
		return "", "", err
	}
	b.progress("building the u-root tool")
	cmd = exec.CommandContext(b.ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = srcDir
	cmd.Env = goEnv("GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building u-root: %v\n%s", err, out)
	}
	return srcDir, bin, os.WriteFile(filepath.Join(base, ".complete"), nil, 0o644)
}

// copyTree copies a directory of regular files, making the copy writable.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		d := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(d, 0o755)
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(d, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm()|0o200)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

var requireLine = regexp.MustCompile(`(?m)^\s*(github\.com/mdlayher/vsock)\s+(v\S+)`)

// urootBuild builds the initramfs: u-root's commands and ours in one
// busybox binary, over the base archive. Our programs are copied into a
// throwaway module (guestModule) that requires only what u-root already
// pins, and built in a Go workspace with u-root's module, so that no
// dependency of u-root's commands moves.
func (b *builder) urootBuild(work string, guest []guestFile, base, out string) error {
	usrc, ubin, err := b.urootTool()
	if err != nil {
		return err
	}
	ws := filepath.Join(work, "ws")
	mod := filepath.Join(ws, "guestmod")
	for _, g := range guest {
		p := filepath.Join(mod, filepath.FromSlash(g.rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, rewriteImports(g.data), 0o644); err != nil {
			return err
		}
	}
	ugomod, err := os.ReadFile(filepath.Join(usrc, "go.mod"))
	if err != nil {
		return err
	}
	gomod := "module " + guestModule + "\n\ngo 1.24\n"
	if m := requireLine.FindSubmatch(ugomod); m != nil {
		gomod += fmt.Sprintf("\nrequire %s %s\n", m[1], m[2])
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(usrc, "go.sum"), filepath.Join(mod, "go.sum")); err != nil {
		return err
	}
	gowork := filepath.Join(ws, "go.work")
	cmd := exec.CommandContext(b.ctx, "go", "work", "init", usrc, mod)
	cmd.Dir = ws
	cmd.Env = goEnv("GOWORK=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go work init: %v\n%s", err, out)
	}
	args := []string{"-o", out, "-base", base, "-initcmd", "init", "-uinitcmd", "uinit",
		"-defaultsh", "gosh", "-skip-ldd", "-tmp-dir", filepath.Join(work, "uroot-tmp")}
	for _, c := range URootCommands {
		args = append(args, urootModule+"/cmds/core/"+c)
	}
	for _, c := range GuestCommands {
		args = append(args, guestModule+strings.TrimPrefix(c, "falconnic"))
	}
	if err := os.MkdirAll(filepath.Join(work, "uroot-tmp"), 0o755); err != nil {
		return err
	}
	b.progress("building the u-root initramfs (%d commands; a minute or two)", len(URootCommands)+len(GuestCommands))
	cmd = exec.CommandContext(b.ctx, ubin, args...)
	cmd.Dir = ws
	cmd.Env = goEnv("GOWORK=" + gowork)
	if o, err := cmd.CombinedOutput(); err != nil {
		s := string(o)
		if len(s) > 4000 {
			s = "..." + s[len(s)-4000:]
		}
		return fmt.Errorf("u-root: %v\n%s", err, s)
	}
	return nil
}
