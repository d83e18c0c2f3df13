package qemu

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// LibDirs are the tree-relative directories searched for shared libraries,
// in order (Debian's multiarch layout).
var LibDirs = []string{
	"lib/x86_64-linux-gnu",
	"usr/lib/x86_64-linux-gnu",
	"lib64",
	"usr/lib64",
	"lib",
	"usr/lib",
}

// Tree is a directory holding extracted Debian packages. Paths given to and
// returned by its methods are relative to the root, without a leading "/";
// absolute symlinks are read as relative to the root, never the host.
type Tree struct{ Root string }

// Resolve follows symlinks of the last path component (at most 40) and
// returns the tree-relative path of the file itself.
func (t Tree) Resolve(rel string) (string, error) {
	p := cleanRel(rel)
	for hop := 0; hop < 40; hop++ {
		fi, err := os.Lstat(filepath.Join(t.Root, p))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return p, nil
		}
		target, err := os.Readlink(filepath.Join(t.Root, p))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			p = cleanRel(target)
		} else {
			p = cleanRel(path.Join(path.Dir(p), target))
		}
	}
	return "", fmt.Errorf("%s: too many levels of symlinks", rel)
}

// cleanRel cleans p and keeps it inside the tree.
func cleanRel(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// ELFInfo is what the loader needs to start an ELF file.
type ELFInfo struct {
	Needed  []string // DT_NEEDED sonames
	RunPath []string // DT_RUNPATH or DT_RPATH entries, $ORIGIN expanded
	Interp  string   // PT_INTERP, tree-relative; empty for libraries
}

// errNotELF marks files that are not ELF (scripts, data).
var errNotELF = errors.New("not an ELF file")

// ReadELF reads the dynamic-linking facts of tree-relative file rel.
func (t Tree) ReadELF(rel string) (ELFInfo, error) {
	real, err := t.Resolve(rel)
	if err != nil {
		return ELFInfo{}, err
	}
	full := filepath.Join(t.Root, real)
	if !hasELFMagic(full) {
		return ELFInfo{}, errNotELF
	}
	f, err := elf.Open(full)
	if err != nil {
		return ELFInfo{}, err
	}
	defer f.Close()
	var info ELFInfo
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				info.Interp = cleanRel(strings.TrimRight(string(b), "\x00"))
			}
		}
	}
	info.Needed, _ = f.ImportedLibraries()
	origin := path.Dir(rel)
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "/"+origin), "$ORIGIN", "/"+origin)
				if d != "" {
					info.RunPath = append(info.RunPath, cleanRel(d))
				}
			}
		}
	}
	return info, nil
}

func hasELFMagic(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [4]byte
	_, err = io.ReadFull(f, m[:])
	return err == nil && string(m[:]) == elf.ELFMAG
}

// LibClosure returns every file needed to run roots: the tree-relative
// destination path (where the loader looks: DIR/SONAME, or the interpreter
// path) mapped to the tree-relative file holding its bytes. Roots that are
// not ELF are skipped. Sonames found nowhere in the tree are an error that
// names each and who needs it.
func LibClosure(roots []string, readELF func(string) (ELFInfo, error), resolve func(string) (string, error)) (map[string]string, error) {
	out := map[string]string{}
	queue := append([]string(nil), roots...)
	seen := map[string]bool{}
	var missing []string
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if seen[f] {
			continue
		}
		seen[f] = true
		info, err := readELF(f)
		if errors.Is(err, errNotELF) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if info.Interp != "" {
			if _, done := out[info.Interp]; !done {
				src, err := resolve(info.Interp)
				if err != nil {
					missing = append(missing, fmt.Sprintf("%s (interpreter of %s)", info.Interp, f))
				} else {
					out[info.Interp] = src
					queue = append(queue, info.Interp)
				}
			}
		}
		for _, so := range info.Needed {
			dest, src, ok := findLib(so, info.RunPath, resolve)
			if !ok {
				missing = append(missing, fmt.Sprintf("%s (needed by %s)", so, f))
				continue
			}
			if _, done := out[dest]; !done {
				out[dest] = src
				queue = append(queue, dest)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("shared libraries missing from the packages: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func findLib(soname string, runpath []string, resolve func(string) (string, error)) (dest, src string, ok bool) {
	if strings.Contains(soname, "/") {
		return "", "", false
	}
	for _, d := range append(append([]string(nil), runpath...), LibDirs...) {
		dest := path.Join(d, soname)
		if src, err := resolve(dest); err == nil {
			return dest, src, true
		}
	}
	return "", "", false
}
