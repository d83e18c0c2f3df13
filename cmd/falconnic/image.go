package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
