package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"falconnic/qemu"
)

func init() {
	register("image", "build the guest image (kernel + initramfs): image build [--cache DIR]", runImage)
}

func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "build" {
		return fmt.Errorf("%w: falconnic image build [--cache DIR] [--src DIR] [--extra SRC:DST]... [--extra-module KO]... [--force]", errUsage)
	}
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cache := fs.String("cache", qemu.DefaultCacheDir(), "cache directory for downloads and images")
	src := fs.String("src", "", "falconnic source tree (default: found from the working directory or the executable)")
	force := fs.Bool("force", false, "rebuild even if a cached image matches")
	quiet := fs.Bool("q", false, "no progress lines")
	var extra extraFlag
	fs.Var(&extra, "extra", "add host file SRC at DST in the guest (repeatable)")
	fs.Var(moduleFlag{&extra}, "extra-module", "add kernel module SRC (a .ko) to the guest and load it last (repeatable)")
	noDriver := fs.Bool("no-driver", false, "leave out falconnic.ko (built from guest-driver/ by default)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *src == "" {
		s, err := findSourceTree()
		if err != nil {
			return err
		}
		*src = s
	}
	if !*noDriver && !hasModule(extra, "falconnic.ko") {
		ko, err := buildDriver(ctx, *src, *cache, stderr)
		if err != nil {
			return err
		}
		if err := (moduleFlag{&extra}).Set(ko); err != nil {
			return err
		}
	}
	o := qemu.ImageOptions{CacheDir: *cache, SrcDir: *src, Extra: extra, Force: *force}
	if !*quiet {
		o.Progress = stderr
	}
	im, err := qemu.Build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kernel %s\ninitrd %s\n", im.KernelPath(), im.InitrdPath())
	return nil
}

// extraFlag collects --extra SRC:DST.
type extraFlag []qemu.ExtraFile

func (e *extraFlag) String() string { return fmt.Sprint(*e) }

func (e *extraFlag) Set(s string) error {
	src, dst, ok := strings.Cut(s, ":")
	if !ok || src == "" || !strings.HasPrefix(dst, "/") {
		return errors.New("want SRC:/ABSOLUTE/DST")
	}
	*e = append(*e, qemu.ExtraFile{Src: src, Dst: dst})
	return nil
}

// moduleFlag adds --extra-module SRC as /lib/modules/RELEASE/extra/NAME.ko,
// loaded at boot.
type moduleFlag struct{ e *extraFlag }

func (m moduleFlag) String() string { return "" }

func (m moduleFlag) Set(s string) error {
	if !strings.HasSuffix(s, ".ko") {
		return errors.New("want a .ko file")
	}
	dst := "/lib/modules/" + qemu.KernelRelease + "/extra/" + filepath.Base(s)
	*m.e = append(*m.e, qemu.ExtraFile{Src: s, Dst: dst, Load: true})
	return nil
}

// hasModule reports whether extra already loads a module named name.
func hasModule(extra extraFlag, name string) bool {
	for _, e := range extra {
		if e.Load && filepath.Base(e.Dst) == name {
			return true
		}
	}
	return false
}

// buildDriver builds falconnic.ko from SRC/guest-driver with its build.sh
// into CACHE/driver/HASH, HASH covering the driver's sources, and returns the
// module's path. An existing build with the same hash is reused, so the
// module's bytes (part of the image key) only change with its sources.
func buildDriver(ctx context.Context, src, cache string, stderr io.Writer) (string, error) {
	dir := filepath.Join(src, "guest-driver")
	var files []string
	for _, pat := range []string{"Kbuild", "build.sh", "*.c", "*.h", "include/uapi/*.h"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return "", fmt.Errorf("image: no driver sources in %s (use --no-driver)", dir)
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	out := filepath.Join(cache, "driver", hex.EncodeToString(h.Sum(nil))[:16])
	ko := filepath.Join(out, "falconnic.ko")
	if _, err := os.Stat(ko); err == nil {
		return ko, nil
	}
	fmt.Fprintf(stderr, "image: building falconnic.ko (guest-driver/build.sh %s)\n", out)
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "build.sh"), tmp)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("image: guest-driver/build.sh: %v: %s (use --no-driver to build without it)", err, strings.TrimSpace(log.String()))
	}
	os.RemoveAll(out)
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return ko, nil
}

// findSourceTree finds falconnic's source tree: the directory with a go.mod
// for module falconnic above the working directory, else above the
// executable.
func findSourceTree() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			b, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module falconnic\n")) {
				return d, nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", errors.New("cannot find the falconnic source tree (needed to build the guest programs): run from inside it or pass --src")
}
